"""The conversation an Anthropic task sends: held as the very list each request sends, O(1) per step.

Only the newest ``keep`` screenshots are sent; older ones are replaced by a line of text, ``DROP_CHUNK``
at a time, so the cached prefix (``cache_control`` on the last user turn, as the prompt-caching docs
show) stays byte-identical between chunks. A dropped image is replaced once, in place, and its
base64 text freed: the history holds fewer than ``keep + DROP_CHUNK`` images however long the task.
The count and size of the images sent are kept as they change, not counted again each step, and the
cache marker moves from the previous last turn to the new one (the API allows at most four
breakpoints, so it must not stay on earlier turns).
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ("DROP_CHUNK", "DROPPED", "History")

#: Old screenshots are dropped this many at a time, so the cached prefix changes only every few turns.
DROP_CHUNK = 4
#: What a dropped screenshot becomes.
DROPPED = "(an earlier screenshot, no longer sent)"
_CACHED = {"type": "ephemeral"}


class History:
    """One task's messages, shaped for sending as they grow."""

    def __init__(self, prompt: str, keep: int) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        self._keep = keep
        #: The images still held, oldest first: (the content list holding one, its index there).
        self._held: deque[tuple[list[dict[str, Any]], int]] = deque()
        self._dropped = 0
        #: What the held images weigh decoded, as the API meters them.
        self.image_bytes = 0
        self._marked: dict[str, Any] | None = None

    @property
    def images(self) -> int:
        """How many images the next request sends (every held one)."""
        return len(self._held)

    def add_assistant(self, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "assistant", "content": content})

    def add_results(self, results: list[dict[str, Any]]) -> None:
        """A user turn of tool results; the images of their content lists are counted in."""
        self.messages.append({"role": "user", "content": results})
        for result in results:
            part = result.get("content") if result.get("type") == "tool_result" else None
            if not isinstance(part, list):
                continue
            for index, block in enumerate(part):
                if block.get("type") == "image":
                    self._held.append((part, index))
                    self.image_bytes += _decoded_size(block)

    def shaped(self) -> list[dict[str, Any]]:
        """The messages to send now: old screenshots dropped in whole chunks, the last turn marked as
        the end of the cached prefix. The list itself, not a copy: send it before adding to it."""
        excess = len(self._held) + self._dropped - self._keep
        while self._dropped < excess - excess % DROP_CHUNK:
            part, index = self._held.popleft()
            self.image_bytes -= _decoded_size(part[index])
            part[index] = {"type": "text", "text": DROPPED}
            self._dropped += 1
        last = self.messages[-1]["content"][-1]
        if self._marked is not last:
            if self._marked is not None:
                del self._marked["cache_control"]
            last["cache_control"] = dict(_CACHED)
            self._marked = last
        return self.messages


def _decoded_size(block: dict[str, Any]) -> int:
    return len(block["source"]["data"]) * 3 // 4
