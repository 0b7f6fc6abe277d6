"""One task on a seat, through the SDK's loop.

Only this module acts on a display (the seat's health checks only look). A task
is one call of ``AsyncComputerToolset.run`` whose callbacks are wired to the daemon:

* ``approve_safety_checks`` -> an approval record, awaited until decided;
* ``before_action`` -> the ``actions`` policy, and the screen binding of approvals;
* ``cancelled`` -> ``cuctl cancel`` and shutdown;
* ``on_diagnostic`` -> the task's event log.

A thin wrapper around the driver (:mod:`cud.daemon.tasks.recording_driver`) times
every call and records each screenshot the model is about to receive; the wrapper around ``responses.create``
(:mod:`cud.daemon.model.client`) shapes what is sent and times and meters the
model. Whatever is left of a step is the daemon's own overhead.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI
from openai.lib.computer import AsyncComputerToolset, ComputerUseError

from cud.daemon.budget.guard import BudgetGuard
from cud.daemon.model.client import ModelRequests, Sent
from cud.daemon.store.trajectory import StepRecord, TaskUsage, ms_since, tokens_of
from cud.daemon.targets.gate import TargetGate
from cud.daemon.targets.rules import parse_rules
from cud.daemon.tasks.recording_driver import RecordingDriver
from cud.daemon.tasks.screen_binding import ScreenWatch
from cud.daemon.tasks.stuck import Stuck, StuckGuard
from cud.errors import ApprovalError, BudgetExceeded, CudError, TaskStuck, TaskTimeout
from cud.protocol import ArtifactView, TaskView, VerdictView

if TYPE_CHECKING:
    from cud.daemon.seats.seat import Seat

__all__ = ()

log = logging.getLogger("cud.runner")

_POINTER = {"click", "double_click", "move", "scroll", "drag"}
_HARMLESS = {"screenshot", "wait"}
#: Half-width of the square compared to bind an approval to the screen the approver saw.
BINDING_RADIUS = 16


@dataclasses.dataclass(frozen=True)
class Ending:
    """How the model's part of a task ended: what :meth:`TaskRun.end` records."""

    state: str  # succeeded, failed, cancelled, interrupted or stuck
    final_message: str | None = None
    error: dict[str, Any] | None = None
    reason: str | None = None


class TaskRun:
    """The state of the one running task: its flags, its current step, its approvals."""

    def __init__(self, seat: Seat, task: TaskView) -> None:
        self.seat = seat
        self.store = seat.store
        self.task = task
        self.policy = task["approval"]
        self.cancel_reason: str | None = None
        #: The task ends ``interrupted``, not ``cancelled``, when stopped: the daemon stops, or an ``interrupt``.
        self.ends_interrupted = False
        #: Set when the task ran past its max_duration: it then fails with this error.
        self.timed_out: TaskTimeout | None = None
        #: Set when the task ended at a budget (cud.daemon.budget.guard): it then ends budget_exceeded.
        self.over_budget: BudgetExceeded | None = None
        self.job: asyncio.Task[Any] | None = None
        self.in_model = False
        self.step: StepRecord | None = None
        self.steps = 0
        self.last_screenshot: str | None = None
        self._covered = 0  # actions still covered by the approval just granted
        self._bound = False  # those actions are bound to the screen the approver saw
        self._watch: ScreenWatch | None = None  # what changed by itself around their targets
        #: The stuck guard: the task's own [guard] values, else the daemon's (tasks from before it).
        self.guard_settings = task.get("guard") or seat.config.guard.for_task({})
        self.guard = StuckGuard(self.guard_settings["repeat_limit"], self.guard_settings["cycle_limit"])
        #: What each action touches, the rules on it, the element identities approvals bound.
        self.gate = TargetGate(seat.targets, seat.config.rules,
                               parse_rules("rules", task.get("rules") or [], stricter_only=True))
        #: Who asked for a pause that has not landed yet / who paused the task, while it is paused.
        self.pause_requested_by: dict[str, Any] | None = None
        self.paused_by: dict[str, Any] | None = None
        self._resumed = asyncio.Event()
        #: Set by :meth:`cancel`: what waits outside the model's loop (a spec's setup) stops at it.
        self.cancelled = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self.usage = TaskUsage()
        self.budget = BudgetGuard(self)
        #: Awaited once, before the first action or approval of the task (the seat's video has its
        #: first frame then, so every step and approval has its moment in it).
        self.before_acting: Callable[[], Awaitable[None]] | None = None
        #: Awaited once the last step is recorded, before the task's end (the seat's video stops there).
        self.before_end: Callable[[], Awaitable[None]] | None = None

    # -- control ------------------------------------------------------------------------
    def cancel(self, reason: str, *, interrupted: bool = False) -> None:
        """Stop the task; it ends ``cancelled`` with ``reason``, or ``interrupted`` if ``interrupted``."""
        if self.cancel_reason is not None:
            return
        self.cancel_reason = reason
        self.ends_interrupted = interrupted
        self._resumed.set()  # a paused task ends too
        self.cancelled.set()
        self.seat.approvals.cancel_task(self.task["id"], reason)
        # The SDK checks `cancelled` between calls; a slow model request is cut short here.
        if self.in_model and self.job is not None:
            self.job.cancel()

    def is_cancelled(self) -> bool:
        return self.cancel_reason is not None

    def _out_of_time(self, limit: int) -> None:
        if self.cancel_reason is not None:
            return
        self.timed_out = TaskTimeout(
            f"task {self.task['id']} ran past its max_duration of {limit} s and was stopped",
            max_duration=limit,
        )
        self.cancel(f"ran past its max_duration of {limit} s")

    def start_clock(self) -> None:
        """Start the task's max_duration (once): from the start, setup and approval waits included,
        since the limit bounds what a submitter waits for, whatever the task is doing."""
        if self._timer is None:
            limit = self.task["max_duration"] or self.seat.config.max_duration
            self._timer = asyncio.get_running_loop().call_later(limit, self._out_of_time, limit)

    async def interruptible(self, work: Awaitable[Any]) -> bool:
        """Await ``work`` unless the task is cancelled (or runs out of time) first: then stop it. True if it ended."""
        job = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.cancelled.wait())
        try:
            await asyncio.wait({job, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if job.done():
            job.result()  # its error, if any
            return True
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job
        return False

    async def execute(self, client: AsyncOpenAI) -> None:
        """The whole task, for a prompt without a spec: the model's part, then its end."""
        self.end(await self.play(client))

    async def play(self, client: AsyncOpenAI) -> Ending:
        """The model's part: one run of the SDK's loop, until it answers, fails, or is stopped."""
        self.step = StepRecord(number=1, started=time.monotonic(), saw=None)
        toolset = AsyncComputerToolset(RecordingDriver(self.seat.driver, self))  # type: ignore[arg-type]  # its action methods are set at run time
        self.start_clock()
        self.seat.targets.warm_soon()  # connecting is no action's lookup; the task does not wait for it
        # The [request] table holds none of these keys (the config refuses them); copied per
        # task so nothing the SDK does to a request can reach the next one.
        params: Any = {
            **copy.deepcopy(dict(self.seat.config.request)),
            "model": self.task["model"],
            "input": self.task["prompt"],
            "tools": [{"type": "computer"}],
        }
        config = self.seat.config
        requests = ModelRequests(config.history, config.max_retries, on_start=self.on_model_start,
                                 on_end=self.on_model_end, on_retry=self.on_model_retry,
                                 before=self.budget.before_request)
        self.job = asyncio.create_task(
            toolset.run(
                requests.wrap(client),
                params,
                max_steps=self.task["max_steps"],
                approve_safety_checks=self.approve_safety_checks,
                before_action=self.before_action,
                cancelled=self.is_cancelled,
                on_diagnostic=self.on_diagnostic,
            )
        )
        state, final, error = "failed", None, None
        try:
            response = await self.job
            state, final = "succeeded", response.output_text
        except asyncio.CancelledError:
            if self.cancel_reason is None:
                raise  # not ours: the daemon itself is being torn down
        except TaskStuck as exc:
            state, error = "stuck", exc.to_dict()
        except ComputerUseError as exc:
            if self.cancel_reason is None:
                error = {"kind": "computer_use", "message": self.seat.redact(str(exc)), "details": {}}
        except CudError as exc:
            error = exc.to_dict()
            error["message"] = self.seat.redact(error["message"])
        except openai.APIError as exc:
            error = {"kind": "api", "message": self.seat.redact(str(exc)), "details": _api_details(exc)}
        except Exception as exc:  # a bug or an unexpected library error: keep the daemon, fail the task
            log.exception("task %d failed unexpectedly", self.task["id"])
            error = {"kind": "internal", "message": self.seat.redact(f"{type(exc).__name__}: {exc}"), "details": {}}
        finally:
            self.stop_clock()
            toolset.close()
            await self._set_watch(None)
        self._finish_step()
        if self.before_end is not None:
            await self.before_end()
        return self.ending(state, final, error)

    def stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def ending(self, state: str, final: str | None = None, error: dict[str, Any] | None = None) -> Ending:
        """How the task ends, given how its work ended: a cancel or the time limit decide unless it succeeded."""
        if self.timed_out is not None and state != "succeeded":
            return Ending("failed", error=self.timed_out.to_dict(), reason=self.cancel_reason)
        if self.over_budget is not None and self.cancel_reason is None:
            return Ending("budget_exceeded", error=self.over_budget.to_dict(), reason=self.over_budget.message)
        if self.cancel_reason is not None and state != "succeeded":
            return Ending("interrupted" if self.ends_interrupted else "cancelled", error=error, reason=self.cancel_reason)
        return Ending(state, final, error)

    def end(self, ending: Ending, *, verdict: VerdictView | None = None,
            artifacts: list[ArtifactView] | None = None) -> None:
        """Record the task's end (with a spec's verdict and collected files, in the same write)."""
        self.stop_clock()
        self.store.finish(self.task["id"], ending.state, final_message=ending.final_message, error=ending.error,
                          reason=ending.reason, verdict=verdict, artifacts=artifacts)
        log.info("task %d ended %s on seat %s", self.task["id"], ending.state, self.seat.name)

    # -- timing hooks ------------------------------------------------------------------
    def on_model_start(self) -> None:
        if self.step is not None and (self.step.model_ms or self.step.actions):
            ended = time.monotonic()
            self._finish_step(ended)
            self.step = StepRecord(number=self.steps + 1, started=ended, saw=self.last_screenshot)
        self.in_model = True

    def on_model_end(self, model_ms: float, response: Any, sent: Sent) -> None:
        self.in_model = False
        assert self.step is not None
        self.step.model_ms += model_ms
        usage = getattr(response, "usage", None)
        self.step.add_request(sent.bytes, sent.attempts, sent.images, sent.image_bytes, usage)
        if usage is not None:
            self.budget.answered(tokens_of(usage))
        if response is not None:
            self.step.messages = [
                part.text
                for item in response.output
                if item.type == "message"
                for part in item.content
                if part.type == "output_text"
            ]

    def on_model_retry(self, status: int, attempt: int, retrying: bool) -> None:
        self.store.add_event(self.task["id"], "model_retry", {"step": self.step.number if self.step else None,
                                                              "status": status, "attempt": attempt,
                                                              "retrying": retrying})

    def _finish_step(self, ended: float | None = None) -> None:
        step, self.step = self.step, None
        if step is None or not (step.model_ms or step.actions):
            return
        self.steps = step.number
        record = step.finish(ended or time.monotonic())
        record.update(self.budget.costs(record))
        self.usage.add(record)
        self.store.add_event(self.task["id"], "step", record, steps=step.number, usage=self.usage.as_dict())

    def on_driver_call(self, name: str, action: Any, ms: float) -> None:
        assert self.step is not None
        self.step.driver_ms += ms
        record = {"action": _plain(action), "ms": round(ms, 3)}
        if self.gate.current is not None:
            record["target"] = self.gate.current
        self.step.actions.append(record)
        self.store.add_event(self.task["id"], "action", {"step": self.step.number, **record})

    def on_screenshot(self, shot: Any, ms: float) -> None:
        assert self.step is not None
        self.step.driver_ms += ms
        # Writing the file is the daemon's own cost, so it stays out of driver_ms.
        name = self.seat.trajectories.save_screenshot(self.task["id"], self.step.number, shot["image_url"])
        self.step.screenshot = self.last_screenshot = name

    def on_diagnostic(self, diagnostic: Any) -> None:
        if diagnostic.get("reason") not in ("completed", "started"):
            self.store.add_event(self.task["id"], "diagnostic", dict(diagnostic))

    # -- pause, resume, take over -------------------------------------------------------
    def request_pause(self, by: dict[str, Any]) -> None:
        if self.paused_by is None:
            self.pause_requested_by = self.pause_requested_by or by
            self._resumed.clear()

    def resume(self) -> None:
        self.pause_requested_by = None
        self._resumed.set()

    async def _pause(self) -> bool:
        """Hold the task at its boundary until resumed; False if it was cancelled meanwhile."""
        assert self.step is not None and self.pause_requested_by is not None
        by, self.pause_requested_by = self.pause_requested_by, None
        self.store.control(self.task["id"], "paused", by["uid"], by["name"], state="paused")
        self.paused_by = by
        started = time.monotonic()
        try:
            await self._resumed.wait()
        finally:
            self.paused_by = None
            self.step.paused_ms += ms_since(started)
        return not self.is_cancelled()

    async def human_act(self, action: dict[str, Any], by: dict[str, Any]) -> float:
        """Run a person's action on the paused task's seat: the model's actions' driver and checks."""
        assert self.step is not None
        started = time.monotonic()
        await self.seat.driver.call(action["type"], action)
        ms = ms_since(started)
        self.step.actions.append({"action": action, "ms": round(ms, 3), "by": by})
        self.store.control(self.task["id"], "human_action", by["uid"], by["name"], audit="act",
                           data={"action": action, "ms": round(ms, 3)})
        return ms

    # -- approvals -----------------------------------------------------------------------
    async def approve_safety_checks(self, call: Any) -> bool:
        actions = [_plain(a) for a in (call.actions if call.actions is not None else [call.action])]
        checks = [{"id": c.id, "code": c.code, "message": c.message} for c in call.pending_safety_checks or []]
        await self._before_acting()
        targets = [await self.gate.look(a) for a in actions]
        if not await self._ask("safety", checks, actions, targets):
            return False
        self._covered, self._bound = len(actions), True
        self.gate.bind(targets)
        return True

    async def _before_acting(self) -> None:
        """The first time the model's answer is acted on (or asked about): the hook, once."""
        if self.before_acting is not None:
            hook, self.before_acting = self.before_acting, None
            await hook()

    async def before_action(self, action: Any) -> bool:
        if self.is_cancelled():
            return False
        kind = action.type
        # The SDK asks before every action and before the screenshot that ends a batch: a
        # pause lands there, and the screenshot after it shows what people did meanwhile.
        if kind == "screenshot" and self.pause_requested_by is not None and not await self._pause():
            return False
        await self._before_acting()
        plain = _plain(action)
        stuck = self.guard.act(plain) if self.guard.active else None
        if stuck is not None and not await self._stuck(stuck):
            return False
        target = await self.gate.look(plain)
        verdict = self.gate.verdict(plain)  # a deny rule raises here: the action never runs
        asks = verdict.decision == "ask" if verdict is not None else self.policy == "actions" and kind not in _HARMLESS
        if self._covered:
            self._covered -= 1
        elif asks:
            checks = [verdict.as_check()] if verdict is not None else []
            if not await self._ask("action", checks, [plain], [target]):
                return False
            self._bound = True
            self.gate.bind([target])
            await self.gate.look(plain)  # what is there now, after the approver's wait
        else:
            self._bound = False
            self.gate.unbind()
        if self._bound and kind in _POINTER:
            self.gate.check(plain)
            await self._check_binding(action)
        return True

    async def _stuck(self, stuck: Stuck) -> bool:
        """The ``stuck`` event, then a person's word (on_stuck "ask") or the task's end as ``stuck``.
        True if the model may go on; False if the task was cancelled meanwhile."""
        self.store.add_event(self.task["id"], "stuck", stuck.as_event())
        if self.guard_settings["on_stuck"] != "ask":
            raise TaskStuck(f"{stuck.message}; the task was stopped (its on_stuck is 'fail')", **stuck.details)
        check = {"id": "stuck", "code": "stuck", "message": f"{stuck.message}; let it continue?"}
        try:
            return await self._ask("stuck", [check], [stuck.action], [None], bind=False)
        except ApprovalError as exc:  # denied or timed out: a person did not let it go on
            raise TaskStuck(f"{stuck.message}; {exc.message}", **stuck.details) from None

    async def _ask(self, kind: str, checks: list[dict[str, Any]], actions: list[dict[str, Any]],
                   targets: list[Any], *, bind: bool = True) -> bool:
        """Create an approval and wait for it. True if approved, False if the task was cancelled.

        ``bind``: the actions run bound to the screen the approver saw (a stuck approval binds nothing).
        """
        assert self.step is not None
        await self._screen_for_approver()
        started = time.monotonic()
        timeout = self.seat.config.approval_timeout
        approval = self.store.create_approval(
            self.task["id"], kind, checks, actions, self.step.number, self.last_screenshot, timeout, targets
        )
        # While the approver looks, learn what changes by itself around the targets.
        points = [p for a in actions for p in _targets(a)] if bind else []
        watch = ScreenWatch(self.seat.driver, points, BINDING_RADIUS) if points and self.last_screenshot else None
        if watch is not None:
            await watch.start()
        try:
            outcome = await self.seat.approvals.wait(approval["id"], timeout)
        finally:
            if watch is not None:
                await watch.stop()
        self.step.approval_ms += ms_since(started)
        if outcome == "approved":
            await self._set_watch(watch)
            return True
        if outcome == "cancelled":
            return False
        decided = self.store.approval(approval["id"])
        if outcome == "denied":
            who = decided["decided_by"] or {"name": "?", "uid": -1}
            because = f": {decided['reason']}" if decided["reason"] else ""
            raise ApprovalError(
                f"approval {approval['id']} was denied by {who['name']} (uid {who['uid']}){because}",
                id=approval["id"],
                outcome="denied",
            )
        raise ApprovalError(
            f"approval {approval['id']} timed out after {timeout:g} s with no decision (the daemon's config key "
            "'approval_timeout')",
            id=approval["id"],
            outcome=outcome,
        )

    async def _screen_for_approver(self) -> None:
        """A model that acts before it has looked (its first output an action): the approver is shown
        the screen as it is now, and the approval binds to that frame, as to the model's own screenshot."""
        if self.last_screenshot is not None:
            return
        assert self.step is not None
        shot = await self.seat.driver.call("screenshot")
        self.last_screenshot = self.seat.trajectories.save_screenshot(self.task["id"], self.step.number,
                                                                      shot["image_url"], "-approval")

    async def _check_binding(self, action: Any) -> None:
        """Refuse an approved pointer action if the screen around its target changed since it was shown."""
        if self.last_screenshot is None:
            raise ApprovalError(
                "the approved action has no screenshot to compare with: the model acted before seeing the screen",
                action=_plain(action),
            )
        if self._watch is None:
            await self._set_watch(ScreenWatch(self.seat.driver, [], BINDING_RADIUS))
        assert self._watch is not None
        # Off-screen points clip to equal (empty) patches; the driver's bounds check rejects them.
        changed = await self._watch.changed_point(_targets(_plain(action)))
        if changed is not None:
            x, y = changed
            raise ApprovalError(
                f"the screen around ({x}, {y}) changed since it was approved; the action was not run",
                x=x,
                y=y,
                action=_plain(action),
            )

    async def _set_watch(self, watch: ScreenWatch | None) -> None:
        if self._watch is not None and self._watch is not watch:
            await self._watch.stop()
        self._watch = watch


def _targets(action: dict[str, Any]) -> list[tuple[int, int]]:
    """The points an approved pointer action must find unchanged: its target, a drag's two ends."""
    if action.get("type") not in _POINTER:
        return []
    if action.get("type") == "drag":
        path = [(p.get("x"), p.get("y")) for p in action.get("path") or [] if isinstance(p, dict)]
        points = path[:1] + path[-1:]
    else:
        points = [(action.get("x"), action.get("y"))]
    # Malformed points are the driver's to reject; only whole integer points are compared.
    return [(x, y) for x, y in points if isinstance(x, int) and isinstance(y, int)]


def _plain(action: Any) -> dict[str, Any]:
    if hasattr(action, "to_dict"):
        return dict(action.to_dict())
    return dict(action) if isinstance(action, dict) else {"value": repr(action)}


def _api_details(exc: openai.APIError) -> dict[str, Any]:
    status = getattr(exc, "status_code", None)
    return {"status": status} if status is not None else {}
