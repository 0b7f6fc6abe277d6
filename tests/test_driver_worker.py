"""A seat's driver in a process of its own (cud.drivers.worker): what happens when that process dies or hangs.

The drivers' conformance tests in test_x11.py and test_vnc.py run through a worker too (their
``driver`` fixture's ``worker`` parameter); these tests are about the process itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.drivers import worker
from cud.drivers.png import parse_data_url
from cud.drivers.worker import FORKER, WorkerDriver
from cud.errors import DisplayUnavailable, DriverError, DriverTimeout
from tests.support.rawx import held_state
from tests.support.recorder import Recorder, wait_until
from tests.support.sockets import unread_messages
from tests.support.xserver import XServer


@pytest.fixture
def driver(xvfb: XServer) -> Iterator[WorkerDriver]:
    drv = WorkerDriver(display=xvfb.display, wait_seconds=0.05, timeout=5.0)
    yield drv
    drv.close()


def in_flight(drv: WorkerDriver, call: str, *args: object) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``call`` on a thread while the worker is stopped; return once the worker has it unread."""
    pid = drv.pid
    assert pid is not None
    raised: list[BaseException] = []

    def run() -> None:
        try:
            getattr(drv, call)(*args)
        except BaseException as exc:  # (the test looks at what it was)
            raised.append(exc)

    os.kill(pid, signal.SIGSTOP)
    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: unread_messages(pid) > 0, 30, f"the {call} request waiting in worker {pid}")
    return thread, raised


def test_a_worker_killed_mid_call_fails_that_call_naming_it_and_the_next_releases_what_was_left_held(
        driver: WorkerDriver, xvfb: XServer) -> None:
    driver.screenshot()
    first = driver.pid
    assert first is not None and first != os.getpid()
    # What a worker killed half-way through a drag leaves: a button held (X keeps an XTEST press after
    # its client is gone, as xdotool shows), and a key.
    env = {"DISPLAY": xvfb.display, "PATH": "/usr/bin:/bin"}
    subprocess.run(["xdotool", "keydown", "shift", "mousedown", "1"], env=env, check=True)
    assert held_state(xvfb.display) != ([], 0)
    thread, raised = in_flight(driver, "screenshot")
    os.kill(first, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive() and len(raised) == 1, raised
    error = raised[0]
    assert type(error) is DisplayUnavailable, error
    assert error.message == f"the driver process (pid {first}) of {xvfb.display} ended during screenshot"
    assert error.details == {"display": xvfb.display, "pid": first}
    assert driver.pid is None
    wait_until(lambda: not Path(f"/proc/{first}").exists(), 30, f"worker {first} reaped")
    # The next call starts a new worker, which first lets go of everything held.
    assert driver.probe() == (1280, 800)
    assert driver.pid not in (None, first)
    assert held_state(xvfb.display) == ([], 0)


def test_a_worker_that_never_answers_is_killed_after_its_bound(xvfb: XServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "WORKER_SLACK", 0.5)
    drv = WorkerDriver(display=xvfb.display, timeout=0.5, settle_timeout=0.1)
    try:
        drv.probe()
        stopped = drv.pid
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)  # a stopped process answers nothing and never ends by itself
        with pytest.raises(DriverTimeout) as info:
            drv.click({"type": "click", "x": 3, "y": 4, "button": "left"})
        assert info.value.message == (f"the driver process (pid {stopped}) of {xvfb.display} gave no answer to "
                                      "_act in 1.1 s")
        wait_until(lambda: not Path(f"/proc/{stopped}").exists(), 30, f"the hung worker {stopped} killed")
        assert drv.probe() == (1280, 800) and drv.pid != stopped
    finally:
        drv.close()


def test_a_killed_fork_server_is_started_again(driver: WorkerDriver) -> None:
    driver.probe()
    server = FORKER._process
    assert server is not None
    server.kill()
    server.wait()
    os.kill(driver.pid, signal.SIGKILL)  # type: ignore[arg-type]
    with pytest.raises(DisplayUnavailable, match="ended during probe"):
        driver.probe()
    assert driver.probe() == (1280, 800)
    assert FORKER._process is not None and FORKER._process.pid != server.pid


def test_a_worker_answers_only_the_drivers_calls(driver: WorkerDriver) -> None:
    driver.probe()
    with pytest.raises(DriverError) as info:
        driver._call("close")
    assert info.value.message == "a driver worker has no call 'close'" and driver.probe() == (1280, 800)


def test_a_screenshot_and_its_fingerprint_cross_to_the_worker_in_one_call(driver: WorkerDriver,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The stuck guard wants both each step: one round trip to the worker, not two.
    driver.probe()
    calls: list[str] = []
    forward = driver._forward

    def counted(name: str, *args: object, **kwargs: object) -> object:
        calls.append(name)
        return forward(name, *args, **kwargs)

    monkeypatch.setattr(driver, "_forward", counted)
    shot, prints = driver.screenshot_and_fingerprint()
    assert calls == ["screenshot_and_fingerprint"]
    assert parse_data_url(shot["image_url"])[0] == "image/png"
    assert len(prints) == 40 * 25 and (prints == driver.fingerprint()).all()  # of that screenshot's frame


def test_close_lets_the_worker_release_and_exit(driver: WorkerDriver, xvfb: XServer) -> None:
    driver.screenshot()
    pid = driver.pid
    assert pid is not None
    subprocess.run(["xdotool", "keydown", "ctrl"], env={"DISPLAY": xvfb.display, "PATH": "/usr/bin:/bin"},
                   check=True)
    driver.close()
    assert driver.pid is None
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), 30, f"worker {pid} ended and reaped")
    assert held_state(xvfb.display) == ([], 0)  # the driver's close releases everything, as in-process


def test_the_sdks_actions_reach_the_worker_as_plain_data(driver: WorkerDriver, xvfb: XServer) -> None:
    # Unpickling the SDK's pydantic models would import openai (and pydantic, httpx, ssl) into every
    # driver process: each would then hold as much memory as the daemon.
    from openai.types.responses.response_computer_tool_call import ActionDrag, ActionDragPath, ActionType

    driver.drag(ActionDrag(type="drag", path=[ActionDragPath(x=5, y=5), ActionDragPath(x=40, y=30)]))
    driver.type(ActionType(type="type", text="a"))
    maps = Path(f"/proc/{driver.pid}/maps").read_text()
    assert "pydantic_core" not in maps and "_ssl" not in maps
    assert held_state(xvfb.display) == ([], 0)


def _libraries(pid: int) -> set[str]:
    """The files ``pid`` maps (shared libraries, extension modules), not its anonymous or shared memory."""
    paths = {line.split(maxsplit=5)[5] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
             if len(line.split(maxsplit=5)) == 6}
    # The screen's shared memory (mss's memfd or a SysV segment) is the seat's own, necessarily.
    return {path for path in paths if path.startswith("/") and not path.startswith(("/dev/", "/SYSV", "/memfd:"))}


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_a_worker_that_has_worked_loaded_nothing_the_fork_server_had_not_and_encodes_on_one_thread(driver: WorkerDriver,
                                                                        recorder: Recorder) -> None:
    # What a worker imports itself is a copy of its own, paid once per seat: the fork server preloads it
    # (cud.drivers.forker.PRELOAD), so every worker shares it.
    driver.probe()
    assert driver.pid is not None
    threads = _threads(driver.pid)  # its own and the X11 driver's watchdog
    driver.screenshot()
    driver.click({"type": "click", "x": 30, "y": 30, "button": "left"})
    driver.type({"type": "type", "text": "é✓"})
    recorder.wait_text("é✓")
    driver.screenshot()
    driver.fingerprint()
    driver.target_patch(30, 30, 10, from_last_screenshot=True)
    driver.rest()
    assert FORKER._process is not None and driver.pid is not None
    assert _libraries(driver.pid) - _libraries(FORKER._process.pid) == set()
    # It encodes on its own thread, no pool: the seats' processes are what spread over the cores.
    assert _threads(driver.pid) == threads
