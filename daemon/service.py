"""The daemon's life: startup, main loop, shutdown (uvicorn's split, with pueue's state).

Startup (the state dir already locked for this daemon by ``cud run``, before any row is read):
the database (recovering what a dead daemon left running),
the seats (each display checked and released of anything held), the socket, READY=1.
Main loop: the seats run tasks; the server answers; the watchdog pings.
Shutdown (SIGTERM/SIGINT): STOPPING=1, stop accepting, interrupt the running
tasks with a reason, wait for them with a deadline, close. A second signal skips
the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from cud.daemon.config import Config, resolve_api_key
from cud.daemon.hooks.delivery import Notifications
from cud.daemon.hooks.events import EventMaker
from cud.daemon.metrics import Metrics
from cud.daemon.model.client import make_client
from cud.daemon.model.clients import ModelClients
from cud.daemon.model.table import resolve_model_keys
from cud.daemon.seats.dispatch import Seats
from cud.daemon.seats.seat import SeatParts
from cud.daemon.server.access import AccessRights, Peer
from cud.daemon.server.handlers import HANDLERS, Context
from cud.daemon.server.systemd_notify import Notifier
from cud.daemon.server.unix_socket import Server, connection_slots
from cud.daemon.store.database import Store
from cud.daemon.store.disk_reserve import SpaceReserve
from cud.daemon.store.state_lock import StateLock
from cud.daemon.store.trajectory import Trajectories
from cud.daemon.tasks.approvals import Approvals
from cud.protocol import PROTOCOL_VERSION

__all__ = ()

log = logging.getLogger("cud.daemon")

#: How long shutdown waits for the running tasks to wind down before cancelling them.
SHUTDOWN_GRACE = 10.0
#: How long shutdown lets queued notifications (the interrupted tasks' ends) go out.
NOTIFY_GRACE = 5.0


class Daemon:
    def __init__(self, config: Config, state_lock: StateLock) -> None:
        """``state_lock``: this daemon's lock on ``config.state_dir``, released when the daemon stops."""
        self.config = config
        self.state_lock = state_lock
        self.access_rights = AccessRights(config.access)
        self.notifier = Notifier()
        self._stop = asyncio.Event()
        self._signals = 0
        self._stop_reason = "stopped"
        self._seat_tasks: list[asyncio.Task[None]] = []
        self._textfile: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------
    async def run(self) -> None:
        await self.startup()
        try:
            await self.main_loop()
        finally:
            await self.shutdown()

    async def startup(self) -> None:
        config = self.config
        api_key = resolve_api_key(config)
        model_keys = resolve_model_keys(config.models)  # a [models] entry's unset key variable: named now
        self.reserve = SpaceReserve(config.state_dir)
        if not self.reserve.ensure():
            log.warning("the disk of %s has no room for the space reserve: new tasks are refused until it has",
                        config.state_dir)
        self.store = Store(config.state_dir / "cud.sqlite3", on_full=self.reserve.release)
        self.trajectories = Trajectories(config.state_dir, keep_free=self.reserve.size)
        # Before recover(), so the [[notify]] hooks hear of the tasks a dead daemon left running.
        self.notifications = Notifications(config.notify, self.store, EventMaker(config.socket, self.trajectories.root))
        recovered = self.store.recover()
        if recovered:
            log.warning("tasks %s were running when the daemon last stopped; marked interrupted", recovered)
        self.approvals = Approvals(self.store)
        # One client for every seat: its connection pool serves their requests side by side.
        # None without a key of its own: the models that need it are refused at submit (ModelClients.check).
        self.client = None if api_key is None else make_client(api_key, config.base_url, config.max_retries)
        self.clients = clients = ModelClients(self.client, config.base_url, config.models, model_keys,
                                              config.max_retries)
        parts = SeatParts(config, self.store, self.approvals, self.trajectories, clients, api_key,
                          on_health=self.notifications.seat_changed)
        self.seats = Seats(parts)
        # Before any task can run, so the histograms see every step of this daemon's life.
        self.metrics = Metrics(self.store, self.seats)
        self.notifications.register(self.metrics.registry)
        await self.notifications.start()
        await self.seats.start()
        self.server = Server(config.socket, self.access_rights, self.handle_request,
                             max_connections=connection_slots(config.max_connections))
        await self.server.start()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        self._seat_tasks = [asyncio.create_task(seat.serve(), name=f"seat {seat.name}") for seat in self.seats]
        self._watchdog = asyncio.create_task(self.notifier.watchdog(), name="watchdog")
        if config.metrics.textfile is not None:  # written at once, then every interval
            self._textfile = asyncio.create_task(
                self.metrics.write_every(config.metrics.textfile, config.metrics.interval), name="metrics textfile")
        self.seats.dispatch()  # tasks queued before the restart
        where = ", ".join(f"{seat.name}={seat.seat_config.where}" for seat in self.seats)
        log.info("cud ready on %s (seats %s, protocol %d, pid %d)", config.socket, where, PROTOCOL_VERSION, os.getpid())
        self.notifier.ready(f"serving {len(self.seats)} seat(s) on {config.socket}")

    async def main_loop(self) -> None:
        stop = asyncio.create_task(self._stop.wait())
        await asyncio.wait([stop, *self._seat_tasks], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        for task in self._seat_tasks:  # a seat's loop ends only on a stop, or on a bug: surface it
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # checked not None just above

    async def shutdown(self) -> None:
        self.notifier.stopping(self._stop_reason)
        log.info("stopping: %s", self._stop_reason)
        with contextlib.suppress(Exception):
            await self.server.close()
        await self.seats.stop(f"the daemon was stopped ({self._stop_reason}) while the task ran")
        grace = SHUTDOWN_GRACE if self._signals < 2 else 0
        _done, pending = await asyncio.wait(self._seat_tasks, timeout=grace) if self._seat_tasks else (set(), set())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2)
        with contextlib.suppress(Exception):
            await self.notifications.close(NOTIFY_GRACE if self._signals < 2 else 0)
        self._watchdog.cancel()
        if self._textfile is not None:
            self._textfile.cancel()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
        with contextlib.suppress(Exception):
            await self.clients.close()
        with contextlib.suppress(Exception):
            await self.seats.close()
        self.store.close()
        self.state_lock.release()  # last: nothing of this daemon touches the directory after it

    def _on_signal(self, signum: int) -> None:
        # Only flags here; the main loop does the work. A second signal skips the grace period.
        self._signals += 1
        self._stop_reason = signal.Signals(signum).name
        self._stop.set()
        if self._signals >= 2:
            for task in self._seat_tasks:
                task.cancel()

    # -- requests ------------------------------------------------------------------------
    async def handle_request(
        self, peer: Peer, request: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[None]],
        receive: Callable[[], Awaitable[bytes]],
    ) -> Any:
        return await HANDLERS[request["type"]](Context(self, peer, send, receive), request)
