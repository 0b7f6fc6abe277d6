"""The seat's driver as an adapter hands it its model's actions: each call timed and reported.

Shared by the API adapters (:mod:`.adapters`): the SDK's ``AsyncComputerToolset`` sees it as its
``AsyncComputerDriver``; the other adapters call its methods by the protocol's action type. Each
action, once it ran (or failed), goes to :meth:`Checkpoint.action_done`; each screenshot to
:meth:`Checkpoint.screenshot_taken`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cud.daemon.store.trajectory import ms_since
from cud.protocol import HUMAN_ACTIONS

if TYPE_CHECKING:
    from cud.daemon.tasks.checkpoint import Checkpoint

__all__ = ("ACTIONS", "RecordingDriver", "plain")

#: The model's actions: a person's, and waiting.
ACTIONS = (*HUMAN_ACTIONS, "wait")


def plain(action: Any) -> dict[str, Any]:
    """The SDK's action as the protocol writes it (a plain dict)."""
    if hasattr(action, "to_dict"):
        return dict(action.to_dict())
    return dict(action) if isinstance(action, dict) else {"value": repr(action)}


class RecordingDriver:
    """The AsyncComputerDriver the SDK sees: the seat's real driver, each call timed and reported."""

    def __init__(self, driver: Any, checkpoint: Checkpoint) -> None:
        self._driver = driver
        self._checkpoint = checkpoint
        self._takes_cancelled = {
            name: "cancelled" in inspect.signature(getattr(driver, name)).parameters
            for name in (*ACTIONS, "screenshot")
        }
        for name in ACTIONS:
            setattr(self, name, self._action_method(name))

    def _action_method(self, name: str) -> Callable[..., Awaitable[None]]:
        async def method(action: Any, cancelled: Callable[[], bool] | None = None) -> None:
            started = time.monotonic()
            try:
                await self._invoke(name, action, cancelled=cancelled)
            finally:
                self._checkpoint.action_done(plain(action), ms_since(started))

        method.__name__ = name
        return method

    async def _invoke(self, name: str, *args: Any, cancelled: Callable[[], bool] | None) -> Any:
        fn = getattr(self._driver, name)
        if self._takes_cancelled[name]:
            return await fn(*args, cancelled=cancelled)
        return await fn(*args)

    async def act(self, action: dict[str, Any], cancelled: Callable[[], bool] | None = None) -> None:
        """Run the protocol's ``action`` (one of :data:`ACTIONS`), by its type."""
        await getattr(self, action["type"])(action, cancelled)

    async def screenshot(self, cancelled: Callable[[], bool] | None = None) -> Any:
        started = time.monotonic()
        prints = None
        if self._checkpoint.wants_fingerprints:  # the frame's fingerprint comes back with it: one call, not two
            shot, prints = await self._driver.screenshot_and_fingerprint()
        else:
            shot = await self._invoke("screenshot", cancelled=cancelled)
        await self._checkpoint.screenshot_taken(shot, ms_since(started), prints)
        return shot
