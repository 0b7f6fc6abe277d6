"""VNC driver against vncdotool's own captureScreen, and beside the X11 driver, in one run.

A 1280x800 Xvfb shows the busy scene; x11vnc serves it on loopback with a
password, and TigerVNC's Xvnc serves a second copy of the scene. Screenshots:
``VNCDriver.screenshot()`` (incremental update into the kept framebuffer, PNG,
data URL) against ``vncdotool.api``'s ``captureScreen`` to a file, read back and
base64-encoded. Clicks and typing: the VNC driver through x11vnc beside the X11
driver on the Xvfb behind it. Ratios matter more than milliseconds.
"""

from __future__ import annotations

import base64
import tempfile
import warnings
from pathlib import Path

from cud.drivers.png import PngSettings
from cud.drivers.vnc import VNCDriver
from cud.drivers.x11 import X11Driver
from tests.support.vnc import VncServer, start_x11vnc, start_xvnc
from tests.support.xserver import start_xvfb

from .scene import show_busy_scene
from .stats import median_ms, table
from .x11_bench import typing_rate

WIDTH, HEIGHT = 1280, 800
ASCII_TEXT = ("The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:<>? " * 4)[:300]
# At most 18 distinct characters a VNC server must borrow keycodes for (see cud.drivers.vnc).
MIXED_TEXT = ("Grüße — ✓ 日本語 € naïve café " * 12)[:300]


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def _screenshots(vnc: VncServer, workdir: Path) -> list[tuple[object, ...]]:
    from vncdotool import api

    # Reuse off: every frame is encoded whole, as vncdotool's are (an unchanged screen would cost us ~nothing).
    driver = VNCDriver(vnc.server, vnc.password, png=PngSettings(reuse=False))
    try:
        driver.screenshot()
        ours = median_ms(driver.screenshot, 40)
    finally:
        driver.close()
    shot = workdir / "vncdotool.png"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # vncdotool's DES goes through a deprecated cryptography path
        client = api.connect(vnc.server, vnc.password, timeout=30)

        def vncdotool() -> str:
            client.captureScreen(str(shot))
            return "data:image/png;base64," + base64.b64encode(shot.read_bytes()).decode()

        try:
            anchor = median_ms(vncdotool, 15)
        finally:
            # Not api.shutdown(): that stops the process's one Twisted reactor for good.
            client.disconnect()
    ratio = anchor / ours
    return [
        (f"{vnc.kind}: screenshot -> data URL, median", f"{ours:.1f} ms", "", ""),
        (f"{vnc.kind}: vncdotool captureScreen + base64, median", f"{anchor:.1f} ms", "", ""),
        (f"{vnc.kind}: speed-up over vncdotool", f"{ratio:.1f}x", ">= 2x", _mark(ratio >= 2)),
    ]


def _clicks(vnc_driver: VNCDriver, x11_driver: X11Driver) -> list[tuple[object, ...]]:
    action = {"type": "click", "x": 1000, "y": 700, "button": "left"}
    ours = median_ms(lambda: vnc_driver.click(action), 100)
    x11 = median_ms(lambda: x11_driver.click(action), 100)
    return [
        ("x11vnc: click, median (returns when the server has read it)", f"{ours:.2f} ms", "", ""),
        ("X11 driver on the same Xvfb: click, median", f"{x11:.2f} ms", "", ""),
    ]


def _typing(vnc_driver: VNCDriver, x11_driver: X11Driver, display: str, workdir: Path) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for label, text in (("ASCII", ASCII_TEXT), ("mixed non-ASCII", MIXED_TEXT)):
        for name, driver in (("x11vnc: VNC driver", vnc_driver), ("X11 driver", x11_driver)):
            # Keys go to the window under the pointer (no window manager).
            driver.move({"type": "move", "x": 450, "y": 350})
            rate, exact = typing_rate(display, workdir, text, lambda d=driver, t=text: d.type({"type": "type", "text": t}))
            driver.screenshot()
            rows.append((f"{name}: type 300 {label} chars", f"{rate:.0f} chars/s, exact: {_mark(exact)}", "", ""))
    return rows


def run() -> str:
    with tempfile.TemporaryDirectory(prefix="cud-bench-vnc-") as tmp:
        workdir = Path(tmp)
        xvfb = start_xvfb(workdir, WIDTH, HEIGHT)
        scenes = []
        servers: list[VncServer] = []
        vnc_driver = x11_driver = None
        try:
            scenes.append(show_busy_scene(xvfb.display, WIDTH, HEIGHT))
            servers.append(start_x11vnc(xvfb.display, workdir))
            xvnc_dir = workdir / "xvnc"
            xvnc_dir.mkdir()
            servers.append(start_xvnc(xvnc_dir, width=WIDTH, height=HEIGHT))
            scenes.append(show_busy_scene(servers[1].display, WIDTH, HEIGHT))
            rows = [row for vnc in servers for row in _screenshots(vnc, workdir)]
            vnc_driver = VNCDriver(servers[0].server, servers[0].password)
            x11_driver = X11Driver(xvfb.display)
            rows += _clicks(vnc_driver, x11_driver)
            for scene in scenes:
                scene.terminate()
                scene.wait()
            rows += _typing(vnc_driver, x11_driver, xvfb.display, workdir)
        finally:
            for driver in (vnc_driver, x11_driver):
                if driver is not None:
                    driver.close()
            for scene in scenes:
                if scene.poll() is None:
                    scene.terminate()
                    scene.wait()
            for vnc in servers:
                vnc.stop()
            xvfb.stop()
    return ("### VNC driver (1280x800, busy scene, loopback, password auth)\n\n"
            + table(("measure", "cud", "target", "met"), rows))


if __name__ == "__main__":
    print(run())
