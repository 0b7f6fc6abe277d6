"""The X11 driver against a real Xvfb and a window that records what reaches it."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai.lib.computer import AsyncComputerToolset, ComputerToolset
from openai.types.responses import ResponseComputerToolCall
from PIL import Image
from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import res

from cud.drivers.aio import AsyncDriver
from cud.drivers.deadline import Deadline
from cud.drivers.drag_motion import drag_motion
from cud.drivers.worker import WorkerDriver
from cud.drivers.x11 import X11Driver
from cud.drivers.x11_keyboard import _COMMAND_KEYSYMS
from cud.errors import ActionRejected, DisplayUnavailable, DriverTimeout, OutOfBounds, UnknownKey
from tests.support.rawx import (
    DRAG_PATH,
    RawWindow,
    assert_double_click_is_timed_right,
    drag_events,
    held_state,
    wheel_presses,
)
from tests.support.recorder import Recorder, events_before_marker, presses, wait_until
from tests.support.xserver import XServer, start_xvfb, stop_process

SHIFT, CONTROL = X.ShiftMask, X.ControlMask


@pytest.fixture(params=["in-process", "worker"])
def driver(xvfb: XServer, request: pytest.FixtureRequest) -> Iterator[X11Driver]:
    """The driver in the test's process, and the same driver in a worker process as the daemon runs it."""
    drv = (X11Driver(xvfb.display, wait_seconds=0.05) if request.param == "in-process"
           else WorkerDriver(display=xvfb.display, wait_seconds=0.05))
    yield drv  # type: ignore[misc]  # a WorkerDriver has the X11Driver's calls (and its display)
    drv.close()



def assert_nothing_held(display: str) -> None:
    assert held_state(display) == ([], 0)



def keymap(display: str) -> list[tuple[int, ...]]:
    """Each keycode's unshifted and shifted symbol (the core map's width and group
    layout change with XKB's view of it; these two levels are what typing uses)."""
    dpy = Display(display)
    try:
        return [tuple(row[:2]) for row in dpy.get_keyboard_mapping(8, 248)]
    finally:
        dpy.close()


def test_screen_size_is_the_display_size(driver: X11Driver, xvfb: XServer) -> None:
    assert driver.screen_size == (xvfb.width, xvfb.height)


@pytest.mark.parametrize(("button", "number"), [("left", 1), ("wheel", 2), ("right", 3), ("back", 8), ("forward", 9)])
def test_click_reaches_the_exact_point_with_the_exact_button(
    driver: X11Driver, recorder: Recorder, button: str, number: int
) -> None:
    start = recorder.mark()
    driver.click({"type": "click", "x": 637, "y": 411, "button": button})
    recorder.wait_for(lambda e: e["type"] == "ButtonRelease", since=start, what="the release")
    events = recorder.events(start)
    assert presses(events) == [(number, 637, 411)]
    assert presses(events, "ButtonRelease") == [(number, 637, 411)]
    assert_nothing_held(driver.display)


def test_double_click_is_two_left_clicks_at_the_point(driver: X11Driver, recorder: Recorder) -> None:
    start = recorder.mark()
    driver.double_click({"type": "double_click", "x": 20, "y": 799})
    recorder.wait_for(lambda e: e["type"] == "ButtonRelease" and len(presses(recorder.events(start))) == 2,
                      since=start, what="two clicks")
    assert presses(recorder.events(start)) == [(1, 20, 799), (1, 20, 799)]


def test_double_click_presses_have_distinct_server_times_within_the_double_click_time(
        driver: X11Driver, xvfb: XServer) -> None:
    assert_double_click_is_timed_right(driver, xvfb.display, xvfb.width, xvfb.height)


def test_keys_held_during_a_click_are_in_its_state_and_released(driver: X11Driver, recorder: Recorder) -> None:
    start = recorder.mark()
    driver.click({"type": "click", "x": 50, "y": 60, "button": "left", "keys": ["SHIFT", "CTRL"]})
    press = recorder.wait_for(lambda e: e["type"] == "ButtonPress", since=start, what="the click")
    assert press["state"] & (SHIFT | CONTROL) == SHIFT | CONTROL
    assert_nothing_held(driver.display)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, World! ~`@#$%^&*()_+{}|:\"<>?-=[]\\;',./ 0123456789",
        "ü — ✓ 日本語 € ñ Ω ß",
        "line one\nline two\n\ttabbed",
    ],
)
def test_type_is_exact(driver: X11Driver, recorder: Recorder, text: str) -> None:
    driver.type({"type": "type", "text": text})
    recorder.wait_text(text)
    assert_nothing_held(driver.display)


def test_type_more_distinct_missing_characters_than_spare_keycodes(driver: X11Driver, recorder: Recorder) -> None:
    # Greek and Cyrillic letters: ~130 distinct symbols absent from the US keymap,
    # far more than Xvfb's spare keycodes, so keycodes are reassigned mid-text.
    text = "".join(chr(c) for c in range(0x391, 0x3AA) if c != 0x3A2) + " " + "".join(
        chr(c) for c in range(0x410, 0x450)) + " " + "".join(chr(c) for c in range(0x3B1, 0x3CA))
    before = keymap(driver.display)
    driver.type({"type": "type", "text": text})
    recorder.wait_text(text, timeout=30)
    during = keymap(driver.display)
    assert during != before, "the text should have needed borrowed keycodes"
    # Keys Chromium acts on by keycode (Back, Reload, Copy...) are never lent out.
    commands = [i for i, syms in enumerate(before) if set(syms) & _COMMAND_KEYSYMS]
    assert commands and all(during[i] == before[i] for i in commands)
    driver.screenshot()  # settles, then gives the borrowed keycodes back
    assert keymap(driver.display) == before


def test_keypress_combo_presses_in_order_and_releases_in_reverse(driver: X11Driver, recorder: Recorder) -> None:
    start = recorder.mark()
    driver.keypress({"type": "keypress", "keys": ["CTRL", "SHIFT", "a"]})
    recorder.wait_for(lambda e: e["type"] == "KeyRelease" and e["keysym"] == "Control_L", since=start,
                      what="the last release")
    keys = [(e["type"], e["keysym"]) for e in recorder.events(start) if e["type"].startswith("Key")]
    assert keys == [
        ("KeyPress", "Control_L"), ("KeyPress", "Shift_L"), ("KeyPress", "A"),
        ("KeyRelease", "A"), ("KeyRelease", "Shift_L"), ("KeyRelease", "Control_L"),
    ]
    press_a = next(e for e in recorder.events(start) if e["type"] == "KeyPress" and e["keysym"] == "A")
    assert press_a["state"] & (SHIFT | CONTROL) == SHIFT | CONTROL
    assert_nothing_held(driver.display)


@pytest.mark.parametrize(
    ("name", "keysym"),
    [("ENTER", "Return"), ("ESC", "Escape"), ("ArrowLeft", "Left"), ("PageDown", "Next"), ("F5", "F5"),
     ("Page_Up", "Prior"), ("KP_Enter", "KP_Enter"), ("Delete", "Delete"), ("F13", "F13")],
)
def test_model_key_names_press_the_right_keysym(driver: X11Driver, recorder: Recorder, name: str,
                                                keysym: str) -> None:
    start = recorder.mark()
    driver.keypress({"type": "keypress", "keys": [name]})
    event = recorder.wait_for(lambda e: e["type"] == "KeyPress", since=start, what=f"{name} pressed")
    assert event["keysym_num"] == XK.string_to_keysym(keysym)


def test_wheel_directions_and_notches(driver: X11Driver, xvfb: XServer) -> None:
    raw = RawWindow(xvfb.display, xvfb.width, xvfb.height)
    try:
        pressed = wheel_presses(driver, raw)
    finally:
        raw.close()
    assert pressed == [(5, 300, 200)] * 3 + [(4, 300, 200), (7, 300, 200), (6, 300, 200), (1, 300, 200)]


def test_drag_follows_the_whole_path(driver: X11Driver, xvfb: XServer) -> None:
    # Read at the server level: toolkits (Tk included) merge queued motion events.
    raw = RawWindow(xvfb.display, xvfb.width, xvfb.height)
    try:
        events = drag_events(driver, raw)
    finally:
        raw.close()
    assert [(k, d, x, y) for k, d, x, y, _ in events if k != "motion"] == [
        ("press", 1, 100, 100), ("release", 1, 400, 300)]
    dragged = [(x, y) for k, _, x, y, state in events if k == "motion" and state & X.Button1Mask]
    # Every step of the shared schedule, which visits every point of the path (test_drag_motion).
    path = tuple((p["x"], p["y"]) for p in DRAG_PATH)
    assert dragged == list(drag_motion(path, (xvfb.width, xvfb.height)).points)
    assert all(state & SHIFT for k, _, _, _, state in events if k != "motion" or state & X.Button1Mask)
    assert_nothing_held(driver.display)


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ({"type": "click", "x": 1280, "y": 10, "button": "left"}, OutOfBounds),
        ({"type": "double_click", "x": 10, "y": -3}, OutOfBounds),
        ({"type": "keypress", "keys": ["CTRL", "NOT_A_KEY"]}, UnknownKey),
        ({"type": "click", "x": 10, "y": 10, "button": "left", "keys": ["SHIFT", "BOGUS"]}, UnknownKey),
        ({"type": "drag", "path": []}, ActionRejected),
        ({"type": "drag", "path": [{"x": 5, "y": 5}, {"x": 5000, "y": 5}]}, OutOfBounds),
        ({"type": "scroll", "x": 10, "y": 900, "scroll_x": 0, "scroll_y": 100}, OutOfBounds),
        ({"type": "type", "text": "ok until \x1b"}, UnknownKey),
    ],
)
def test_rejected_actions_send_nothing_at_all(driver: X11Driver, recorder: Recorder, action: dict,
                                              error: type) -> None:
    start = recorder.mark()
    with pytest.raises(error):
        getattr(driver, action["type"])(action)
    assert events_before_marker(driver, recorder, start) == []
    assert_nothing_held(driver.display)


def test_an_action_failing_half_way_leaves_nothing_held(xvfb: XServer, recorder: Recorder,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    driver = X11Driver(xvfb.display)  # in this process: the failure is injected into its keyboard
    try:
        driver.screenshot()  # connect
        keyboard = driver._conn.keyboard  # type: ignore[union-attr]
        real_type = keyboard.type

        def type_then_fail(keysyms: tuple[int, ...], *, caps_lock: bool) -> None:
            keyboard.press_keysym(XK.XK_Shift_L)
            real_type(keysyms, caps_lock=caps_lock)
            raise RuntimeError("injected failure half-way")

        monkeypatch.setattr(keyboard, "type", type_then_fail)
        with pytest.raises(RuntimeError, match="injected"):
            driver.type({"type": "type", "text": "abc"})
        assert_nothing_held(driver.display)
    finally:
        driver.close()


def test_release_all_releases_what_another_client_left_held(driver: X11Driver, xvfb: XServer) -> None:
    env = {"DISPLAY": xvfb.display, "PATH": "/usr/bin:/bin"}
    subprocess.run(["xdotool", "keydown", "shift", "keydown", "ctrl", "mousedown", "1"], env=env, check=True)
    assert held_state(xvfb.display) != ([], 0)
    driver.release_all()
    assert_nothing_held(xvfb.display)


def test_screenshot_is_the_screen_in_native_pixels(driver: X11Driver, recorder: Recorder, xvfb: XServer) -> None:
    driver.type({"type": "type", "text": "pixels"})
    recorder.wait_text("pixels")
    shot = driver.screenshot()
    assert shot["type"] == "computer_screenshot"
    prefix = "data:image/png;base64,"
    assert shot["image_url"].startswith(prefix)
    image = Image.open(io.BytesIO(base64.b64decode(shot["image_url"][len(prefix):])))
    assert image.size == (xvfb.width, xvfb.height) and image.mode == "RGB"
    dpy = Display(xvfb.display)
    try:
        raw = dpy.screen().root.get_image(0, 0, xvfb.width, xvfb.height, X.ZPixmap, 0xFFFFFFFF).data
    finally:
        dpy.close()
    reference = Image.frombuffer("RGB", image.size, raw, "raw", "BGRX", 0, 1)
    assert image.tobytes() == reference.tobytes()
    assert len(image.getcolors(maxcolors=1 << 16) or ()) > 2, "the typed text should be on the screen"


def _x_clients(display: str) -> int:
    """How many connections this process has to ``display``, not counting the one this function makes (other
    processes' clients are not counted: one from an earlier test may still be going away)."""
    conn = Display(display)
    try:
        clients = [c for c in conn.res_query_clients().clients if c.resource_base]
        specs = [{"client": c.resource_base, "mask": res.LocalClientPIDMask} for c in clients]
        pids = [i.value[0] if i.value else None for i in conn.res_query_client_ids(specs).ids]
        return pids.count(os.getpid()) - 1
    finally:
        conn.close()


def test_a_seat_at_rest_keeps_no_screen_sized_buffer_and_its_next_screenshot_makes_them_again(
        xvfb: XServer, recorder: Recorder) -> None:
    from cud.drivers import png

    drv = X11Driver(xvfb.display)
    try:
        drv.probe()
        connected = _x_clients(xvfb.display)  # the driver's python-xlib connection
        assert connected == 1
        first = drv.screenshot()
        assert _x_clients(xvfb.display) == connected + 1  # mss's own connection, with its shared memory
        assert png._WORK  # the PNG filter buffers of the threads that encoded
        drv.rest()
        assert _x_clients(xvfb.display) == connected and not png._WORK
        drv.type({"type": "type", "text": "again"})
        recorder.wait_text("again")
        assert drv.screenshot() != first and _x_clients(xvfb.display) == connected + 1
    finally:
        drv.close()


def test_target_patch_tracks_changes_since_the_last_screenshot(driver: X11Driver, recorder: Recorder) -> None:
    driver.screenshot()
    before = driver.target_patch(30, 10, 16, from_last_screenshot=True)
    assert driver.target_patch(30, 10, 16, from_last_screenshot=False) == before
    driver.type({"type": "type", "text": "WWWWWWWW"})
    recorder.wait_text("WWWWWWWW")
    # The recorder logs the text when Tk has the keys; it draws them a moment later.
    wait_until(lambda: driver.target_patch(30, 10, 16, from_last_screenshot=False) != before, 10, "a change")
    assert driver.target_patch(30, 10, 16, from_last_screenshot=True) == before
    driver.screenshot()
    assert driver.target_patch(30, 10, 16, from_last_screenshot=True) != before


def test_the_fingerprint_of_the_last_screenshot_changes_in_the_tiles_that_changed(driver: X11Driver,
                                                                                  recorder: Recorder) -> None:
    driver.screenshot()
    first = driver.fingerprint()
    width, height = driver.screen_size
    assert len(first) == -(-width // 32) * -(-height // 32) and (driver.fingerprint() == first).all()
    driver.type({"type": "type", "text": "MMMM"})
    recorder.wait_text("MMMM")
    wait_until(lambda: driver.target_patch(30, 10, 16, from_last_screenshot=False)
               != driver.target_patch(30, 10, 16, from_last_screenshot=True), 10, "the text on the screen")
    assert (driver.fingerprint() == first).all()  # still the last screenshot's
    driver.screenshot()
    changed = (driver.fingerprint() != first).nonzero()[0]
    assert 0 < len(changed) < len(first) // 10, changed  # the text's tiles, not the screen


@pytest.mark.parametrize("call", ["click", "screenshot", "connect"])
def test_a_stopped_x_server_times_out_naming_the_call_and_the_next_call_works(
        xvfb: XServer, recorder: Recorder, call: str) -> None:
    # python-xlib and libxcb wait forever on a stopped server: the driver's watchdog
    # cuts the connection (click: python-xlib's socket; screenshot: mss's; connect: before either).
    drv = X11Driver(xvfb.display)
    try:
        if call != "connect":
            drv.screenshot()  # connected, with the default timeout
        drv.timeout = 1.0
        os.kill(xvfb.pid, signal.SIGSTOP)
        try:
            with pytest.raises(DriverTimeout) as info:
                if call == "screenshot":
                    drv.screenshot()
                else:
                    drv.click({"type": "click", "x": 5, "y": 5, "button": "left"})
        finally:
            os.kill(xvfb.pid, signal.SIGCONT)
        named = "connecting" if call == "connect" else "(click)" if call == "click" else "(screenshot)"
        assert xvfb.display in info.value.message and named in info.value.message, info.value.message
        drv.timeout = 10.0
        start = recorder.mark()
        drv.click({"type": "click", "x": 444, "y": 222, "button": "right"})
        recorder.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 3, since=start,
                          what="the click after SIGCONT")
        assert [p for p in presses(recorder.events(start)) if p[0] == 3] == [(3, 444, 222)]
    finally:
        drv.close()
    assert_nothing_held(xvfb.display)


def test_a_cut_block_ends_only_once_the_cut_has_shut_every_socket() -> None:
    # The cut shuts python-xlib's socket, then mss's, by number. The blocked call returns at the first;
    # had the caller gone on to close and reconnect, its new socket could take the number the cut was
    # about to shut (CI: the reconnect after SIGCONT failed, mss's new connection cut under it).
    deadline = Deadline(0.05)
    first_shut, block_left = threading.Event(), threading.Event()
    overlapped: list[bool] = []

    def cut() -> None:  # a slow second shutdown: the block must not end while it runs
        first_shut.set()
        overlapped.append(block_left.wait(1.0))

    def call() -> None:
        with deadline.bound("click", cut):
            first_shut.wait(10)  # a read that returns once the first socket is shut
        block_left.set()

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(20)
    assert not caller.is_alive() and overlapped == [False] and deadline.expired == "click"


def test_a_call_is_cut_on_its_own_time_however_the_watchdog_sleeps() -> None:
    # The watchdog is woken only when a call is due before its wait would end by itself: once while it
    # sleeps on a longer call's deadline, once while it waits with nothing armed. Each blocked call here
    # returns only when cut, well before the 30 s deadline it would otherwise be found at.
    deadline = Deadline(30.0)
    with deadline.bound("look", lambda: None):
        # Held until the watchdog sleeps on this call's deadline, 30 s on; let go at once, it would
        # find the call gone and wait with nothing armed, and the first case below would not be tried.
        for _ in range(1000):
            if deadline._wakes_at < math.inf:
                break
            time.sleep(0.01)
        assert deadline._wakes_at < math.inf, "the watchdog never slept on the call's deadline"
    deadline.timeout = 0.05
    for what in ("click", "type"):  # the second after the first cut: the watchdog then waits for a notify
        released = threading.Event()

        def call(what: str = what, released: threading.Event = released) -> None:
            with deadline.bound(what, released.set):
                released.wait(20)

        caller = threading.Thread(target=call)
        caller.start()
        caller.join(25)
        assert not caller.is_alive() and released.is_set() and deadline.expired == what, what


def test_display_going_away_is_clear_and_the_next_call_reconnects(tmp_path: Path) -> None:
    server = start_xvfb(tmp_path)
    drv = X11Driver(server.display)
    try:
        drv.screenshot()
        server.stop()
        with pytest.raises(DisplayUnavailable) as info:
            drv.click({"type": "click", "x": 1, "y": 1, "button": "left"})
        assert server.display in str(info.value)
        # A new server on the display number the old one chose and released.
        number = server.display.lstrip(":")
        restarted = subprocess.Popen(
            ["Xvfb", server.display, "-screen", "0", "640x480x24", "-nolisten", "tcp", "-noreset"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_until(lambda: Path(f"/tmp/.X11-unix/X{number}").exists(), 10, "the restarted server")

            def reconnects() -> bool:
                try:
                    return drv.screen_size == (640, 480)
                except DisplayUnavailable:
                    return False

            wait_until(reconnects, 10, "a reconnect")
        finally:
            drv.close()
            stop_process(restarted)
    finally:
        drv.close()
        server.stop()


def test_wait_honours_cancellation(driver: X11Driver) -> None:
    import threading

    driver.wait_seconds = 3600
    asked = threading.Event()

    def cancelled() -> bool:
        asked.set()
        return True

    waiter = threading.Thread(target=driver.wait, args=({"type": "wait"},), kwargs={"cancelled": cancelled})
    waiter.start()
    waiter.join(120)  # a guard against hanging for the hour, not a timing check
    assert asked.is_set() and not waiter.is_alive()


def _call(*actions: dict) -> ResponseComputerToolCall:
    return ResponseComputerToolCall.model_validate(
        {"type": "computer_call", "id": "cu_1", "call_id": "call_1", "status": "completed",
         "pending_safety_checks": [], "actions": list(actions)}
    )


def test_the_sdk_toolset_drives_the_driver(driver: X11Driver, recorder: Recorder) -> None:
    start = recorder.mark()
    output = ComputerToolset(driver).execute(
        _call({"type": "click", "x": 222, "y": 333, "button": "left"}, {"type": "type", "text": "SDK ✓"})
    )
    assert output["type"] == "computer_call_output" and output["call_id"] == "call_1"
    assert output["output"]["image_url"].startswith("data:image/png;base64,")
    assert presses(recorder.events(start)) == [(1, 222, 333)]
    recorder.wait_text("SDK ✓")


def test_the_async_toolset_drives_the_driver_through_the_adapter(driver: X11Driver, recorder: Recorder) -> None:
    adriver = AsyncDriver(driver)

    async def go() -> dict:
        try:
            return await AsyncComputerToolset(adriver).execute(_call({"type": "type", "text": "async ü"}))
        finally:
            await adriver.aclose()

    output = asyncio.run(go())
    assert output["output"]["image_url"].startswith("data:image/png;base64,")
    recorder.wait_text("async ü")



def test_the_x11_driver_also_drives_an_xvnc_display(tmp_path: Path) -> None:
    # mss's default backend rejects Xvnc's root visual; the driver falls back to another.
    import Xlib.protocol.display
    import Xlib.protocol.event

    from tests.support.vnc import start_xvnc

    def reset_xlib_event_codes() -> None:  # python-xlib shares them across servers (see test_vnc.py)
        Xlib.protocol.display.Display.event_classes = Xlib.protocol.event.event_class.copy()

    reset_xlib_event_codes()
    server = start_xvnc(tmp_path)
    recorder = drv = None
    try:
        recorder = Recorder(server.display, tmp_path, "1280x800+0+0")
        drv = X11Driver(server.display)
        start = recorder.mark()
        drv.click({"type": "click", "x": 321, "y": 123, "button": "right"})
        recorder.wait_for(lambda e: e["type"] == "ButtonRelease", since=start, what="the release")
        assert presses(recorder.events(start)) == [(3, 321, 123)]
        image = Image.open(io.BytesIO(base64.b64decode(drv.screenshot()["image_url"].split(",", 1)[1])))
        assert image.size == (1280, 800)
    finally:
        if drv is not None:
            drv.close()
        if recorder is not None:
            recorder.stop()
        server.stop()
        reset_xlib_event_codes()


def test_keycodes_a_killed_run_left_borrowed_are_given_back(xvfb: XServer, recorder: Recorder) -> None:
    dpy = Display(xvfb.display)
    try:
        rows = dpy.get_keyboard_mapping(8, 248)
        spare = next(8 + i for i, row in enumerate(rows) if 8 + i > 8 and not any(row))
        # What cud or xdotool leaves behind when killed while typing a check mark.
        dpy.change_keyboard_mapping(spare, [(0x01002713,) * 2 + (X.NoSymbol,) * (len(rows[0]) - 2)])
        dpy.sync()
    finally:
        dpy.close()
    assert keymap(xvfb.display)[spare - 8] == (0x01002713, 0x01002713)
    drv = X11Driver(xvfb.display)
    try:
        drv.screenshot()  # connects
        assert keymap(xvfb.display)[spare - 8] == (X.NoSymbol, X.NoSymbol)
        drv.type({"type": "type", "text": "✓ü"})
        recorder.wait_text("✓ü")
    finally:
        drv.close()
