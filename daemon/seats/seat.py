"""A seat: one display, its driver, its health, and at most one running task.

A seat is ``idle``, ``busy`` (running a task) or ``unavailable`` (its display
did not answer). The seat never picks work itself: :class:`~cud.daemon.seats.dispatch.Seats`
hands it a task already marked running, so choosing between seats happens in
one place.

Health: the display answers a round trip (``probe``) every ``HEALTH_INTERVAL``
while the seat is idle or unavailable, and after every task. A display that
does not answer makes the seat unavailable (the running task has already failed
on the same error); one that answers again gets ``release_all`` (a server
stopped mid-action may hold what that action pressed) and the seat is idle
again. Every check is a sleep between round trips, never a busy loop, and a
hung display costs one ``driver_timeout`` per check.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cud import heap
from cud.daemon.config import Config
from cud.daemon.model.clients import ModelClients
from cud.daemon.seats.config import SeatConfig
from cud.daemon.session.processes import SeatSession, session_for
from cud.daemon.session.reset import ResetReport
from cud.daemon.spec.flow import run_spec_task
from cud.daemon.store.database import Store
from cud.daemon.store.trajectory import Trajectories, decode_data_url
from cud.daemon.targets.a11y_trust import SeatTrust
from cud.daemon.targets.lookup import TargetResolver
from cud.daemon.tasks.approvals import Approvals
from cud.daemon.tasks.runner import TaskRun
from cud.daemon.video.recorder import recorder_for
from cud.errors import ConfigError, CudError, DisplayUnavailable, DriverError, SessionError, StorageFull, WrongState
from cud.protocol import SeatState, SeatView, TaskView
from cud.seat_needs import SeatNeeds

__all__ = ("HEALTH_INTERVAL", "Seat", "SeatParts")

log = logging.getLogger("cud.seat")

#: Seconds between health checks of an idle or unavailable seat.
HEALTH_INTERVAL = 2.0
NOT_CHECKED = "not checked yet"
#: Seconds the seat waits before trying again when the disk was too full to record a task.
FULL_DISK_RETRY = 5.0


@dataclass(frozen=True)
class SeatParts:
    """What every seat of a daemon shares."""

    config: Config
    store: Store
    approvals: Approvals
    trajectories: Trajectories
    #: The model clients, picked per task by its model (cud.daemon.model.clients).
    client: ModelClients
    api_key: str | None
    #: Told (name, where, up, error) when a display stops answering or answers again ([[notify]]).
    on_health: Callable[[str, str, bool, str | None], None] | None = None


class Seat:
    def __init__(self, seat_config: SeatConfig, parts: SeatParts, driver: Any, on_free: Callable[[], None]) -> None:
        self.seat_config = seat_config
        self.name = seat_config.name
        self.config = parts.config
        self.store = parts.store
        self.approvals = parts.approvals
        self.trajectories = parts.trajectories
        self.driver = driver  # cud.drivers.aio.AsyncDriver
        #: Its session (user, home, processes: docs/sessions.md); None for a seat without ``user``/``home``.
        self.session: SeatSession | None = session_for(
            seat_config.name, seat_config.user, seat_config.home, seat_config.home_template,
            seat_config.target_display, seat_config.session_bus, seat_config.session_unit,
            state_dir=parts.config.state_dir, isolation=seat_config.isolation)
        #: With a session, the address its user's launcher gives is confined to the session (a11y_trust).
        trust = (None if self.session is None
                 else SeatTrust(seat_config.name, self.session.account.uid, self.session.own_dirs))
        #: What actions on this seat touch (docs/targets.md).
        self.targets = TargetResolver.for_seat(seat_config.target_display, seat_config.session_bus,
                                               vnc=seat_config.vnc is not None,
                                               timeout=parts.config.target_timeout, trust=trust)
        self._client = parts.client
        self._api_key = parts.api_key
        self._on_free = on_free
        self._on_health = parts.on_health
        self.state: SeatState = "unavailable"
        #: Why the seat is unavailable (None while it is not); its screen when the display last answered.
        self.error: str | None = NOT_CHECKED
        self.size: tuple[int, int] | None = None
        self.current: TaskRun | None = None
        self._task: TaskView | None = None
        self._checking = False
        #: Held by a health check and by a reset asked for over the socket: one waits for the other,
        #: so a reset right after a check began (an ``exec`` then a ``reset``) is not refused.
        self._hold = asyncio.Lock()
        #: A socket reset waits for the hold: the seat is not free meanwhile.
        self._reset_waiting = 0
        #: Why the session's last reset failed: the seat stays unavailable until a reset succeeds.
        self._dirty: str | None = None
        #: What the last reset that succeeded did.
        self.last_reset: ResetReport | None = None
        self._wake = asyncio.Event()
        self._stopping = False

    # -- for the dispatcher and the handlers ----------------------------------------------
    @property
    def free(self) -> bool:
        """Whether the seat can take a task now (not while a health check is on the line)."""
        return (self.state == "idle" and self._task is None and not self._checking and not self._reset_waiting
                and not self._stopping)

    def assign(self, task: TaskView) -> None:
        assert self.free, f"seat {self.name} is not free"
        self._task = task
        self.state = "busy"
        self._wake.set()

    async def screenshot(self) -> tuple[str, bytes]:
        if self.state == "unavailable":
            # Fail now rather than queue behind a health check on a hung display.
            raise DisplayUnavailable(f"seat {self.name!r} is unavailable: {self.error}", seat=self.name)
        # peek, not screenshot: a look must not replace the frame an approval is bound to.
        shot = await self.driver.call("peek")
        return decode_data_url(shot["image_url"])

    def view(self) -> SeatView:
        place = {"vnc": self.seat_config.vnc} if self.seat_config.vnc else {"display": self.seat_config.display}
        return {
            "name": self.name,
            **place,  # type: ignore[typeddict-item]  # "vnc" or "display", by the seat's kind
            "state": self.state,
            "task": self._task["id"] if self._task is not None else None,
            "size": list(self.size) if self.size is not None else None,
            "tags": list(self.seat_config.tags),
            "network": self.seat_config.isolation.network,
            "allowed": [entry.words() for entry in self.seat_config.isolation.allowed],
            "private_tmp": self.seat_config.isolation.private_tmp,
            "home_path": self.seat_config.isolation.home_path,
            "error": self.error,
            "driver_pid": self.driver.pid,
        }

    def meets(self, needs: SeatNeeds) -> bool:
        """Whether this seat will do for ``needs`` (its screen unknown while unavailable: it may)."""
        return needs.met_by(self.name, self.size, self.seat_config.tags)

    def redact(self, text: str) -> str:
        for secret in (self._api_key, *self._client.secrets):
            if secret:
                text = text.replace(secret, "[redacted]")
        return text

    # -- health ------------------------------------------------------------------------------
    async def prepare(self, run: TaskRun) -> bool:
        """Return the session to a clean state before ``run``'s task (docs/sessions.md); False if that failed.

        A reset that fails leaves the seat ``unavailable`` with the reason (every health
        check tries the reset again) and puts the task back in the queue: a pinned task
        waits for the seat, another goes to a free seat. It never runs on a dirty seat.
        A task cancelled or interrupted while the reset ran ends so instead: back in the
        queue, the request would be forgotten and the task would run later. (A daemon that
        stops requeues it: the task runs after the restart.)
        A seat without a session has nothing to reset.
        """
        task = run.task
        if self.session is None:
            return True
        problem = await self._reset()
        if problem is None:
            report = self.last_reset
            assert report is not None
            self.store.add_event(task["id"], "reset", {"seat": self.name, **dataclasses.asdict(report)})
            return True
        if run.is_cancelled() and not self._stopping:
            run.fail()  # a cancel (or interrupt) decides: the task ends so, with its reason
        else:
            self.store.requeue(task["id"], self.name, problem)
        return False

    async def _reset(self) -> str | None:
        """Reset the session; None if it is clean, else why not (and the seat is then unavailable)."""
        assert self.session is not None
        try:
            report = await self.session.reset()
        except Exception as exc:  # whatever went wrong, the seat must not take work dirty
            message = exc.message if isinstance(exc, CudError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, CudError):
                log.exception("seat %s: the reset failed", self.name)
            problem = f"the reset of seat {self.name!r} failed: {message}"
            news = self._dirty is None
            self._dirty = problem
            self.state, self.error = "unavailable", problem
            if news:
                log.warning("seat %s is unavailable: %s", self.name, problem)
                if self._on_health is not None:
                    self._on_health(self.name, self.seat_config.where, False, problem)
            return problem
        log.info("seat %s reset in %.2f s (%d processes, %d X clients ended; %d entries in the home)", self.name,
                 report.seconds, report.processes, report.x_clients, report.home_entries)
        self._dirty = None
        self.last_reset = report
        return None

    async def reset_now(self) -> ResetReport:
        """A reset asked for over the socket (``cuctl reset``): only while no task holds the seat.

        A health check under way is waited for (it holds the seat a moment, and the seat is idle).
        """
        if self.session is None:
            raise SessionError(f"seat {self.name!r} has no session: give it 'user' and 'home' in [[seats]]",
                               seat=self.name)
        self._refuse_if_held()
        self._reset_waiting += 1  # not free from now on: no task is handed over while the check ends
        try:
            async with self._hold:
                self._refuse_if_held()
                self._checking = True
                try:
                    problem = await self._reset()
                finally:
                    self._checking = False
                if problem is not None:
                    raise SessionError(problem, seat=self.name)
                if self.state == "unavailable":
                    await self._check()  # clean again: back to idle if the display answers
        finally:
            self._reset_waiting -= 1
        if self.state == "idle":
            self._on_free()  # what was submitted meanwhile found the seat held: hand it over now
        return self.last_reset  # type: ignore[return-value]  # set by the reset just awaited

    def _refuse_if_held(self) -> None:
        if self._task is not None or self._stopping:
            why = "a task holds it" if self._task is not None else "it is stopping"
            raise WrongState(f"seat {self.name!r} is busy ({why}); reset it when it is idle", seat=self.name,
                             state=self.state)

    async def health_check(self) -> bool:
        """Ask the display for a round trip; become unavailable, or available again. True if it answered."""
        self._checking = True  # before any await: the seat is not free from here on
        async with self._hold:
            return await self._check()

    async def _check(self) -> bool:
        """:meth:`check`, the hold already taken."""
        if self._dirty is not None:
            # A seat whose reset failed is tried again, and stays unavailable until it is clean.
            self._checking = True
            try:
                if await self._reset() is not None:
                    return False
            finally:
                self._checking = False
        self._checking = True
        try:
            recovering = self.state == "unavailable"
            if recovering:
                # Whatever a stopped or crashed run left held must not reach the next task.
                await self.driver.call("release_all")
            self.size = tuple(await self.driver.call("probe"))
        except DriverError as exc:
            if self.state != "unavailable":
                log.warning("seat %s is unavailable: %s", self.name, exc.message)
            # A seat down at start-up is news too; one that stays down is not news again.
            news = self.state != "unavailable" or self.error == NOT_CHECKED
            self.state, self.error, self.size = "unavailable", exc.message, None
            if news and self._on_health is not None:
                self._on_health(self.name, self.seat_config.where, False, exc.message)
            return False
        finally:
            self._checking = False
        if self.state == "unavailable":
            again = "answers again" if self.error != NOT_CHECKED else "ready"
            log.info("seat %s (%s) %s: %dx%d", self.name, self.seat_config.where, again,
                     *self.size)
            if self.error != NOT_CHECKED and self._on_health is not None:
                self._on_health(self.name, self.seat_config.where, True, None)
            self.state, self.error = "idle", None
        return True

    # -- the loop ------------------------------------------------------------------------------
    async def serve(self) -> None:
        """Run assigned tasks until stopped, checking the display between them."""
        while not self._stopping:
            task = self._task
            if task is None:
                if not await self._pause(HEALTH_INTERVAL) and not self._stopping and self._task is None:
                    was = self.state
                    await self.health_check()
                    if self.state == "idle" and was == "unavailable":
                        self._on_free()
                continue
            try:
                await self._run(task)
            except StorageFull as exc:
                # Even the space reserve is gone. The task stays as recorded (a restart
                # marks it interrupted); nothing else can be recorded until there is room.
                log.error("seat %s, task %d: %s; waiting for room on the disk", self.name, task["id"], exc.message)
                await self._pause(FULL_DISK_RETRY)
            finally:
                self._task = None
            if self._stopping:
                break
            # An idle seat holds no frames: ~6 MiB a seat at 1280x800 (the seats bench). Still
            # busy meanwhile: no task may be handed over before the display has been looked at.
            await self.driver.call("rest")
            if self._dirty is None:  # a seat whose reset failed stays unavailable until a reset succeeds
                self.state = "idle"  # check() takes it back if the display does not answer; it is
            await self.health_check()  # not free while checking, and starts checking before any await
            self._prune()
            heap.trim()
            self._on_free()

    async def _pause(self, seconds: float) -> bool:
        """Sleep until woken (an assignment, a stop) or ``seconds`` pass. True if woken."""
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
            return True
        return False

    async def stop(self, reason: str) -> None:
        """Interrupt the running task (if any) and end :meth:`serve` after it."""
        self._stopping = True
        self._wake.set()
        if self.current is not None:
            self.current.cancel(reason, interrupted=True)

    async def _run(self, task: TaskView) -> None:
        try:
            run = TaskRun(self, task)
        except ConfigError as exc:
            # What the task was accepted with cannot hold it now (a money line with no price to count
            # by, cud.daemon.budget.accepted): refused before anything of it runs, never run unbounded.
            log.warning("seat %s, task %d: %s", self.name, task["id"], exc.message)
            self.store.finish(task["id"], "failed", error=exc.to_dict())
            return
        self.current = run  # a cancel during the reset below reaches the task
        recorder = None
        try:
            # A spec's task starts on a clean session; a reset that fails puts it back in the queue.
            if task["spec"] is not None and task["spec"]["reset"] and not await self.prepare(run):
                return
            recorder = recorder_for(self, task)
            if recorder is not None and await recorder.start():
                run.before_acting = recorder.ready  # every action is in the video
                run.before_end = recorder.stop  # the video ends with the task's last step, before its end
            if task["spec"] is not None:
                await run_spec_task(self, run, self._client)
            else:
                run.end(await run.play(self._client))
        finally:
            self.current = None
            if recorder is not None:
                await recorder.stop()  # a no-op unless the task was torn down mid-way

    def _prune(self) -> None:
        retention = self.config.retention
        removed = self.store.prune(retention.max_tasks, retention.max_age_days)
        self.trajectories.remove(removed)
