"""What each live task is doing now: one ``follow`` per running, waiting or paused task.

``list`` tells a task's state and step count, not its current action; the
events do. The console follows each task that is under way (as ``cuctl
follow`` would) and keeps one short phrase per task, like ``cuctl follow``'s
status line but for a page: no "run cuctl …" hints (the page has the buttons),
and who paused, resumed or acted, which the terminal prints on lines of their
own. A follow ends with its task; a lost one is simply started again by the
next :meth:`Watch.track`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from cud.console.link import Link
from cud.errors import CudError
from cud.phrases.actions import describe, describe_action
from cud.protocol import LIVE_STATES

__all__ = ("Watch",)

log = logging.getLogger("cud.console")



def doing(event: dict[str, Any], before: str) -> str:
    """What the task is doing after ``event``, given what it was doing before."""
    kind, data = event.get("kind"), event.get("data") or {}
    by = data["by"].get("name") if isinstance(data.get("by"), dict) else None
    if kind in ("running", "step"):
        return "waiting for the model"
    if kind == "action":
        return describe_action(data.get("action"), data.get("target"), 60)
    if kind == "human_action":
        return f"{by or 'a person'}: {describe(data.get('action'), 50)}"
    if kind == "approval_requested":
        return f"waiting for approval {data.get('approval_id')}"
    if kind == "approval_decided":
        return f"approval {data.get('approval_id')} {data.get('outcome')}" + (f" by {by}" if by else "")
    if kind == "pause_requested":
        return "pausing after this batch" + (f" (asked by {by})" if by else "")
    if kind == "paused":
        return "paused"
    if kind == "resumed":
        return "resumed" + (f" by {by}" if by else "")
    if kind == "cancel_requested":
        return "cancelling"
    if kind == "interrupt_requested":
        return "interrupting"
    if kind == "end":
        return f"ended {data.get('state')}"
    return before


class Watch:
    def __init__(self, link: Link) -> None:
        self.link = link
        self.now: dict[int, str] = {}
        self._follows: dict[int, asyncio.Task[None]] = {}

    def track(self, tasks: list[dict[str, Any]]) -> None:
        """Follow every live task of ``tasks`` not followed yet; forget tasks no longer listed."""
        listed = {t["id"] for t in tasks}
        for task in tasks:
            if task["state"] in LIVE_STATES and task["id"] not in self._follows:
                self._follows[task["id"]] = asyncio.create_task(self._follow(task["id"]), name=f"follow-{task['id']}")
        for task_id in [t for t in self.now if t not in listed]:  # pruned by the daemon's retention
            del self.now[task_id]

    async def _follow(self, task_id: int) -> None:
        def on_event(message: Any) -> None:
            self.now[task_id] = doing(message["event"], self.now.get(task_id, ""))

        try:
            await self.link.call("follow", on_event, wait_forever=True, id=task_id)
        except CudError as exc:  # the daemon went away or refused: the next track() tries again
            log.info("following task %d stopped: %s", task_id, exc.message)
        finally:
            self._follows.pop(task_id, None)

    async def close(self) -> None:
        follows = list(self._follows.values())
        for follow in follows:
            follow.cancel()
        await asyncio.gather(*follows, return_exceptions=True)
