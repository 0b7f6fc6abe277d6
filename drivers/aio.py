"""Give any synchronous Driver the SDK's AsyncComputerDriver shape.

Each driver call runs on one dedicated thread per driver: python-xlib and the VNC
client are not thread-safe, and a display is one seat anyway. The event loop never
blocks on the display.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from .base import Driver

if TYPE_CHECKING:
    from openai.lib.computer import Screenshot

__all__ = ("AsyncDriver",)

T = TypeVar("T")


class AsyncDriver:
    """``AsyncComputerToolset(AsyncDriver(X11Driver(...)))``."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cud-driver")

    @property
    def pid(self) -> int | None:
        """The driver's own process, if it has one (:class:`cud.drivers.worker.WorkerDriver`)."""
        return self.driver.pid

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``driver.method(*args, **kwargs)`` on the driver's thread."""
        return await self._run(getattr(self.driver, method), *args, **kwargs)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(fn, *args, **kwargs))

    async def click(self, action: Any) -> None:
        await self._run(self.driver.click, action)

    async def double_click(self, action: Any) -> None:
        await self._run(self.driver.double_click, action)

    async def drag(self, action: Any) -> None:
        await self._run(self.driver.drag, action)

    async def keypress(self, action: Any) -> None:
        await self._run(self.driver.keypress, action)

    async def move(self, action: Any) -> None:
        await self._run(self.driver.move, action)

    async def scroll(self, action: Any) -> None:
        await self._run(self.driver.scroll, action)

    async def type(self, action: Any) -> None:
        await self._run(self.driver.type, action)

    async def wait(self, action: Any, cancelled: Callable[[], bool] | None = None) -> None:
        await self._run(self.driver.wait, action, cancelled)

    async def screenshot(self) -> Screenshot:
        return await self._run(self.driver.screenshot)

    async def screenshot_and_fingerprint(self) -> tuple[Screenshot, Any]:
        return await self._run(self.driver.screenshot_and_fingerprint)

    async def aclose(self) -> None:
        """Close the driver on its own thread, then stop the thread."""
        try:
            await self._run(self.driver.close)
        finally:
            self._thread.shutdown(wait=False)
