"""What an action touches: the window and the accessibility element at its point, or with the focus.

One :class:`TargetResolver` per seat. Before a pointer action it resolves the
action's point; before ``type``/``keypress`` the focused window and element. The
result is a plain dict (:class:`cud.protocol.Target`) that goes into the action
event, the approval, the policy rules and the identity binding.

Bounded: a whole lookup is given ``timeout`` (:data:`HARD_TIMEOUT`) and never
fails a task. What cannot be read is left out and the reason kept in the target's
``note``: no X display (a VNC seat that names none), no accessibility bus, an
application that is not on it, a bus that did not answer in time. A bus that
failed is not asked again for :data:`RETRY_AFTER` seconds (a connection lost under a lookup is
first made anew and the lookup run once more, within the same ``timeout``:
:meth:`cud.daemon.targets.atspi.Atspi.look`), nor is an application
that overran a lookup (a stopped or busy one), so a dead bus or a hung application
costs one timeout, not one per action.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from cud.daemon.targets.a11y_trust import SeatTrust
from cud.daemon.targets.atspi import Atspi, AtspiError, Element
from cud.drivers.x11_windows import WindowInfo, X11Windows
from cud.errors import DriverError, NotFound
from cud.protocol import POINTER_ACTIONS, Target

__all__ = ("BUDGET_MS", "HARD_TIMEOUT", "RETRY_AFTER", "TargetResolver", "action_point")

#: What a lookup should take at the 95th percentile (measured by `make bench`).
BUDGET_MS = 30
#: What a lookup may take at most: past it the action runs with what was found so far.
HARD_TIMEOUT = 0.1
#: Seconds connecting to the accessibility bus may take (once, before a task's first action).
CONNECT_TIMEOUT = 1.0
#: Seconds a bus that failed or overran is left alone before it is tried again.
RETRY_AFTER = 5.0
#: How many objects the focus search may visit in one application.
FOCUS_LIMIT = 600
#: Roles of text that only labels its parent: the parent is what a click on it presses.
_LABEL_ROLES = {"static", "label", "text"}
#: Parents a label only sits in (the label is then what was hit), and how far up to look.
_CONTAINER_ROLES = {"frame", "window", "dialog", "document web", "document frame", "filler", "panel", "section",
                    "paragraph", "scroll pane", "viewport"}
_LABEL_CLIMB = 3
_FOCUS = {"type", "keypress"}

T = TypeVar("T")


def action_point(action: dict[str, Any]) -> tuple[int, int] | None:
    """Where a pointer action lands (a drag: where it starts); None if it has no whole point."""
    if action.get("type") == "drag":
        path = action.get("path") or []
        first = path[0] if path and isinstance(path[0], dict) else {}
        x, y = first.get("x"), first.get("y")
    else:
        x, y = action.get("x"), action.get("y")
    if isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) and not isinstance(y, bool):
        return x, y
    return None


class TargetResolver:
    """Resolve targets on one seat: ``display`` (None: no X of ours) and ``session_bus`` (None: none known)."""

    def __init__(self, display: str | None, session_bus: str | None, *, vnc: bool = False,
                 timeout: float = HARD_TIMEOUT, trust: SeatTrust | None = None) -> None:
        self.timeout = timeout
        self.vnc = vnc
        #: Where this seat's windows and accessibility elements are read (a spec's checks read there too).
        self.display = display
        self.session_bus = session_bus
        self._windows = X11Windows(display, timeout=timeout) if display else None
        #: The seat's user, whose launcher's address is confined (cud.daemon.targets.a11y_trust); None: no user.
        self.trust = trust
        self._atspi = Atspi(session_bus, trust) if session_bus else None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cud-targets") if display else None
        self._bus_down_until = 0.0
        self._bus_down_reason = ""
        self._warming: asyncio.Task[str | None] | None = None
        self._warming_since = 0.0
        #: Applications (by pid) that overran a lookup: (until when they are not asked, why).
        self._slow: dict[int, tuple[float, str]] = {}
        #: Applications (by bus name) that overran a read of their focused element's state: until when not asked.
        self._slow_state: dict[str, float] = {}

    @classmethod
    def for_seat(cls, display: str | None, session_bus: str | None, *, vnc: bool,
                 timeout: float = HARD_TIMEOUT, trust: SeatTrust | None = None) -> TargetResolver:
        """The seat's resolver; an X seat on the daemon's own $DISPLAY shares the daemon's session bus."""
        if session_bus is None and display is not None and display == os.environ.get("DISPLAY"):
            session_bus = os.environ.get("DBUS_SESSION_BUS_ADDRESS") or None
        return cls(display, session_bus, vnc=vnc, timeout=timeout, trust=trust)

    async def resolve(self, action: dict[str, Any]) -> Target | None:
        """The target of ``action``; None for actions that touch nothing (screenshot, wait)."""
        kind = action.get("type")
        if kind in POINTER_ACTIONS:
            point = action_point(action)
            if point is None:
                return None  # the driver refuses it; nothing to name
            return await self.at_point(*point)
        if kind in _FOCUS:
            return await self.focus()
        return None

    def warm_soon(self) -> None:
        """Start :meth:`warm` in the background (a task's start never waits for it)."""
        if self._warming is None or self._warming.done():
            self._warming = asyncio.get_running_loop().create_task(self.warm(self._connect_budget))
            self._warming_since = time.monotonic()

    @property
    def _connect_budget(self) -> float:
        """Seconds connecting may take: CONNECT_TIMEOUT, or a lookup's whole budget if that is longer."""
        return max(CONNECT_TIMEOUT, self.timeout)

    async def _connected(self) -> None:
        """Wait for :meth:`warm` if it is under way, for what is left of its budget (``_connect_budget``).

        A model's first output may be an action, right as its task starts: its lookup would
        otherwise find the bus still connecting and name no element (nor could an approval).
        """
        warming = self._warming
        if warming is None or warming.done() or asyncio.current_task() is warming:
            return
        left = self._connect_budget - (time.monotonic() - self._warming_since)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(warming), max(left, 0.0))

    async def warm(self, timeout: float = CONNECT_TIMEOUT) -> str | None:
        """Connect to the accessibility bus and list its applications ahead of the first action.

        Connecting (two D-Bus handshakes and the registry's list) can take longer than a
        lookup's budget; done here, at a task's start, it does not eat an action's. The
        reason it failed, or None.
        """
        if self._windows is not None:
            with contextlib.suppress(DriverError):  # a lookup says why, each time
                await self._in_thread(self._windows.connect, timeout)
        if self._atspi is None or self._bus_reason():
            return self._bus_reason()
        try:
            await asyncio.wait_for(self._atspi.look(self._atspi.apps), timeout)
        except TimeoutError:
            self._bus_failed(f"the accessibility bus did not answer within {timeout:g} s")
            return self._bus_down_reason
        except AtspiError as exc:
            self._bus_failed(exc.message)
            return self._bus_down_reason
        return None

    async def at_point(self, x: int, y: int) -> Target:
        return await self._bounded({"kind": "point", "x": x, "y": y}, lambda w: self._element_at(w, x, y))

    async def focus(self) -> Target:
        return await self._bounded({"kind": "focus"}, self._focused_element, window_call="active_window")

    async def focus_state(self) -> int | None:
        """A hash of what the focused element holds (text, value, checked and the like), for the stuck guard;
        None when it cannot be known now (no bus, nothing focused, an application that overran).

        No search: the element is the one the focus events (or the last focus lookup) named, read in
        one round of calls bounded by ``timeout``. An application that overran is not asked again for
        RETRY_AFTER seconds, so a hung one costs one timeout, not one per step.
        """
        atspi = self._atspi
        ref = atspi.last_focus if atspi is not None else None
        if atspi is None or ref is None or self._bus_reason() or time.monotonic() < self._slow_state.get(ref[0], 0.0):
            return None
        try:
            return await asyncio.wait_for(atspi.held_state(ref), self.timeout)
        except TimeoutError:
            if len(self._slow_state) >= 64:  # many short-lived applications: start over
                self._slow_state.clear()
            self._slow_state[ref[0]] = time.monotonic() + RETRY_AFTER
        except AtspiError:
            pass  # gone since it had the focus, or a lost connection (the next lookup says so)
        return None

    async def close(self) -> None:
        if self._warming is not None:
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        if self._atspi is not None:
            self._atspi.drop()
        if self._windows is not None and self._thread is not None:
            await self._in_thread(self._windows.close)
            self._thread.shutdown(wait=False)

    # -- the lookup ----------------------------------------------------------------
    async def _bounded(self, target: dict[str, Any], element: Callable[[WindowInfo | None], Any],
                       window_call: str = "window_at") -> Target:
        await self._connected()
        started = time.monotonic()
        notes: list[str] = []
        window: WindowInfo | None = None
        if self._windows is None:
            notes.append("unknown (VNC): the seat names no X display it mirrors" if self.vnc
                         else "no X display to ask")
        else:
            try:
                args = (target["x"], target["y"]) if window_call == "window_at" else ()
                window = await asyncio.wait_for(self._in_thread(getattr(self._windows, window_call), *args),
                                                self.timeout)
            except DriverError as exc:
                notes.append(f"window unknown: {exc.message}")
            except TimeoutError:
                notes.append(f"window unknown: the X server did not answer within {self.timeout * 1000:.0f} ms")
        found: dict[str, Any] | None = None
        left = self.timeout - (time.monotonic() - started)
        pid = window.pid if window is not None else None
        reason = self._bus_reason() or self._slow_reason(pid)
        if reason:
            notes.append(reason)
        else:
            assert self._atspi is not None
            try:
                # A connection lost under the lookup is made anew and the lookup run once more, within its budget.
                found, note = await asyncio.wait_for(self._atspi.look(lambda: element(window)), max(left, 0.001))
                if note:
                    notes.append(note)
            except TimeoutError:
                why = f"the accessibility bus did not answer within {self.timeout * 1000:.0f} ms"
                if pid is None:
                    self._bus_failed(why)
                    notes.append(self._bus_down_reason)
                else:
                    # Most likely that application is busy (or builds its tree on a first question):
                    # it alone is left alone a while, the other applications are still asked.
                    self._slow[pid] = (time.monotonic() + RETRY_AFTER,
                                       f"element unknown: {why} for pid {pid} (window only; asked again after "
                                       f"{RETRY_AFTER:g} s)")
                    notes.append(self._slow[pid][1])
            except AtspiError as exc:
                self._bus_failed(exc.message)
                notes.append(self._bus_down_reason)
        result: Target = {**target, "window": window.to_dict() if window is not None else None,  # type: ignore[typeddict-item]  # the window's dict completes the Target
                          "element": found, "note": "; ".join(notes) or None,
                          "ms": round((time.monotonic() - started) * 1000, 3)}
        return result

    def _bus_reason(self) -> str | None:
        if self._atspi is None:
            return "element unknown: no session bus configured for this seat (see docs/targets.md)"
        if self._warming is not None and not self._warming.done() and asyncio.current_task() is not self._warming:
            return "element unknown: still connecting to the accessibility bus"
        if time.monotonic() < self._bus_down_until:
            return self._bus_down_reason
        return None

    def _slow_reason(self, pid: int | None) -> str | None:
        until, why = self._slow.get(pid, (0.0, "")) if pid is not None else (0.0, "")
        if time.monotonic() < until:
            return why
        if pid is not None:
            self._slow.pop(pid, None)
        return None

    def _bus_failed(self, why: str) -> None:
        assert self._atspi is not None
        self._atspi.drop()
        self._bus_down_until = time.monotonic() + RETRY_AFTER
        self._bus_down_reason = f"element unknown: {why} (window only; asked again after {RETRY_AFTER:g} s)"

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._thread is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(fn, *args))

    async def _app_for(self, window: WindowInfo | None) -> tuple[Any, str | None]:
        assert self._atspi is not None
        if window is None:
            return None, "element unknown: no window there"
        if window.pid is None:
            return None, f"element unknown: window {window.title!r} gives no process id (_NET_WM_PID)"
        app = await self._atspi.app_of_pid(window.pid)
        if app is None:
            who = window.process or window.wm_class or "?"
            return None, f"element unknown: {who} (pid {window.pid}) is not on the accessibility bus"
        return app, None

    async def _element_at(self, window: WindowInfo | None, x: int, y: int) -> tuple[dict[str, Any] | None, str | None]:
        app, note = await self._app_for(window)
        if app is None:
            return None, note
        assert self._atspi is not None
        chain = await self._atspi.chain_at(app, x, y)
        if not chain:
            return None, f"element unknown: no window of {app.name or app.bus_name} is at ({x}, {y})"
        return await self._describe(app, chain), None

    async def _focused_element(self, window: WindowInfo | None) -> tuple[dict[str, Any] | None, str | None]:
        app, note = await self._app_for(window)
        if app is None:
            return None, note
        assert self._atspi is not None
        chain = await self._atspi.focused(app, FOCUS_LIMIT, window.title if window is not None else None)
        if not chain:
            return None, f"element unknown: nothing in {app.name or app.bus_name} has the focus"
        return await self._describe(app, chain), None

    async def _describe(self, app: Any, chain: list[tuple[str, str]]) -> dict[str, Any]:
        """The element a person would say was hit: the deepest, or the control a text label belongs to.

        Toolkits answer GetAccessibleAtPoint one level at a time (GTK, Qt) or with the
        deepest object at once (Chromium, whose link text is a "static" under the
        link), so the control is found by walking up the Parent property.
        """
        assert self._atspi is not None
        element: Element = await self._atspi.read(chain[-1])
        depth = len(chain) - 1
        for _ in range(_LABEL_CLIMB):
            if element.role not in _LABEL_ROLES or "editable" in element.states:
                break
            up = await self._atspi.parent(element.ref)
            if up is None:
                break
            parent = await self._atspi.read(up)
            if parent.role in _CONTAINER_ROLES:
                break
            element, depth = parent, depth - 1
        return {**element.to_dict(), "application": app.name, "depth": depth}

    # -- for cuctl inspect / tree ------------------------------------------------------
    async def inspect(self, x: int, y: int) -> dict[str, Any]:
        """The target at (x, y) and the whole chain of elements down to it (unbounded by the action budget)."""
        target = await self.at_point(x, y)
        chain: list[dict[str, Any]] = []
        if self._atspi is not None and target["window"] is not None and target["window"]["pid"]:
            try:
                app = await asyncio.wait_for(self._atspi.app_of_pid(target["window"]["pid"]), 2.0)
                if app is not None:
                    refs = await asyncio.wait_for(self._atspi.chain_at(app, x, y), 2.0)
                    chain = [e.to_dict() for e in await asyncio.wait_for(
                        asyncio.gather(*(self._atspi.read(r) for r in refs)), 2.0)]
            except (TimeoutError, AtspiError) as exc:
                target["note"] = "; ".join(filter(None, [target["note"], f"chain unknown: {exc}"]))
        return {"target": target, "chain": chain}

    async def tree(self, app_name: str | None, max_depth: int, max_count: int) -> dict[str, Any]:
        """The accessibility tree (every app, or those named ``app_name``), at most ``max_depth`` and ``max_count``."""
        if self._atspi is None:
            return {"apps": [], "truncated": False, "note": self._bus_reason()}
        atspi = self._atspi
        apps = await atspi.apps()
        if app_name:
            named = [a for a in apps if a.name.casefold() == app_name.casefold()]
            if not named:
                there = sorted({a.name for a in apps if a.name}, key=str.casefold)
                raise NotFound(f"no application named {app_name!r} on the accessibility bus; it has "
                               + (", ".join(repr(name) for name in there) if there else "no named application"),
                               app=app_name, applications=there)
            apps = named
        count = 0
        truncated = False

        async def node(ref: tuple[str, str], depth: int) -> dict[str, Any]:
            nonlocal count, truncated
            count += 1
            element = await atspi.read(ref)
            out: dict[str, Any] = element.to_dict()
            out["children"] = []
            if depth < max_depth:
                kids = await atspi.children(ref, states=element.states)
                for kid in kids:
                    if count >= max_count:
                        truncated = True
                        break
                    out["children"].append(await node(kid, depth + 1))
            elif await atspi.children(ref, states=element.states):
                truncated = True
            return out

        result = []
        for app in apps:
            frames = []
            for frame in await atspi.frames(app):
                if count >= max_count:
                    truncated = True
                    break
                frames.append(await node(frame, 1))
            result.append({"application": app.name, "pid": app.pid, "windows": frames})
        return {"apps": result, "truncated": truncated, "note": None}
