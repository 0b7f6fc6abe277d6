"""The daemon's seats and the one place that decides which seat runs which task.

Dispatch is first in first out over the queue: each free seat, in the order the
seats were configured, takes the oldest queued task it may run (pinned to it,
or to no seat; its screen size and tags those the task needs, cud.seat_needs).
Tasks pinned to a busy or unavailable seat, or needing one like it, wait for
it and hold nobody else back. Dispatch runs on the event loop's thread and marks a task
running before it hands it over, so no two seats can take the same task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta

from cud.budget import format_money
from cud.daemon.budget.meter import today
from cud.daemon.config import read_secret_file
from cud.daemon.seats.config import SeatConfig
from cud.daemon.seats.seat import FULL_DISK_RETRY, Seat, SeatParts
from cud.daemon.session.egress import Egress
from cud.daemon.tasks.runner import TaskRun
from cud.errors import NotFound, ProtocolError, SessionError, StorageFull
from cud.protocol import SeatView
from cud.seat_needs import SeatNeeds, offer_words

__all__ = ("Seats",)

log = logging.getLogger("cud.seats")


def _open_driver(seat_config: SeatConfig, parts: SeatParts) -> object:
    from cud.drivers import open_driver  # imported here so a config error never needs X libraries
    from cud.drivers.aio import AsyncDriver
    from cud.drivers.worker import WorkerDriver

    config = parts.config
    password = None
    if seat_config.vnc_password_file is not None:
        password = read_secret_file(seat_config.vnc_password_file, "vnc_password_file")
    options = {"display": seat_config.display, "vnc": seat_config.vnc, "vnc_password": password,
               "wait_seconds": config.wait_seconds, "settle_timeout": config.settle_timeout,
               "vnc_horizontal_scroll": seat_config.vnc_horizontal_scroll, "timeout": config.driver_timeout}
    # Drivers connect on their first call (a driver process starts then too): opening one never waits.
    driver = WorkerDriver(**options) if config.driver_processes else open_driver(**options)  # type: ignore[arg-type]
    return AsyncDriver(driver)


class Seats:
    def __init__(self, parts: SeatParts) -> None:
        self.store = parts.store
        self.budget = parts.config.budget
        self._seats = {seat_config.name: Seat(seat_config, parts, _open_driver(seat_config, parts), self.dispatch)
                       for seat_config in parts.config.seats}
        self._retry: asyncio.TimerHandle | None = None
        self._new_day: asyncio.TimerHandle | None = None
        #: The nftables rules that keep each seat with a network allow-list to it (cud.daemon.session.egress).
        self.egress = Egress(parts.config.state_dir, [
            (seat.name, seat.session.account.uid, seat.seat_config.isolation.allowed)
            for seat in self if seat.session is not None and seat.seat_config.isolation.allowed])

    def __iter__(self) -> Iterator[Seat]:
        return iter(self._seats.values())

    def __len__(self) -> int:
        return len(self._seats)

    def get(self, name: str) -> Seat:
        seat = self._seats.get(name)
        if seat is None:
            raise NotFound(f"no seat named {name!r}; this daemon's seats: {', '.join(self._seats)}", seat=name)
        return seat

    def pick(self, name: str | None, what: str) -> Seat:
        """The seat a request names; with one seat, naming it is optional."""
        if name is not None:
            return self.get(name)
        if len(self._seats) == 1:
            return next(iter(self._seats.values()))
        raise ProtocolError(f"this daemon has {len(self._seats)} seats; name one for {what}: "
                            f"{', '.join(self._seats)}", field="seat")

    def check_needs(self, needs: SeatNeeds, *, session: bool = False) -> None:
        """Refuse a task no seat here could ever take: none meets ``needs`` (and has a session, if ``session``).
        A seat whose screen is unknown now (unavailable) may be the size asked for, so it counts."""
        if any(seat.meets(needs) and (not session or seat.session is not None) for seat in self):
            return
        offer = "; ".join(offer_words(seat.name, seat.size, seat.seat_config.tags,
                                      ", a session" if seat.session is not None else "") for seat in self)
        raise NotFound(f"no seat of this daemon {'with a session ' if session else ''}meets {needs.words()}; "
                       f"its seats: {offer}", seat=needs.seat, screen=needs.screen, seat_tags=list(needs.tags))

    def views(self) -> list[SeatView]:
        return [seat.view() for seat in self]

    async def start(self) -> None:
        """Load the seats' network allow-lists, then check every display at once (each gets ``release_all``)
        before the daemon says it is ready: no command of a session runs before its rules are there."""
        await self.egress.load()
        await asyncio.gather(*(seat.health_check() for seat in self))
        down = [seat.name for seat in self if seat.state == "unavailable"]
        if down:
            log.warning("seats %s are unavailable at start-up; they are checked every few seconds", down)

    def dispatch(self) -> None:
        """Hand the oldest task each free seat may run to that seat (none while the day's cap is reached)."""
        held = self._day_capped()
        if self.budget.daily_cost is not None:
            with contextlib.suppress(StorageFull):  # only words for list and show; starting (or not) matters
                self.store.hold_queued(held)
        if held is not None:
            return
        for seat in self:
            if not seat.free:
                continue
            task = self.store.next_queued(seat.name, session=seat.session is not None, meets=seat.meets)
            if task is None:
                continue
            try:
                self.store.start(task["id"], seat.name)
            except StorageFull as exc:
                # Nothing can be recorded; the task stays queued and dispatch tries again later.
                log.error("cannot start task %d: %s; trying again in %g s", task["id"], exc.message, FULL_DISK_RETRY)
                if self._retry is None:
                    self._retry = asyncio.get_running_loop().call_later(FULL_DISK_RETRY, self._retry_dispatch)
                return
            seat.assign(self.store.task(task["id"]))

    def _day_capped(self) -> str | None:
        """Why no task may start now: the day's spend reached ``[budget] daily_cost`` (then dispatch runs
        again when the next UTC day begins); None if tasks may start."""
        cap = self.budget.daily_cost
        if cap is None:
            return None
        day = today()
        spent = self.store.day_spend(day, self.budget.currency)
        if spent < cap:
            return None
        if self._new_day is None:
            now = datetime.now(UTC)
            midnight = datetime.combine(now.date() + timedelta(days=1), time(), UTC)
            self._new_day = asyncio.get_running_loop().call_later((midnight - now).total_seconds() + 1,
                                                                  self._next_day)
        return (f"waiting: the day's spend ({day}, UTC) is {format_money(spent, self.budget.currency)} of "
                f"{format_money(cap, self.budget.currency)} ([budget] daily_cost); tasks start again when the "
                "next day begins")

    def _next_day(self) -> None:
        self._new_day = None
        self.dispatch()

    def _retry_dispatch(self) -> None:
        self._retry = None
        self.dispatch()

    def run_of(self, task_id: int) -> TaskRun | None:
        """The running task with this id, on whichever seat runs it."""
        return next((seat.current for seat in self if seat.current and seat.current.task["id"] == task_id), None)

    def cancel(self, task_id: int, reason: str) -> None:
        if (run := self.run_of(task_id)) is not None:
            run.cancel(reason)

    def interrupt(self, task_id: int, reason: str) -> None:
        """Stop a running task as :meth:`cancel` does, but it ends ``interrupted`` with ``reason``."""
        if (run := self.run_of(task_id)) is not None:
            run.cancel(reason, interrupted=True)

    async def stop(self, reason: str) -> None:
        for timer in (self._retry, self._new_day):
            if timer is not None:
                timer.cancel()
        for seat in self:
            await seat.stop(reason)

    async def close(self) -> None:
        with contextlib.suppress(SessionError):  # the daemon stops all the same; the next start replaces the table
            await self.egress.unload()
        for seat in self:
            await seat.driver.aclose()
            await seat.targets.close()
            if seat.session is not None:
                seat.session.close()  # its runtime directory (sockets, the X cookie copy) goes with the daemon
        from cud.drivers.worker import FORKER

        await asyncio.to_thread(FORKER.close)
