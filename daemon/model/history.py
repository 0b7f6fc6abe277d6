"""What of a task's history travels to the model: the ``[history]`` table and its two modes.

The SDK's loop (``AsyncComputerToolset.run``) keeps the whole history and hands it
to ``responses.create`` every step; the daemon's wrapper around that call (see
:mod:`cud.daemon.model.client`) passes it through one of these before it is sent:

``stored`` (the default)
    Each request after the first continues the previous response
    (``previous_response_id``) and carries only the items the server has not seen:
    the computer call outputs with their new screenshots. Once a request is
    answered its items are dropped from the loop's list, so a task's memory is flat
    too, whatever its length.
``replay`` (for ``[request] store = false``)
    The whole history, under a budget: the newest ``keep_screenshots`` screenshots
    in full and at most ``max_image_bytes`` of image data; older screenshots become
    a 1x1 placeholder (the model is told so in a note after the prompt). Past
    ``max_images`` images the oldest steps are left out whole. The items a
    ``compaction`` item supersedes are never sent again.

Both edit the loop's list in place (screenshots replaced, answered items dropped):
it is the list the SDK sends and then extends, and nothing of the SDK reads an
item back once sent (it checks responses against ids it keeps itself).
"""

from __future__ import annotations

import base64
import dataclasses
import struct
import zlib
from typing import Any, Literal, Protocol

from cud.daemon.config_values import bad
from cud.daemon.config_values import table as checked_table
from cud.errors import ConfigError
from cud.model_api.image_limits import MAX_IMAGE_BYTES, MAX_IMAGES, image_bytes, image_urls

__all__ = ("HISTORY_KEYS", "History", "HistoryShaper", "load_history", "shaper_for")

HistoryMode = Literal["stored", "replay"]
#: The keys of the ``[history]`` table.
HISTORY_KEYS = frozenset({"mode", "keep_screenshots", "max_image_bytes", "max_images"})


@dataclasses.dataclass(frozen=True)
class History:
    mode: HistoryMode = "stored"
    #: Replay: screenshots sent in full, newest first.
    keep_screenshots: int = 8
    #: Replay: image data in one request, below the API's 50 MB.
    max_image_bytes: int = 40_000_000
    #: Replay: images in one request (placeholders count), below the API's 500.
    max_images: int = 400


def load_history(table: object, request: dict[str, Any]) -> History:
    """``[history]``; its mode defaults from ``[request] store`` (false: replay, else stored)."""
    table = checked_table("history", table, HISTORY_KEYS)
    store = request.get("store")
    mode = table.get("mode", "replay" if store is False else "stored")
    if mode not in ("stored", "replay"):
        raise bad("history.mode", mode, "'stored' or 'replay'")
    if mode == "stored" and store is False:
        raise ConfigError(
            "config key 'history.mode' is 'stored' but [request] store = false: a response the API does not "
            "store cannot be continued; set history.mode = 'replay' (or drop store = false)",
            key="history.mode", value=repr(mode))
    values: dict[str, Any] = {"mode": mode}
    for key, high in (("keep_screenshots", MAX_IMAGES), ("max_images", MAX_IMAGES),
                      ("max_image_bytes", MAX_IMAGE_BYTES)):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise bad(f"history.{key}", value, f"an integer from 1 to {high} (the API's per-request limit)")
            values[key] = value
    history = History(**values)
    if history.keep_screenshots > history.max_images:
        raise ConfigError(
            f"config key 'history.keep_screenshots' ({history.keep_screenshots}) is more than "
            f"history.max_images ({history.max_images})", key="history.keep_screenshots",
            value=repr(history.keep_screenshots))
    return history


class HistoryShaper(Protocol):
    def request(self, items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        """What to send for the loop's ``items``: the input, and extra request parameters."""

    def accepted(self, items: list[Any], response: Any) -> None:
        """The model answered the request made from ``items``."""


def shaper_for(history: History) -> HistoryShaper:
    return StoredHistory() if history.mode == "stored" else ReplayHistory(history)


class StoredHistory:
    """Continue the previous response; send only what came after its output."""

    def __init__(self) -> None:
        self.previous_id: str | None = None
        self._output_ids: frozenset[str] = frozenset()
        self._output_count = 0

    def request(self, items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        if self.previous_id is None:
            return items, {}
        return items[self._new_from(items):], {"previous_response_id": self.previous_id}

    def _new_from(self, items: list[Any]) -> int:
        # The loop appends the previous response's output, then the call outputs: what
        # follows the last of that output is new. Scanned from the end, so O(new items).
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if isinstance(item, dict) and item.get("id") in self._output_ids:
                return index + 1
        return min(self._output_count, len(items))  # outputs without ids: the list was emptied before them

    def accepted(self, items: list[Any], response: Any) -> None:
        self.previous_id = response.id
        self._output_ids = frozenset(i for i in (getattr(item, "id", None) for item in response.output) if i)
        self._output_count = len(response.output)
        items.clear()  # the server holds them now; dropping them frees their screenshots


def _placeholder_png() -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


#: What an old screenshot becomes in replay mode: one grey pixel (the API wants an image there).
PLACEHOLDER = _placeholder_png()
PLACEHOLDER_BYTES = image_bytes(PLACEHOLDER)


class ReplayHistory:
    """The whole history every request, its images kept under the budget."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._head: int | None = None  # the items before the first response: the prompt
        self._note: dict[str, Any] | None = None

    def request(self, items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        if self._head is None:
            self._head = len(items)
        self._drop_superseded(items)
        self._keep_newest(items)
        self._leave_out_oldest(items)
        if self._note is None:
            return items, {}
        return [*items[:self._head], self._note, *items[self._head:]], {}

    def accepted(self, items: list[Any], response: Any) -> None:
        pass

    def _drop_superseded(self, items: list[Any]) -> None:
        # The API's advice: items before the newest compaction item may go, it carries them.
        for index in range(len(items) - 1, 0, -1):
            item = items[index]
            if isinstance(item, dict) and item.get("type") == "compaction":
                del items[:index]
                self._head = 0
                return

    def _keep_newest(self, items: list[Any]) -> None:
        screenshots = [output for output in map(_screenshot_of, items) if output is not None]
        # Placeholders are image data too: room for one per screenshot comes off the budget first.
        kept, kept_bytes = 0, len(screenshots) * PLACEHOLDER_BYTES
        for item in reversed(items):
            screenshot = _screenshot_of(item)
            if screenshot is None or screenshot["image_url"] == PLACEHOLDER:
                continue
            size = image_bytes(screenshot["image_url"])
            if kept and (kept >= self.history.keep_screenshots or kept_bytes + size > self.history.max_image_bytes):
                screenshot["image_url"] = PLACEHOLDER
                self._tell()
            else:
                kept, kept_bytes = kept + 1, kept_bytes + size

    def _leave_out_oldest(self, items: list[Any]) -> None:
        assert self._head is not None
        images = sum(1 for _ in image_urls(items))
        limit = self.history.max_images
        if images <= limit:
            return
        # Whole steps go, a tenth of the budget at a time, so the start of the history
        # (and the API's prompt cache over it) stays the same for the steps after.
        drop, cut = images - limit + max(1, limit // 10), self._head
        while drop > 0 and cut < len(items):
            end = _step_end(items, cut)
            drop -= sum(_screenshot_of(item) is not None for item in items[cut:end])
            cut = end
        del items[self._head:cut]
        self._tell()

    def _tell(self) -> None:
        if self._note is None:
            self._note = {"role": "user", "content": (
                f"Note from the harness: to keep each request within the API's limits, only the newest "
                f"{self.history.keep_screenshots} screenshots are sent in full. Older ones are replaced by a "
                "1x1 grey placeholder image, and the oldest steps may be left out; your earlier actions are "
                "still listed.")}


def _screenshot_of(item: Any) -> dict[str, Any] | None:
    if isinstance(item, dict) and item.get("type") == "computer_call_output":
        output = item.get("output")
        if isinstance(output, dict) and isinstance(output.get("image_url"), str):
            return output
    return None


def _step_end(items: list[Any], start: int) -> int:
    """The index after the step starting at ``start``: its output items, then its call outputs."""
    index = start
    while index < len(items) and not _is_output(items[index]):
        index += 1
    while index < len(items) and _is_output(items[index]):
        index += 1
    return index


def _is_output(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "computer_call_output"
