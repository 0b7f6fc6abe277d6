"""The driver the SDK's loop sees: the seat's real driver, each call timed, each screenshot recorded.

Every call is reported to the task's run (:class:`cud.daemon.tasks.runner.TaskRun`): an
action's time and what it touched, a screenshot's file and, for the stuck guard, its
fingerprint.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cud.daemon.store.trajectory import ms_since
from cud.protocol import HUMAN_ACTIONS

if TYPE_CHECKING:
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("RecordingDriver",)

_ACTIONS = (*HUMAN_ACTIONS, "wait")  # the model's actions: a person's, and waiting


class RecordingDriver:
    """The AsyncComputerDriver the SDK sees: the real driver, timed, with screenshots recorded."""

    def __init__(self, driver: Any, run: TaskRun) -> None:
        self._driver = driver
        self._run = run
        self._takes_cancelled = {
            name: "cancelled" in inspect.signature(getattr(driver, name)).parameters
            for name in (*_ACTIONS, "screenshot")
        }
        for name in _ACTIONS:
            setattr(self, name, self._action_method(name))

    def _action_method(self, name: str) -> Callable[..., Awaitable[None]]:
        async def method(action: Any, cancelled: Callable[[], bool] | None = None) -> None:
            started = time.monotonic()
            try:
                await self._invoke(name, action, cancelled=cancelled)
            finally:
                self._run.on_driver_call(name, action, ms_since(started))

        method.__name__ = name
        return method

    async def _invoke(self, name: str, *args: Any, cancelled: Callable[[], bool] | None) -> Any:
        fn = getattr(self._driver, name)
        if self._takes_cancelled[name]:
            return await fn(*args, cancelled=cancelled)
        return await fn(*args)

    async def screenshot(self, cancelled: Callable[[], bool] | None = None) -> Any:
        started = time.monotonic()
        shot = await self._invoke("screenshot", cancelled=cancelled)
        self._run.on_screenshot(shot, ms_since(started))
        if self._run.guard.active:
            # The screen's tiles and, where the accessibility tree tells, what the focused element holds:
            # an entry that scrolls as it fills changes no pixel, but its text changes.
            screen, held = await asyncio.gather(self._driver.call("fingerprint"), self._run.seat.targets.focus_state())
            self._run.guard.see(screen, held)
        return shot
