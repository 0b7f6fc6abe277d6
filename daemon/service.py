"""The daemon's life: startup, main loop, shutdown (uvicorn's split, with pueue's state).

Startup: state dir and database (recovering what a dead daemon left running),
the driver (releasing anything held), the seat, the socket, READY=1.
Main loop: the seat runs tasks; the server answers; the watchdog pings.
Shutdown (SIGTERM/SIGINT): STOPPING=1, stop accepting, interrupt the running
task with a reason, wait for it with a deadline, close. A second signal skips
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

from cud.daemon.access import Peer, Policy
from cud.daemon.approvals import Approvals
from cud.daemon.config import Config, read_secret_file, resolve_api_key
from cud.daemon.handlers import HANDLERS, Context
from cud.daemon.notify import Notifier
from cud.daemon.reserve import SpaceReserve
from cud.daemon.runner import Seat
from cud.daemon.server import Server, connection_slots
from cud.daemon.store import Store
from cud.daemon.trajectory import Trajectories

from cud.protocol import PROTOCOL_VERSION

__all__ = ()

log = logging.getLogger("cud.daemon")

#: How long shutdown waits for the running task to wind down before cancelling it.
SHUTDOWN_GRACE = 10.0


class Daemon:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.policy = Policy(config.access)
        self.notifier = Notifier()
        self._stop = asyncio.Event()
        self._signals = 0
        self._stop_reason = "stopped"

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
        config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.reserve = SpaceReserve(config.state_dir)
        if not self.reserve.ensure():
            log.warning("the disk of %s has no room for the space reserve: new tasks are refused until it has",
                        config.state_dir)
        self.store = Store(config.state_dir / "cud.sqlite3", on_full=self.reserve.release)
        recovered = self.store.recover()
        if recovered:
            log.warning("tasks %s were running when the daemon last stopped; marked interrupted", recovered)
        self.trajectories = Trajectories(config.state_dir, keep_free=self.reserve.size)
        self.approvals = Approvals(self.store)
        self.driver = await self._open_driver()
        self.seat = Seat(config, self.store, self.approvals, self.trajectories, self.driver, api_key)
        self.server = Server(config.socket, self.policy, self.dispatch,
                             max_connections=connection_slots(config.max_connections))
        await self.server.start()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        self._tasks = [
            asyncio.create_task(self.seat.serve(), name="seat"),
            asyncio.create_task(self.notifier.watchdog(), name="watchdog"),
        ]
        where = config.display or config.vnc
        log.info("cud ready on %s (display %s, protocol %d, pid %d)", config.socket, where, PROTOCOL_VERSION, os.getpid())
        self.notifier.ready(f"serving {where} on {config.socket}")

    async def _open_driver(self) -> Any:
        from cud.drivers import open_driver  # imported here so a config error never needs X libraries
        from cud.drivers.aio import AsyncDriver

        config = self.config
        password = None
        if config.vnc_password_file is not None:
            password = read_secret_file(config.vnc_password_file, "vnc_password_file")
        driver = await asyncio.to_thread(
            open_driver,
            display=config.display,
            vnc=config.vnc,
            vnc_password=password,
            wait_seconds=config.wait_seconds,
            settle_timeout=config.settle_timeout,
            vnc_horizontal_scroll=config.vnc_horizontal_scroll,
            timeout=config.driver_timeout,
        )
        adriver = AsyncDriver(driver)
        # A crashed run can leave keys or buttons held; nothing must start on a stuck modifier.
        await adriver.call("release_all")
        return adriver

    async def main_loop(self) -> None:
        stop = asyncio.create_task(self._stop.wait())
        await asyncio.wait([stop, self._tasks[0]], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        seat = self._tasks[0]
        if seat.done() and not seat.cancelled() and seat.exception() is not None:
            raise seat.exception()  # type: ignore[misc]

    async def shutdown(self) -> None:
        self.notifier.stopping(self._stop_reason)
        log.info("stopping: %s", self._stop_reason)
        with contextlib.suppress(Exception):
            await self.server.close()
        seat_task, watchdog = self._tasks
        await self.seat.stop(f"the daemon was stopped ({self._stop_reason}) while the task ran")
        done, _ = await asyncio.wait([seat_task], timeout=SHUTDOWN_GRACE if self._signals < 2 else 0)
        if not done:
            seat_task.cancel()
            await asyncio.wait([seat_task], timeout=2)
        watchdog.cancel()
        with contextlib.suppress(Exception):
            await self.seat.close()
        with contextlib.suppress(Exception):
            await self.driver.aclose()
        self.store.close()

    def _on_signal(self, signum: int) -> None:
        # Only flags here; the main loop does the work. A second signal skips the grace period.
        self._signals += 1
        self._stop_reason = signal.Signals(signum).name
        self._stop.set()
        if self._signals >= 2:
            self._tasks[0].cancel()

    # -- requests ------------------------------------------------------------------------
    async def dispatch(
        self, peer: Peer, request: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> Any:
        return await HANDLERS[request["type"]](Context(self, peer, send), request)
