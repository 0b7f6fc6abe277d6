"""Typing into real applications (Chromium's textarea, a GTK text view) and a 2-point HTML5
drag-and-drop in Chromium, per driver, beside xdotool.

The desktops and applications are the conformance suite's (``tests/support``):
openbox on a private Xvfb (X11 driver, and xdotool as the anchor), x11vnc on
Xvfb and TigerVNC's Xvnc (VNC driver). A rate runs from the first key sent until
the application holds as many characters as were typed; "exact" compares what
it holds with the text. A drag's time runs from the call until it returns (the
driver has released the button), for the paths models send: two points, from
anywhere in the draggable square to anywhere in the drop zone; "dropped" counts
the drags the page reported a drop for, at the path's end.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from tests.support.apps import app_class
from tests.support.apps.base import App
from tests.support.control import DRAG_DWELL_SECONDS, DRAG_HOVERS, DRAG_MOVES
from tests.support.desktop import start_desktop

from .stats import table, typing_rate

APPS = ("chromium", "gtk")
KINDS = (("x11", "X11 driver"), ("x11vnc", "VNC driver, x11vnc"), ("xvnc", "VNC driver, Xvnc"),
         ("xdotool", "xdotool type --delay 12"))
#: How the xdotool anchor drags (tests/support/control.py), for the drag rows.
XDOTOOL_DRAG = f"xdotool, {DRAG_MOVES} moves, {DRAG_HOVERS} hovers + {DRAG_DWELL_SECONDS} s"
DRAGS = 8
ASCII_TEXT = ("The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:<>? " * 4)[:300]
# At most 18 distinct characters a VNC server must borrow keycodes for (see cud.drivers.vnc).
MIXED_TEXT = ("Grüße — ✓ 日本語 € naïve café " * 12)[:300]


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def _rate(app: App, text: str) -> tuple[float, bool]:
    x, y, w, h = app.field
    driver = app.desktop.driver
    driver.click({"type": "click", "x": x + w // 2, "y": y + h // 2, "button": "left"})
    app.fence(app.mark())
    app.clear()
    result = typing_rate(lambda: driver.type({"type": "type", "text": text}), app.value, text)
    driver.screenshot()  # settle and give borrowed keycodes back, as the SDK loop does
    return result


def _drags(app: App, seed: int) -> tuple[float, int]:
    """(median seconds, how many dropped) of DRAGS random 2-point drags from the square to the drop zone."""
    rng = random.Random(seed)
    (sx, sy, sw, sh), (tx, ty, tw, th) = app.dnd_regions()
    driver = app.desktop.driver
    seconds, dropped = [], 0
    for _ in range(DRAGS):
        path = [(rng.randint(sx + 6, sx + sw - 7), rng.randint(sy + 6, sy + sh - 7)),
                (rng.randint(tx + 6, tx + tw - 7), rng.randint(ty + 6, ty + th - 7))]
        since = app.mark()
        started = time.perf_counter()
        driver.drag({"type": "drag", "path": [{"x": x, "y": y} for x, y in path]})
        seconds.append(time.perf_counter() - started)
        try:
            drop = app.wait_for(lambda e: e["type"] == "drop", since, timeout=3, what="the drop")
            dropped += max(abs(drop["x"] - path[-1][0]), abs(drop["y"] - path[-1][1])) <= 1
        except AssertionError:
            pass
        driver.screenshot()
    return statistics.median(seconds), dropped


def run() -> str:
    rows: list[tuple[object, ...]] = []
    drags: list[tuple[object, ...]] = []
    with tempfile.TemporaryDirectory(prefix="cud-bench-apps-") as tmp:
        for kind, label in KINDS:
            workdir = Path(tmp) / kind
            workdir.mkdir()
            with start_desktop(kind, workdir) as desktop:
                for name in APPS:
                    app = app_class(name)(desktop)
                    app.start()
                    try:
                        for what, text in (("ASCII", ASCII_TEXT), ("mixed non-ASCII", MIXED_TEXT)):
                            rate, exact = _rate(app, text)
                            rows.append((name, label, f"300 {what} chars", f"{rate:.0f} chars/s", _mark(exact)))
                        if "dnd" in app.capabilities:
                            median, dropped = _drags(app, seed=21)
                            drags.append((name, XDOTOOL_DRAG if kind == "xdotool" else label, f"{median * 1000:.0f} ms",
                                          f"{dropped}/{DRAGS}"))
                    finally:
                        app.stop()
    return ("### Typing into applications (1280x800, openbox)\n\n"
            + table(("application", "how", "text", "rate", "exact"), rows)
            + "\n\n### A 2-point drag-and-drop (square to drop zone, median of "
            + f"{DRAGS}; docs/drivers-drag.md)\n\n"
            + table(("application", "how", "drag takes", "dropped"), drags))


if __name__ == "__main__":
    print(run())
