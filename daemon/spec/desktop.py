"""What a seat shows, for a spec's ``wait_for`` and its ``window`` and ``element`` checks.

Windows come from the X display (:class:`cud.drivers.x11_windows.X11Windows`, the
window manager's client list), elements from the seat's accessibility bus
(:class:`cud.daemon.targets.atspi.Atspi`): the same readers as what an action
touches, on connections of their own with roomier time limits, since a check is no
action waiting on its lookup. The element search walks each application's tree
breadth-first through the objects that are showing, at most :data:`MAX_ELEMENTS`.

Each look at the accessibility bus (an element search, an element's text, its value) goes
through :meth:`cud.daemon.targets.atspi.Atspi.look`: a connection lost under it is made anew
and the look run once more, both within :data:`A11Y_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cud.daemon.targets.a11y_trust import SeatTrust
from cud.daemon.targets.atspi import Atspi, AtspiError, Element
from cud.drivers.x11_windows import WindowInfo, X11Windows
from cud.errors import AccessibilityError, DriverError
from cud.spec import Match

__all__ = ("Desktop", "Found", "MAX_ELEMENTS")

#: Objects one element search may read in all (an editor's tree, menus left out, is a few hundred).
MAX_ELEMENTS = 5000
#: Seconds one X call may take here (the action lookup's is 0.1 s: it holds an action up).
X_TIMEOUT = 2.0
#: Seconds one look at the accessibility bus may take, its one retry on a new connection included.
A11Y_TIMEOUT = 30.0

T = TypeVar("T")


@dataclass(frozen=True)
class Found:
    """An element a search found: what it is, and the application it is in."""

    element: Element
    app: str

    def describe(self) -> str:
        """``role 'name' in app``; an element without a name is its role alone (``slider in zenity``)."""
        named = f" {self.element.name!r}" if self.element.name else ""
        return f"{self.element.role}{named} in {self.app or '?'}"


class Desktop:
    """One seat's windows and elements, read on demand; :meth:`close` drops the connections."""

    def __init__(self, display: str | None, session_bus: str | None, trust: SeatTrust | None = None) -> None:
        self.display = display
        self.session_bus = session_bus
        self._windows = X11Windows(display, timeout=X_TIMEOUT) if display else None
        self._atspi = Atspi(session_bus, trust) if session_bus else None

    async def windows(self) -> list[WindowInfo]:
        """Every window the window manager manages; DriverError if the display cannot tell."""
        if self._windows is None:
            raise DriverError("this seat names no X display to read its windows from (a VNC seat needs x_display)")
        return await asyncio.to_thread(self._windows.client_windows)

    async def find_windows(self, wm_class: Match | None, title: Match | None) -> list[WindowInfo]:
        """The windows whose class (either half of WM_CLASS) and title match those given."""
        return [w for w in await self.windows()
                if (wm_class is None or wm_class.test(w.wm_class) or wm_class.test(w.instance))
                and (title is None or title.test(w.title))]

    async def _look(self, read: Callable[[Atspi], Awaitable[T]]) -> T:
        """``read`` on the seat's bus, retried once on a new connection if that was lost, within A11Y_TIMEOUT."""
        atspi = self._atspi
        if atspi is None:
            raise AccessibilityError("this seat has no session bus configured, so no accessibility bus to read "
                                     "elements from (docs/targets.md)")
        try:
            return await asyncio.wait_for(atspi.look(lambda: read(atspi)), A11Y_TIMEOUT)
        except TimeoutError:
            atspi.drop()  # its replies may still come
            raise AccessibilityError(f"the accessibility bus {atspi.address!r} (found through the session bus "
                                     f"{atspi.session_bus!r}) did not answer within {A11Y_TIMEOUT:g} s",
                                     bus=atspi.address, timeout=A11Y_TIMEOUT) from None

    async def find_elements(self, app: Match | None, role: Match | None, name: Match | None,
                            limit: int = MAX_ELEMENTS) -> list[Found]:
        """The showing elements of the matching applications whose role and name match those given."""
        return await self._look(lambda atspi: self._search(atspi, app, role, name, limit))

    @staticmethod
    async def _search(atspi: Atspi, app: Match | None, role: Match | None, name: Match | None,
                      limit: int) -> list[Found]:
        found: list[Found] = []
        seen = 0
        for each in await atspi.apps():
            if app is not None and not app.test(each.name):
                continue
            level = await atspi.frames(each)
            while level and seen < limit:
                level = level[: limit - seen]
                seen += len(level)
                elements = await asyncio.gather(*(atspi.read(ref, bounds=False) for ref in level))
                found += [Found(e, each.name) for e in elements
                          if (role is None or role.test(e.role)) and (name is None or name.test(e.name))]
                showing = [e for e in elements if "showing" in e.states]
                kids = await asyncio.gather(*(atspi.children(e.ref, states=e.states) for e in showing))
                level = [ref for refs in kids for ref in refs]
        return found

    async def text(self, found: Found) -> str | None:
        return await self._look(lambda atspi: atspi.text(found.element.ref))

    async def value(self, found: Found) -> float | None:
        return await self._look(lambda atspi: atspi.value(found.element.ref))

    async def close(self) -> None:
        if self._atspi is not None:
            self._atspi.drop()
        if self._windows is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._windows.close)


async def wait_until_found(look: Any, timeout: float, interval: float = 0.2) -> Any:
    """Call ``look()`` (a coroutine function) until it returns something truthy or ``timeout`` passes.

    Returns the last result (falsy on a timeout); errors of the display or the bus count
    as "not yet" until the end, when the last one is raised.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = await asyncio.wait_for(look(), max(deadline - loop.time(), 0.05))
            last_error = None
            if result:
                return result
        except (DriverError, AtspiError, TimeoutError) as exc:
            last_error = exc
        if loop.time() >= deadline:
            if last_error is not None and not isinstance(last_error, TimeoutError):
                raise last_error
            return None
        await asyncio.sleep(min(interval, max(deadline - loop.time(), 0)))
