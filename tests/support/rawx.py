"""A bare X window read with python-xlib: the events exactly as the server sends them.

Toolkits rewrite some events (Tk 8.6 turns buttons 6/7 into Shift+wheel), so the
tests that need the server's own button numbers read them here.
"""

from __future__ import annotations

import time

from Xlib import X, Xatom
from Xlib.display import Display

__all__ = ("RawWindow", "held_state", "server_time", "wheel_presses", "drag_events", "double_click_presses",
           "assert_double_click_is_timed_right", "DRAG_PATH",
           "DOUBLE_CLICK_LIMIT_MS")

#: The strictest double-click time of the toolkits we drive (xterm's multiClickTime;
#: GTK and Qt allow 400 ms, Chromium 500 ms).
DOUBLE_CLICK_LIMIT_MS = 250


class RawWindow:
    def __init__(self, display: str, width: int, height: int) -> None:
        self.dpy = Display(display)
        screen = self.dpy.screen()
        self.window = screen.root.create_window(
            0, 0, width, height, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
            override_redirect=True, background_pixel=screen.white_pixel,
            event_mask=X.ButtonPressMask | X.ButtonReleaseMask | X.PointerMotionMask | X.ExposureMask,
        )
        self.window.map()
        self.dpy.sync()
        self._wait(lambda e: e.type == X.Expose, 10.0)

    def _wait(self, predicate, timeout: float):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while self.dpy.pending_events():
                event = self.dpy.next_event()
                if predicate(event):
                    return event
            time.sleep(0.005)
        raise AssertionError("timed out waiting for an X event")

    def events(self, until_release_of: int, timeout: float = 10.0) -> list[tuple[str, int, int, int, int]]:
        """Pointer events up to the release of button ``until_release_of``: (kind, detail, x, y, state)."""
        return [e[:5] for e in self.timed_events(until_release_of, timeout)]

    def timed_events(self, until_release_of: int, timeout: float = 10.0) -> list[tuple[str, int, int, int, int, int]]:
        """Like ``events``, each with the X server's timestamp (ms) last: (kind, detail, x, y, state, time)."""
        seen: list[tuple[str, int, int, int, int, int]] = []
        kinds = {X.ButtonPress: "press", X.ButtonRelease: "release", X.MotionNotify: "motion"}

        def collect(event) -> bool:  # type: ignore[no-untyped-def]
            kind = kinds.get(event.type)
            if kind is not None:
                seen.append((kind, event.detail, event.root_x, event.root_y, event.state, event.time))
            return kind == "release" and event.detail == until_release_of

        self._wait(collect, timeout)
        return seen

    def close(self) -> None:
        self.window.destroy()
        self.dpy.close()


def held_state(display: str) -> tuple[list[int], int]:
    """(keycodes the server holds down, pointer button mask) on ``display``."""
    dpy = Display(display)
    try:
        keymap = dpy.query_keymap()
        keys = [i * 8 + bit for i, byte in enumerate(keymap) for bit in range(8) if byte & (1 << bit)]
        mask = dpy.screen().root.query_pointer().mask
        buttons = mask & (X.Button1Mask | X.Button2Mask | X.Button3Mask | X.Button4Mask | X.Button5Mask)
        return keys, buttons
    finally:
        dpy.close()


def server_time(display: str) -> int:
    """The X server's clock now (ms, as it stamps events): the time of a property change made here.

    Read on a connection of its own, so that no event of a ``RawWindow`` is consumed.
    """
    dpy = Display(display)
    try:
        window = dpy.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent, event_mask=X.PropertyChangeMask)
        window.change_property(dpy.intern_atom("CUD_TEST_CLOCK"), Xatom.STRING, 8, b"")
        dpy.flush()
        while True:
            event = dpy.next_event()
            if event.type == X.PropertyNotify:
                return int(event.time)
    finally:
        dpy.close()


def wheel_presses(driver: object, raw: RawWindow) -> list[tuple[int, int, int]]:
    """Scroll down 250 px, up 100, right 120, left 80, then click: the presses the server saw."""
    for dx, dy in ((0, 250), (0, -100), (120, 0), (-80, 0)):
        driver.scroll({"type": "scroll", "x": 300, "y": 200, "scroll_x": dx, "scroll_y": dy})  # type: ignore[attr-defined]
    driver.click({"type": "click", "x": 300, "y": 200, "button": "left"})  # type: ignore[attr-defined]  # end marker
    return [(b, x, y) for kind, b, x, y, _ in raw.events(until_release_of=1) if kind == "press"]


DRAG_PATH = [{"x": 100, "y": 100}, {"x": 150, "y": 120}, {"x": 220, "y": 180}, {"x": 400, "y": 300}]


def drag_events(driver: object, raw: RawWindow) -> list[tuple[str, int, int, int, int]]:
    """Drag along ``DRAG_PATH`` holding Shift: the pointer events the server saw."""
    driver.drag({"type": "drag", "path": DRAG_PATH, "keys": ["SHIFT"]})  # type: ignore[attr-defined]
    return raw.events(until_release_of=1)


def assert_double_click_is_timed_right(driver: object, display: str, width: int, height: int) -> None:
    """Two presses at the point, stamped apart by the server and within the double-click time.

    Chromium takes two presses with the same server timestamp for two single clicks.
    """
    raw = RawWindow(display, width, height)
    try:
        (_, *first, t1), (_, *second, t2) = double_click_presses(driver, raw)
    finally:
        raw.close()
    assert first == second == [300, 200]
    assert 0 < t2 - t1 < DOUBLE_CLICK_LIMIT_MS


def double_click_presses(driver: object, raw: RawWindow) -> list[tuple[int, int, int, int]]:
    """Double-click at (300, 200): the presses the server saw, (button, x, y, server time in ms)."""
    driver.double_click({"type": "double_click", "x": 300, "y": 200})  # type: ignore[attr-defined]
    driver.click({"type": "click", "x": 10, "y": 10, "button": "right"})  # type: ignore[attr-defined]  # end marker
    return [(b, x, y, t) for kind, b, x, y, _, t in raw.timed_events(until_release_of=3) if kind == "press" and b == 1]
