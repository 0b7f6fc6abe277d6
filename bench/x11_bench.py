"""X11 driver's input against xdotool, in one run (its screenshots: ``bench.screenshot_bench``).

All numbers are medians on a private 1920x1080 Xvfb showing the busy scene; the
ratios matter more than the milliseconds on a shared machine.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cud.drivers.x11 import X11Driver
from tests.support.recorder import Recorder
from tests.support.xserver import start_xvfb

from . import stats
from .scene import show_busy_scene
from .stats import median_ms, table

WIDTH, HEIGHT = 1920, 1080
ASCII_TEXT = ("The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:<>? " * 4)[:300]
MIXED_TEXT = ("Grüße — ✓ 日本語 € naïve café Ωμέγα Привет ß ñ … " * 8)[:300]


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def _clicks(driver: X11Driver) -> list[tuple[object, ...]]:
    action = {"type": "click", "x": 1500, "y": 900, "button": "left"}
    ours = median_ms(lambda: driver.click(action), 200)

    def xdotool() -> None:
        subprocess.run(["xdotool", "mousemove", "1500", "900", "click", "1"], check=True,
                       env={"DISPLAY": driver.display})

    anchor = median_ms(xdotool, 20)
    return [
        ("click, median", f"{ours:.2f} ms", "", ""),
        ("xdotool mousemove + click 1, median", f"{anchor:.1f} ms", "", ""),
        # A click holds its button 30 ms and the next one waits 30 ms after its release (see
        # cud.drivers.actions): that is what real applications under openbox need, not overhead.
        ("speed-up over xdotool (clicks back to back: 30 ms hold + 30 ms settle)", f"{anchor / ours:.1f}x",
         ">= 1x", _mark(anchor / ours >= 1)),
    ]


def typing_rate(display: str, workdir: Path, text: str, send: object) -> tuple[float, bool]:
    """Characters per second from the first key sent until the app holds the text, and exactness."""
    recorder = Recorder(display, workdir, "900x700+0+0")
    try:
        # With no window manager, keys go to the window under the pointer.
        subprocess.run(["xdotool", "mousemove", "450", "350"], check=True, env={"DISPLAY": display})
        return stats.typing_rate(send, recorder.text, text)  # type: ignore[arg-type]
    finally:
        recorder.stop()


def _typing(driver: X11Driver, workdir: Path) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    env = {"DISPLAY": driver.display, "LC_ALL": "C.UTF-8"}  # xdotool reads the text in the locale's charset
    for label, text, target in (("ASCII", ASCII_TEXT, 1000), ("mixed non-ASCII", MIXED_TEXT, 300)):
        rate, exact = typing_rate(driver.display, workdir, text, lambda t=text: driver.type({"type": "type", "text": t}))
        driver.screenshot()  # settle and give borrowed keycodes back, as the SDK loop does
        anchor_rate, anchor_exact = typing_rate(
            driver.display, workdir, text,
            lambda t=text: subprocess.run(["xdotool", "type", "--delay", "12", "--", t], check=False, env=env))
        rows.append((f"type 300 {label} chars", f"{rate:.0f} chars/s, exact: {_mark(exact)}",
                     f">= {target} chars/s, exact", _mark(rate >= target and exact)))
        rows.append((f"xdotool type --delay 12, {label}", f"{anchor_rate:.0f} chars/s, exact: {_mark(anchor_exact)}",
                     "", ""))
    return rows


def run() -> str:
    with tempfile.TemporaryDirectory(prefix="cud-bench-") as tmp:
        workdir = Path(tmp)
        server = start_xvfb(workdir, WIDTH, HEIGHT)
        scene = None
        driver = X11Driver(server.display)
        try:
            scene = show_busy_scene(server.display, WIDTH, HEIGHT)
            driver.screenshot()  # connect, and let the scene settle
            clicks = _clicks(driver)
            scene.terminate()
            scene.wait()
            typing = _typing(driver, workdir)
        finally:
            driver.close()
            if scene is not None and scene.poll() is None:
                scene.terminate()
                scene.wait()
            server.stop()
    rows = clicks + typing
    return "### X11 driver (1920x1080 Xvfb, busy scene)\n\n" + table(("measure", "cud", "target", "met"), rows)


if __name__ == "__main__":
    print(run())
