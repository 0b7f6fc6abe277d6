"""One task on a seat: its life, from its start to the end it records.

:class:`TaskRun` holds what a task's life needs: the cancel and its reason, the time limit,
a pause and a person's actions in it, and how the task ends (:class:`Ending`). What it does
in between is another module's each:

* the model's loop is an API adapter's, picked by the task's model entry
  (:mod:`cud.daemon.tasks.adapters`: the SDK's ``AsyncComputerToolset`` for OpenAI's computer
  tool, the Messages API's computer tool for Anthropic's, chat completions for open models): it
  only translates between its API and the checkpoint;
* every action passes :class:`~cud.daemon.tasks.checkpoint.Checkpoint` (approvals, screen
  binding, rules, the stuck guard, the budget line) and is recorded in the step ledger
  (:class:`~cud.daemon.tasks.ledger.StepLedger`);
* the budget is :class:`~cud.daemon.budget.meter.BudgetMeter`'s.

Only a running task acts on a display, through these modules (the seat's health checks only look).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cud.daemon.budget.meter import BudgetMeter
from cud.daemon.store.trajectory import ms_since
from cud.daemon.tasks.adapters import adapter_for
from cud.daemon.tasks.checkpoint import Checkpoint
from cud.daemon.tasks.ledger import StepLedger
from cud.errors import BudgetExceeded, CudError, InternalError, TaskStuck, TaskTimeout
from cud.protocol import ArtifactView, TaskView, VerdictView

if TYPE_CHECKING:
    from cud.daemon.model.clients import ModelClients
    from cud.daemon.seats.seat import Seat

__all__ = ()

log = logging.getLogger("cud.runner")


@dataclasses.dataclass(frozen=True)
class Ending:
    """How a task ends: what :meth:`TaskRun.end` records."""

    state: str  # succeeded, failed, cancelled, interrupted, stuck or budget_exceeded
    final_message: str | None = None
    error: dict[str, Any] | None = None
    reason: str | None = None


class TaskRun:
    """The one running task of a seat: its flags, its clock, its pause; its ledger and its checkpoint."""

    def __init__(self, seat: Seat, task: TaskView) -> None:
        self.seat = seat
        self.store = seat.store
        self.task = task
        self.cancel_reason: str | None = None
        #: The task ends ``interrupted``, not ``cancelled``, when stopped: the daemon stops, or an ``interrupt``.
        self.ends_interrupted = False
        #: Set when the task ran past its max_duration: it then fails with this error.
        self.timed_out: TaskTimeout | None = None
        #: Set when the task ended at a budget (cud.daemon.budget.meter): it then ends budget_exceeded.
        self.over_budget: BudgetExceeded | None = None
        #: The model's loop while it runs (a cancel cuts a slow model request short through it).
        self.job: asyncio.Task[Any] | None = None
        #: Who asked for a pause that has not landed yet / who paused the task, while it is paused.
        self.pause_requested_by: dict[str, Any] | None = None
        self.paused_by: dict[str, Any] | None = None
        self._resumed = asyncio.Event()
        #: Set by :meth:`cancel`: what waits outside the model's loop (a spec's setup) stops at it.
        self.cancelled = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self.budget = BudgetMeter(self)  # ConfigError: a money line with no price to count by
        self.ledger = StepLedger(task["id"], seat.store, seat.trajectories, self.budget.costs)
        self.checkpoint = Checkpoint(self, self.ledger, self.budget)
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
        if self.ledger.in_model and self.job is not None:
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

    def stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

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

    # -- the model's part ------------------------------------------------------------------
    async def play(self, clients: ModelClients) -> Ending:
        """The model's part: one run of its API's loop, until it answers, fails, or is stopped.

        Returns how the task ends; :meth:`end` records it (a spec's task judges it first).
        """
        self.ledger.begin()
        self.start_clock()
        self.seat.targets.warm_soon()  # connecting is no action's lookup; the task does not wait for it
        state, final, error = "failed", None, None
        adapter = None
        api_errors: tuple[type[BaseException], ...] = ()  # until the model's API is known: none of its errors
        try:
            # ConfigError if the model needs the daemon's key and it has none (a task queued before a restart)
            use = clients.for_model(self.task["model"])
            adapter = adapter_for(use.entry.api)
            api_errors = adapter.API_ERRORS
            self.job = asyncio.create_task(adapter.run_model(self, self.checkpoint, use.client, use.entry))
            final = await self.job
            state = "succeeded"
        except asyncio.CancelledError:
            if self.cancel_reason is None:
                raise  # not ours: the daemon itself is being torn down
        except TaskStuck as exc:
            state, error = "stuck", exc.to_dict()
        except CudError as exc:
            error = exc.to_dict()
            error["message"] = self.seat.redact(error["message"])
        except api_errors as exc:
            assert adapter is not None  # api_errors is empty until it is known
            error = adapter.error_of(exc, self.is_cancelled(), self.seat.redact)
        except Exception as exc:  # a bug or an unexpected library error: keep the daemon, fail the task
            log.exception("task %d failed unexpectedly", self.task["id"])
            error = InternalError(self.seat.redact(f"{type(exc).__name__}: {exc}")).to_dict()
        finally:
            self.stop_clock()
            await self.checkpoint.close()
        self.ledger.finish_step()
        if self.before_end is not None:
            await self.before_end()
        return self._ending(state, final, error)

    # -- the end -----------------------------------------------------------------------------
    def _ending(self, state: str, final: str | None = None, error: dict[str, Any] | None = None) -> Ending:
        """How the task ends, given how its work ended: a cancel or the time limit decide unless it succeeded."""
        if self.timed_out is not None and state != "succeeded":
            return Ending("failed", error=self.timed_out.to_dict(), reason=self.cancel_reason)
        if self.over_budget is not None and self.cancel_reason is None:
            return Ending("budget_exceeded", error=self.over_budget.to_dict(), reason=self.over_budget.message)
        if self.cancel_reason is not None and state != "succeeded":
            return Ending("interrupted" if self.ends_interrupted else "cancelled", error=error,
                          reason=self.cancel_reason)
        return Ending(state, final, error)

    def fail(self, error: dict[str, Any] | None = None) -> None:
        """End the task ``failed`` before its model's part (a cancel, an interrupt or the time limit decide
        instead, as after it)."""
        self.end(self._ending("failed", error=error))

    def end(self, ending: Ending, *, verdict: VerdictView | None = None,
            artifacts: list[ArtifactView] | None = None) -> None:
        """Record the task's end (with a spec's verdict and collected files, in the same write)."""
        self.stop_clock()
        self.store.finish(self.task["id"], ending.state, final_message=ending.final_message, error=ending.error,
                          reason=ending.reason, verdict=verdict, artifacts=artifacts)
        log.info("task %d ended %s on seat %s", self.task["id"], ending.state, self.seat.name)

    # -- pause, resume, take over -------------------------------------------------------
    def request_pause(self, by: dict[str, Any]) -> None:
        if self.paused_by is None:
            self.pause_requested_by = self.pause_requested_by or by
            self._resumed.clear()

    def resume(self) -> None:
        self.pause_requested_by = None
        self._resumed.set()

    async def hold_paused(self) -> bool:
        """The requested pause lands: hold the task at its checkpoint until resumed; False if it was
        cancelled meanwhile."""
        assert self.pause_requested_by is not None
        by, self.pause_requested_by = self.pause_requested_by, None
        self.store.control(self.task["id"], "paused", by["uid"], by["name"], state="paused")
        self.paused_by = by
        started = time.monotonic()
        try:
            await self._resumed.wait()
        finally:
            self.paused_by = None
            self.ledger.add_paused_ms(ms_since(started))
        return not self.is_cancelled()

    async def human_act(self, action: dict[str, Any], by: dict[str, Any]) -> float:
        """Run a person's action on the paused task's seat: the model's actions' driver and checks."""
        assert self.ledger.step is not None
        started = time.monotonic()
        await self.seat.driver.call(action["type"], action)
        ms = ms_since(started)
        self.ledger.human_action(action, ms, by)
        return ms
