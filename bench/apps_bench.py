"""Typing into real applications: Chromium's textarea and a GTK text view, per driver, beside xdotool.

The desktops and applications are the conformance suite's (``tests/support``):
openbox on a private Xvfb (X11 driver, and xdotool as the anchor), x11vnc on
Xvfb and TigerVNC's Xvnc (VNC driver). A rate runs from the first key sent until
the application holds as many characters as were typed; "exact" compares what
it holds with the text.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.support.apps import app_class
from tests.support.apps.base import App
from tests.support.desktop import start_desktop

from .stats import table, typing_rate

APPS = ("chromium", "gtk")
KINDS = (("x11", "X11 driver"), ("x11vnc", "VNC driver, x11vnc"), ("xvnc", "VNC driver, Xvnc"),
         ("xdotool", "xdotool type --delay 12"))
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


def run() -> str:
    rows: list[tuple[object, ...]] = []
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
                    finally:
                        app.stop()
    return ("### Typing into applications (1280x800, openbox)\n\n"
            + table(("application", "how", "text", "rate", "exact"), rows))


if __name__ == "__main__":
    print(run())
