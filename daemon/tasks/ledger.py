"""A task's steps as they happen: what each step's model request, actions, approvals and pauses took.

A *step* is one answer of the model and the actions it asked for. It begins when the
previous step's last action is done (the first when the model's part begins) and is
written, as a ``step`` event with its timings and usage, when the next request to the
model goes out or the model's part ends: so a step's record holds all it did. A step that
asked for nothing (no model time, no action) is not written.

The ledger only records; what may happen is :mod:`cud.daemon.tasks.checkpoint`'s to decide.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cud.daemon.store.trajectory import StepTimings, TaskUsage

if TYPE_CHECKING:
    from cud.daemon.model.client import Sent
    from cud.daemon.store.database import Store
    from cud.daemon.store.trajectory import Trajectories

__all__ = ("StepLedger",)


class StepLedger:
    """The current step of one task, the steps written so far, and the task's usage."""

    def __init__(self, task_id: int, store: Store, trajectories: Trajectories,
                 costs: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.task_id = task_id
        self.store = store
        self.trajectories = trajectories
        #: A step event's ``cost`` and ``total_cost`` (the task's budget meter counts them).
        self._costs = costs
        #: The step under way (None before the model's part and after it).
        self.step: StepTimings | None = None
        #: How many steps were written.
        self.steps = 0
        #: The file of the last screenshot the model was sent (or an approver shown): what an approval binds to.
        self.last_screenshot: str | None = None
        self.usage = TaskUsage()
        #: A request to the model is out (a cancel cuts it short rather than wait for the answer).
        self.in_model = False

    def begin(self) -> None:
        """The model's part begins: its first step."""
        self.step = StepTimings(number=1, started=time.monotonic(), saw=None)

    # -- the model's side ----------------------------------------------------------------
    def model_started(self) -> None:
        """A request goes out: the step before it ends here if it did anything."""
        if self.step is not None and (self.step.model_ms or self.step.actions):
            ended = time.monotonic()
            self.finish_step(ended)
            self.step = StepTimings(number=self.steps + 1, started=ended, saw=self.last_screenshot)
        self.in_model = True

    def model_answered(self, model_ms: float, sent: Sent, tokens: dict[str, int] | None,
                       messages: list[str] | None) -> None:
        """The request came back (or failed: ``tokens`` and ``messages`` None) after ``model_ms``."""
        self.in_model = False
        assert self.step is not None
        self.step.model_ms += model_ms
        self.step.add_request(sent.bytes, sent.attempts, sent.images, sent.image_bytes, tokens or {})
        if messages is not None:
            self.step.messages = messages

    def model_retried(self, status: int, attempt: int, retrying: bool) -> None:
        self.event("model_retry", {"step": self.step.number if self.step else None,
                                   "status": status, "attempt": attempt, "retrying": retrying})

    # -- the display's side ----------------------------------------------------------------
    def action_done(self, action: dict[str, Any], ms: float, element: Any) -> None:
        """An action ran in ``ms`` on the driver; ``element``: what it touched (None: nothing known)."""
        assert self.step is not None
        self.step.driver_ms += ms
        record = {"action": action, "ms": round(ms, 3)}
        if element is not None:
            record["target"] = element
        self.step.actions.append(record)
        self.event("action", {"step": self.step.number, **record})

    def human_action(self, action: dict[str, Any], ms: float, by: dict[str, Any]) -> None:
        """A person's action on the paused task's seat: in the step, and the control audit."""
        assert self.step is not None
        self.step.actions.append({"action": action, "ms": round(ms, 3), "by": by})
        self.store.control(self.task_id, "human_action", by["uid"], by["name"], audit="act",
                           data={"action": action, "ms": round(ms, 3)})

    def screenshot_taken(self, image_url: str, ms: float) -> None:
        """The screenshot the model is about to receive, taken in ``ms``: kept as the step's file.

        One taken before the step's request (a chat model is sent the screen with its first request,
        where the other APIs' models ask for it) is what the step's model sees: kept as its own file,
        as the step's ``saw``, so the screenshot after the step's actions does not overwrite it."""
        step = self.step
        assert step is not None
        step.driver_ms += ms
        before = not (step.model_ms or step.actions or step.usage["requests"])
        # Writing the file is the daemon's own cost, so it stays out of driver_ms.
        name = self.trajectories.save_screenshot(self.task_id, step.number, image_url, "-seen" if before else "")
        self.last_screenshot = name
        if before:
            step.saw = name
        else:
            step.screenshot = name

    def approver_screenshot(self, image_url: str) -> None:
        """The screen shown to an approver when the model has not looked yet: the file approvals bind to."""
        assert self.step is not None
        self.last_screenshot = self.trajectories.save_screenshot(self.task_id, self.step.number, image_url,
                                                                 "-approval")

    # -- people's time ----------------------------------------------------------------------
    def add_approval_ms(self, ms: float) -> None:
        assert self.step is not None
        self.step.approval_ms += ms

    def add_paused_ms(self, ms: float) -> None:
        assert self.step is not None
        self.step.paused_ms += ms

    # -- writing ------------------------------------------------------------------------------
    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.add_event(self.task_id, kind, data)

    def finish_step(self, ended: float | None = None) -> None:
        """Write the step under way (if it did anything) as a ``step`` event; there is none after."""
        step, self.step = self.step, None
        if step is None or not (step.model_ms or step.actions):
            return
        self.steps = step.number
        record = step.finish(ended or time.monotonic())
        record.update(self._costs(record))
        self.usage.add(record)
        self.store.add_event(self.task_id, "step", record, steps=step.number, usage=self.usage.as_dict())
