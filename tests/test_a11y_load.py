"""The accessibility path under load, and a connection lost under a look (issue 35, item 2).

One openbox desktop on Xvfb, one session bus with at-spi2-core's accessibility bus, and two
applications on it: the GTK form (tests/support/forms/gtk_form.py) and a zenity list of
:data:`ROWS` rows, whose table has enough cells that an element search sends the bus more
calls at once than a socket's buffer holds. The checks run as a spec task's do
(:func:`cud.daemon.spec.checks.run_check` on a :class:`cud.daemon.spec.desktop.Desktop`, a
new one per run, as each task makes), and the target lookup as an action's does.

* Under two CPU-bound processes (a load of 4 on 2 cores with the test and the bus), 50 runs
  of an element search through the list, an element's text, an element's states and a window
  check: every check passes and no run needed a second connection.
* A connection shut under a check (or a lookup) is made anew and the look run once more: the
  check passes, on the second connection.
* A bus that stays gone: the check could not look, naming the bus, after exactly one more
  connection, within the look's bound.
* A window whose title changes while it is read (X11Windows): never an error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from Xlib import X
from Xlib.display import Display

from cud.daemon.spec.checks import run_check
from cud.daemon.spec.desktop import A11Y_TIMEOUT, Desktop
from cud.daemon.targets.lookup import TargetResolver
from cud.drivers.x11_windows import X11Windows
from cud.spec import Check, Match
from cud.spec.checks import parse_check
from tests.support.a11y import A11yBus, FormApp, a11y_env, start_a11y_bus
from tests.support.desktop import Desktop as SeatDesktop
from tests.support.desktop import start_desktop
from tests.support.load import cpu_hogs
from tests.support.recorder import wait_until

#: Rows of the zenity list: two cells each, every one an accessible object the search reads.
ROWS = 400
RUNS = 50
#: A lookup's budget here: time enough on a loaded machine (the budget itself is test_targets.py's).
LOOKUP_TIMEOUT = 5.0
HOGS = 2


def _checks() -> list[Check]:
    raw: list[dict[str, Any]] = [
        # The last row of the list: the search reads every cell of the table (one burst of calls).
        {"element": {"app": "zenity", "name": f"row {ROWS - 1}"}},
        # The form's entry, and its text: a lost connection must not read as "it has no text".
        {"element": {"role": "text", "name": "Search"}, "text": "re:^$"},
        {"element": {"role": "push button", "name": "Cancel"}, "states": ["showing", "enabled"]},
        {"window": {"title": "Account settings"}},
    ]
    return [parse_check(f"checks[{i}]", each) for i, each in enumerate(raw)]


CHECKS = _checks()


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[SeatDesktop, A11yBus]]:
    workdir = Path(tempfile.mkdtemp(prefix="cud-a11y-load-"))
    try:
        with start_desktop("x11", workdir) as desktop:
            bus = start_a11y_bus(desktop)
            form = FormApp(desktop, bus, "gtk")
            rows = [f"row {i}" for i in range(ROWS)]
            try:
                form.start()
                desktop.spawn(["zenity", "--list", "--title=Rows", "--column=Name", *rows],
                              "zenity.log", env=a11y_env(desktop, bus))
                wait_until(lambda: _all_pass(desktop, bus, CHECKS[:1]), 60, "zenity's list on the accessibility bus")
                yield desktop, bus
            finally:
                form.stop()
                bus.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _run(desktop: Desktop, checks: list[Check]) -> list[Any]:
    return [await run_check(i, check, None, desktop, {}, None) for i, check in enumerate(checks)]


def _all_pass(desktop: SeatDesktop, bus: A11yBus, checks: list[Check]) -> bool:
    async def main() -> bool:
        seen = Desktop(desktop.display, bus.address)
        try:
            return all(r["passed"] for r in await _run(seen, checks))
        finally:
            await seen.close()

    return asyncio.run(main())


def test_checks_under_load_all_pass_on_one_connection(stack: Any) -> None:
    desktop, bus = stack

    async def runs() -> list[tuple[list[Any], int]]:
        out = []
        for _ in range(RUNS):
            seen = Desktop(desktop.display, bus.address)
            try:
                results = await _run(seen, CHECKS)
                assert seen._atspi is not None
                out.append((results, seen._atspi.connects))
            finally:
                await seen.close()
        return out

    with cpu_hogs(HOGS):
        done = asyncio.run(runs())
    bad = [(i, r["name"], r["why"]) for i, (results, _) in enumerate(done) for r in results if not r["passed"]]
    assert not bad, f"{len(bad)} of {RUNS * len(CHECKS)} checks did not pass under load: {bad[:5]}"
    # No run lost its connection and made another: the retry is for what is left, not for load.
    assert [connects for _, connects in done] == [1] * RUNS


def _shut(desktop: Desktop) -> None:
    """Shut the check's accessibility bus connection down under it (as a bus that went away would)."""
    assert desktop._atspi is not None and desktop._atspi._bus is not None
    sock: socket.socket = desktop._atspi._bus._sock
    sock.shutdown(socket.SHUT_RDWR)


def test_a_connection_lost_under_a_check_is_made_anew_and_the_check_passes(stack: Any) -> None:
    desktop, bus = stack

    async def main() -> tuple[list[Any], list[Any], int]:
        seen = Desktop(desktop.display, bus.address)
        try:
            first = await _run(seen, CHECKS[1:3])
            _shut(seen)
            again = await _run(seen, CHECKS[1:3])
            assert seen._atspi is not None
            return first, again, seen._atspi.connects
        finally:
            await seen.close()

    first, again, connects = asyncio.run(main())
    assert all(r["passed"] for r in first), first
    assert all(r["passed"] for r in again), [r["why"] for r in again]
    assert connects == 2


def test_a_connection_lost_before_an_elements_text_is_read_is_no_missing_text(stack: Any) -> None:
    """The text is read on a new connection: a lost one is not "it has no text" (a false failed check)."""
    desktop, bus = stack

    async def main() -> tuple[str | None, int]:
        seen = Desktop(desktop.display, bus.address)
        try:
            (entry,) = await seen.find_elements(None, Match.parse("text"), Match.parse("Search"))
            _shut(seen)
            text = await seen.text(entry)
            assert seen._atspi is not None
            return text, seen._atspi.connects
        finally:
            await seen.close()

    assert asyncio.run(main()) == ("", 2)


def test_a_connection_lost_under_a_lookup_is_made_anew(stack: Any) -> None:
    """Lost while the lookup waits on the application (stopped a moment): looked up again on a new connection."""
    desktop, bus = stack
    x, y, w, h = json_state(desktop)["buttons"]["Cancel"]
    at = (x + w // 2, y + h // 2)

    async def main() -> tuple[Any, Any, int]:
        resolver = TargetResolver(desktop.display, bus.address, timeout=LOOKUP_TIMEOUT)
        try:
            assert await resolver.warm(LOOKUP_TIMEOUT) is None
            first = await resolver.at_point(*at)
            atspi = resolver._atspi
            assert atspi is not None and atspi._bus is not None and first["window"] is not None
            pid = first["window"]["pid"]
            os.kill(pid, signal.SIGSTOP)
            try:
                sent = atspi.calls_sent
                lookup = asyncio.ensure_future(resolver.at_point(*at))
                while atspi.calls_sent == sent:  # it has asked the stopped application, and waits
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)
                assert not lookup.done()
                atspi._bus._sock.shutdown(socket.SHUT_RDWR)
            finally:
                os.kill(pid, signal.SIGCONT)
            return first, await lookup, atspi.connects
        finally:
            await resolver.close()

    first, again, connects = asyncio.run(main())
    assert first["element"] is not None, first
    assert again["note"] is None, again["note"]
    assert again["element"] is not None
    assert (again["element"]["role"], again["element"]["name"]) == (first["element"]["role"], first["element"]["name"])
    assert connects == 2


def json_state(desktop: SeatDesktop) -> dict[str, Any]:
    return dict(json.loads((desktop.workdir / "gtk-form" / "state.json").read_text()))


async def _lost_for_good(display: str, own: A11yBus, check: Check) -> tuple[Any, Any, int, str | None]:
    """``check`` on ``own`` bus, then again after ``own`` is stopped (session bus, launcher and all)."""
    seen = Desktop(display, own.address)
    try:
        first = await run_check(0, check, None, seen, {}, None)
        own.stop()
        gone = await run_check(0, check, None, seen, {}, None)
        assert seen._atspi is not None
        return first, gone, seen._atspi.connects, seen._atspi.address
    finally:
        await seen.close()


def test_a_bus_that_stays_gone_could_not_look_after_one_retry(stack: Any, tmp_path: Path) -> None:
    desktop, _ = stack
    # A bus of its own (stopped here): the module's goes on serving the other tests.
    own = start_a11y_bus(dataclasses.replace(desktop, workdir=tmp_path, procs=[]))
    absent = parse_check("checks[0]", {"element": {"name": "nothing by this name"}, "exists": False})
    try:
        first, gone, connects, address = asyncio.run(_lost_for_good(desktop.display, own, absent))
    finally:
        own.stop()
    assert first["passed"], first
    assert not gone["passed"]
    why = str(gone["why"])
    assert why.startswith("could not look: the connection to the accessibility bus "), why
    assert f"{address!r} was lost" in why, why
    # The second try: the session bus it is found through is gone too.
    assert f"looking again on a new connection failed too: the session bus {own.address!r}" in why, why
    assert connects == 2  # one connection, then exactly one more
    assert gone["ms"] < A11Y_TIMEOUT * 1000


def test_a_window_whose_title_changes_while_read_is_no_error(stack: Any) -> None:
    desktop, _ = stack
    dpy = Display(desktop.display)
    window = dpy.screen().root.create_window(10, 10, 200, 100, 0, X.CopyFromParent)
    utf8, net_name = dpy.intern_atom("UTF8_STRING"), dpy.intern_atom("_NET_WM_NAME")
    window.set_wm_name("flicker")
    window.map()
    dpy.sync()
    windows = X11Windows(desktop.display, timeout=5.0)
    stop = threading.Event()

    def flicker() -> None:
        # Longer than python-xlib's first read (40 bytes), then shorter: a read in two parts meets BadValue.
        titles = [b"a long title that changes " * 4, b"short"]
        i = 0
        while not stop.is_set():
            window.change_property(net_name, utf8, 8, titles[i % 2])
            dpy.flush()
            i += 1

    try:
        wait_until(lambda: any(w.title == "flicker" or w.title.startswith(("a long", "short"))
                               for w in windows.client_windows()), 20, "the test's window to be managed")
        thread = threading.Thread(target=flicker, daemon=True)
        thread.start()
        try:
            titles = set()
            for _ in range(400):
                titles |= {w.title for w in windows.client_windows()}
        finally:
            stop.set()
            thread.join()
    finally:
        windows.close()
        window.destroy()
        dpy.close()
    assert "short" in titles and ("a long title that changes " * 4) in titles
