"""The screenshot after an action waits for the screen to settle, with DAMAGE and without it, on a busy machine.

The scene (tests/support/animator.py) paints a run of grey shades, one every PERIOD_MS, when clicked, and ends on
red: a screenshot with any shade in it was taken mid-run. The settle interval is far longer than the run's
period, so the run never looks still to a correct settle even beside the CPU hogs, yet two intervals are a
fraction of the run: a settle that stops watching after the first drawing it sees ends mid-run.
"""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from cud.drivers.x11 import X11Driver
from cud.drivers.xlib_display import open_display
from tests.support.load import cpu_hogs
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, start_xvfb, stop_process

WIDTH, HEIGHT = 320, 200
FRAMES, PERIOD_MS = 120, 10
INTERVAL = 0.3
RED = (255, 0, 0)


@pytest.fixture(params=["damage", "no-damage"])
def xserver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[XServer]:
    server = start_xvfb(tmp_path, WIDTH, HEIGHT, extra=() if request.param == "damage" else ("-extension", "DAMAGE"))
    yield server
    server.stop()


@pytest.fixture
def animator(xserver: XServer, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    ready = tmp_path / "animator.ready"
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "support" / "animator.py"), str(ready),
         f"{WIDTH}x{HEIGHT}+0+0", str(FRAMES), str(PERIOD_MS)],
        env={**os.environ, "DISPLAY": xserver.display}, stdin=subprocess.DEVNULL)
    try:
        wait_until(ready.exists, 30, "the animator to map")
        yield proc
    finally:
        stop_process(proc)


def centre_pixel(url: str) -> tuple[int, int, int]:
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
    pixel: tuple[int, int, int] = image.getpixel((WIDTH // 2, HEIGHT // 2))  # type: ignore[assignment]
    return pixel


def test_the_screenshot_after_an_action_is_of_the_screen_once_it_stopped_changing(
        xserver: XServer, animator: subprocess.Popen[bytes], request: pytest.FixtureRequest) -> None:
    driver = X11Driver(xserver.display, settle_timeout=30.0, settle_interval=INTERVAL)
    try:
        driver.screenshot()
        conn = driver._conn
        assert conn is not None
        # The server's extensions decide the way: DAMAGE where there is one, frames compared where not.
        assert (conn.damage is not None) == (request.node.callspec.params["xserver"] == "damage")
        with cpu_hogs(2):
            driver.click({"type": "click", "button": "left", "x": WIDTH // 2, "y": HEIGHT // 2})
            assert centre_pixel(driver.screenshot()["image_url"]) == RED
    finally:
        driver.close()


@pytest.mark.parametrize("xserver", ["damage"], indirect=True)
def test_drawing_between_screenshots_leaves_one_unread_event_at_most(
        xserver: XServer, animator: subprocess.Popen[bytes]) -> None:
    driver = X11Driver(xserver.display)
    try:
        driver.screenshot()  # the region emptied: the next drawing sends one event
        conn = driver._conn
        assert conn is not None and conn.damage is not None
        driver.click({"type": "click", "button": "left", "x": WIDTH // 2, "y": HEIGHT // 2})
        wait_until(lambda: conn.dpy.pending_events() > 0, 30, "the first drawing's event")
        time.sleep(FRAMES * PERIOD_MS / 1000)  # the run goes on drawing: a frame or a hundred, still one event
        assert conn.dpy.pending_events() == 1
        assert centre_pixel(driver.screenshot()["image_url"]) == RED
    finally:
        driver.close()


@pytest.mark.parametrize("xserver", ["damage"], indirect=True)
def test_a_seat_client_that_frees_the_drivers_damage_object_only_sends_it_back_to_comparing_frames(
        xserver: XServer, animator: subprocess.Popen[bytes]) -> None:
    driver = X11Driver(xserver.display, settle_timeout=30.0, settle_interval=INTERVAL)
    hostile = open_display(xserver.display)
    try:
        driver.screenshot()
        conn = driver._conn
        assert conn is not None and conn.damage is not None
        hostile.damage_query_version()
        hostile.damage_destroy(conn.damage)  # any client may free any client's resource
        hostile.sync()
        driver.click({"type": "click", "button": "left", "x": WIDTH // 2, "y": HEIGHT // 2})
        assert centre_pixel(driver.screenshot()["image_url"]) == RED
        assert conn.damage is None and driver._conn is conn  # the same connection, settling by frames now
    finally:
        hostile.close()
        driver.close()


@pytest.mark.parametrize("xserver", ["damage"], indirect=True)
def test_a_window_repainting_the_same_pixels_does_not_hold_the_screenshot_until_the_timeout(
        xserver: XServer, animator: subprocess.Popen[bytes]) -> None:
    painter = open_display(xserver.display)
    window = painter.screen().root.create_window(0, 0, 40, 40, 0, painter.screen().root_depth,
                                                 background_pixel=painter.screen().white_pixel)
    window.map()
    gc = window.create_gc(foreground=painter.screen().white_pixel)
    stop = threading.Event()
    paints = [0]

    def repaint() -> None:  # the same white square, drawn again and again: DAMAGE on every interval
        while not stop.is_set() and paints[0] < 2_000:
            window.fill_rectangle(gc, 0, 0, 40, 40)
            painter.sync()
            paints[0] += 1
            stop.wait(PERIOD_MS / 1000)

    thread = threading.Thread(target=repaint, daemon=True)
    driver = X11Driver(xserver.display, settle_timeout=3600.0, settle_interval=INTERVAL)
    try:
        thread.start()
        wait_until(lambda: paints[0] > 0, 30, "the first repaint")
        with cpu_hogs(2):
            driver.click({"type": "click", "button": "left", "x": WIDTH // 2, "y": HEIGHT // 2})
            assert centre_pixel(driver.screenshot()["image_url"]) == RED
        # It ended on two identical frames while the square was still being drawn, not once drawing stopped.
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(30)
        driver.close()
        painter.close()
