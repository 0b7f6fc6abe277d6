"""The target resolver on real applications: GTK and Qt dialogs, xterm, under openbox with a real AT-SPI bus.

The named target of a click or of typing must be the element the application
reports receiving it; an app off the bus, a hung app and a dead bus give a
window-only target with the reason, never an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.daemon.targets.lookup import TargetResolver
from cud.drivers.x11_windows import X11Windows
from tests.support.a11y import A11yBus, ChromiumForm, FormApp, start_a11y_bus
from tests.support.desktop import Desktop, start_desktop
from tests.support.recorder import wait_until
from tests.support.seeds import run_seed


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Desktop, A11yBus, dict[str, FormApp]]]:
    workdir = Path(tempfile.mkdtemp(prefix="cud-targets-"))
    try:
        with start_desktop("x11", workdir) as desktop:
            bus = start_a11y_bus(desktop)
            apps: dict[str, FormApp] = {}
            try:
                for toolkit in ("gtk", "qt"):
                    app = FormApp(desktop, bus, toolkit)
                    app.start()
                    apps[toolkit] = app
                yield desktop, bus, apps
            finally:
                for app in apps.values():
                    app.stop()
                bus.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


#: Lookups checked for what they find get time enough on a loaded machine (a toolkit builds
#: its accessible objects on the first question); the budget itself is checked below.
ROOMY = 5.0
#: The focus walk's clicks: new every run (CUD_TEST_FOCUS_SEED replays one; a failure names it).
FOCUS_SEED = run_seed("CUD_TEST_FOCUS_SEED")


def resolve(desktop: Desktop, bus: str, coro: Any, timeout: float = ROOMY) -> Any:
    async def main() -> Any:
        resolver = TargetResolver(desktop.display, bus, timeout=timeout)
        try:
            assert await resolver.warm() is None
            return await coro(resolver)
        finally:
            await resolver.close()

    # On a thread of its own: Playwright's sync API (the Chromium tests) keeps a loop on this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


@pytest.mark.parametrize("toolkit", ["gtk", "qt"])
def test_click_target_is_the_button_that_was_clicked(stack: Any, toolkit: str) -> None:
    desktop, bus, apps = stack
    app = apps[toolkit]
    for label in ("Delete account", "Cancel"):
        x, y = app.button(label)
        target = resolve(desktop, bus.address, lambda r, at=(x, y): r.at_point(*at))
        assert target["note"] is None, target
        assert target["window"]["pid"] == app.pid and target["window"]["title"] == "Account settings"
        assert target["window"]["process"] == "python3"
        element = target["element"]
        assert (element["role"], element["name"]) == ("push button", label), target
        assert element["application"] == f"{toolkit}_form.py"
        since = app.mark()
        desktop.driver.click({"type": "click", "x": x, "y": y, "button": "left"})
        got = app.wait_for(lambda e: e["type"] == "clicked", since, what=f"a click on {label!r}")
        assert got["widget"] == element["name"]


@pytest.mark.parametrize("toolkit", ["gtk", "qt"])
def test_the_focus_is_followed_by_events(stack: Any, toolkit: str) -> None:
    """One connection while the focus moves: each lookup names the object the focus event named, no walk."""
    desktop, bus, apps = stack
    app = apps[toolkit]

    async def main(resolver: TargetResolver) -> None:
        atspi = resolver._atspi
        assert atspi is not None
        found = await atspi.app_of_pid(app.pid)
        assert found is not None
        state = app._state()
        boxes = {**state["buttons"], "Search": state["field"]}
        seed = FOCUS_SEED.value + len(toolkit)
        rng = random.Random(seed)
        # A random walk of the focus over the dialog's widgets, each clicked at a random point in it.
        for name in ["Search", *(rng.choice(sorted(boxes)) for _ in range(5))]:
            bx, by, bw, bh = boxes[name]
            # Inside the middle three fifths: GTK's entry takes no focus from a click on its 2-px frame.
            x, y = bx + bw // 5 + rng.randrange(max(1, bw * 3 // 5)), by + bh // 5 + rng.randrange(max(1, bh * 3 // 5))
            desktop.driver.click({"type": "click", "x": x, "y": y, "button": "left"})
            for _ in range(500):  # the event may come after the click returns: at most 10 s
                path = atspi._focus.get(found.bus_name)
                if path is not None and (await atspi.read((found.bus_name, path), bounds=False)).name == name:
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError(
                    f"no focus event named {name!r} in {toolkit} at {(x, y)} (last: {path!r}; {FOCUS_SEED})")
            walks = 0
            walk = atspi.frames

            async def counted(app_: Any, walk: Any = walk) -> Any:  # this toolkit's walk, bound now
                nonlocal walks
                walks += 1
                return await walk(app_)

            atspi.frames = counted  # type: ignore[method-assign]  # the walk starts from the frames
            try:
                target = await resolver.focus()
            finally:
                del atspi.frames
            assert target["element"]["name"] == name and "focused" in target["element"]["states"], (str(FOCUS_SEED), target)
            assert walks == 0, f"the focus of {toolkit} was found by walking its tree, not its events ({FOCUS_SEED})"

    resolve(desktop, bus.address, main)


@pytest.mark.parametrize("toolkit", ["gtk", "qt"])
def test_typing_target_is_the_focused_entry(stack: Any, toolkit: str) -> None:
    desktop, bus, apps = stack
    app = apps[toolkit]
    x, y = app.entry()
    desktop.driver.click({"type": "click", "x": x, "y": y, "button": "left"})
    target = wait_until(lambda: (t := resolve(desktop, bus.address, lambda r: r.focus()))["element"]
                        and "focused" in t["element"]["states"] and t, 10, "the entry to have the focus")
    assert target["window"]["pid"] == app.pid
    element = target["element"]
    assert element["name"] == "Search" and "editable" in element["states"], target
    since = app.mark()
    desktop.driver.type({"type": "type", "text": "abc"})
    got = app.wait_for(lambda e: e["type"] == "text" and e["value"].endswith("abc"), since, what="the typed text")
    assert got["widget"] == element["name"]


def test_xterm_is_window_only(stack: Any) -> None:
    desktop, bus, _apps = stack
    proc = desktop.spawn(["xterm", "-geometry", "40x10+900+600", "-T", "a terminal"], "xterm.log")
    try:
        windows = X11Windows(desktop.display)
        try:
            info = wait_until(lambda: (w := windows.window_at(1000, 650)) and w.wm_class == "XTerm" and w, 20,
                              "xterm's window")
        finally:
            windows.close()
        target = resolve(desktop, bus.address, lambda r: r.at_point(1000, 650))
        assert target["window"]["class"] == "XTerm" and target["window"]["title"] == "a terminal"
        assert target["window"]["pid"] == info.pid == proc.pid and target["window"]["process"] == "xterm"
        assert target["element"] is None
        assert f"xterm (pid {proc.pid}) is not on the accessibility bus" in target["note"]
    finally:
        proc.terminate()
        proc.wait(5)


#: The hung-app lookups' budget: room for the X half (a window query on a loaded machine) and
#: the other app's lookup; the stopped app never answers, so its lookups end on the budget whatever it is.
HUNG_BUDGET = 2.0
#: Only for a resolver that does not keep its budget: a guard that fails the test instead of hanging it.
GUARD = 30.0


def test_a_hung_application_costs_one_bounded_wait_and_only_itself(stack: Any) -> None:
    desktop, bus, apps = stack
    gtk, qt = apps["gtk"], apps["qt"]
    x, y = gtk.button("Cancel")
    qx, qy = qt.button("Cancel")
    # Qt joins the bus after its window maps, and builds its accessible objects on a first
    # question: both waited for here, out of the budget below.
    wait_until(lambda: (resolve(desktop, bus.address, lambda r: r.at_point(qx, qy))["element"] or {}).get("name")
               == "Cancel", 20, "the Qt app's button on the accessibility bus")

    async def bounded(lookup: Any, what: str) -> Any:
        try:
            return await asyncio.wait_for(lookup, GUARD)
        except TimeoutError:
            raise AssertionError(f"{what} waited for the stopped application, past its own budget") from None

    async def while_hung(resolver: TargetResolver) -> tuple[Any, Any, int, Any]:
        atspi = resolver._atspi
        assert atspi is not None
        os.kill(gtk.pid, signal.SIGSTOP)
        try:  # the app answers nothing until every lookup below has returned
            first = await bounded(resolver.at_point(x, y), "the first lookup")
            before = atspi.calls_sent
            second = await bounded(resolver.at_point(x, y), "the second lookup")
            asked = atspi.calls_sent - before
            other = await bounded(resolver.at_point(qx, qy), "the other app's lookup")
        finally:
            os.kill(gtk.pid, signal.SIGCONT)
        return first, second, asked, other

    first, second, asked, other = resolve(desktop, bus.address, while_hung, timeout=HUNG_BUDGET)
    # Each ended on the resolver's own deadline, and says so: window only, with the reason.
    for target in (first, second):
        assert target["window"]["pid"] == gtk.pid and target["element"] is None, target
        assert (f"did not answer within {HUNG_BUDGET * 1000:.0f} ms for pid {gtk.pid} (window only"
                in target["note"]), target
    # No second wait: the second lookup did not ask the bus at all.
    assert asked == 0, f"the second lookup sent {asked} D-Bus call(s) while the application was known to hang"
    # Only that app, not the whole bus: the Qt app, asked on the same connection meanwhile, answers.
    assert other["window"]["pid"] == qt.pid and other["note"] is None, other
    assert (other["element"]["name"], other["element"]["application"]) == ("Cancel", "qt_form.py"), other
    # A new lookup after the app woke finds the element again.
    again = resolve(desktop, bus.address, lambda r: r.at_point(x, y))
    assert again["element"]["name"] == "Cancel"


def test_a_dead_bus_degrades_to_window_only(tmp_path: Path) -> None:
    with start_desktop("x11", tmp_path) as desktop:
        bus = start_a11y_bus(desktop)
        address = bus.address
        bus.stop()
        desktop.spawn(["xterm", "-geometry", "40x10+100+100"], "xterm.log")
        windows = X11Windows(desktop.display)
        try:
            wait_until(lambda: (w := windows.window_at(150, 150)) and w.wm_class == "XTerm", 20, "xterm's window")
        finally:
            windows.close()

        async def look() -> tuple[str | None, Any]:
            resolver = TargetResolver(desktop.display, address)
            try:
                return await resolver.warm(), await resolver.at_point(150, 150)
            finally:
                await resolver.close()

        reason, target = asyncio.run(look())
        assert reason is not None and "cannot be reached" in reason
        assert target["window"] is not None and target["window"]["class"] == "XTerm", target
        assert target["element"] is None and target["note"] == reason


def test_no_bus_and_vnc_without_display_say_why() -> None:
    async def look() -> tuple[Any, Any]:
        vnc = TargetResolver(None, None, vnc=True)
        plain = TargetResolver(None, None)
        try:
            return await vnc.at_point(1, 2), await plain.focus()
        finally:
            await vnc.close()
            await plain.close()

    vnc, plain = asyncio.run(look())
    assert vnc["window"] is None and vnc["element"] is None and vnc["note"].startswith("unknown (VNC)")
    assert plain["note"].startswith("no X display")


@pytest.fixture(scope="module")
def chromium() -> Iterator[tuple[Desktop, A11yBus, ChromiumForm]]:
    workdir = Path(tempfile.mkdtemp(prefix="cud-targets-chromium-"))
    try:
        with start_desktop("x11", workdir) as desktop:
            bus = start_a11y_bus(desktop)
            app = ChromiumForm(desktop, bus)
            try:
                app.start()
                yield desktop, bus, app
            finally:
                app.stop()
                bus.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize(("element_id", "role", "name"), [("delete", "push button", "Delete account"),
                                                          ("cancel", "push button", "Cancel"),
                                                          ("help", "link", "Help")])
def test_chromium_click_target_is_what_the_page_received(chromium: Any, element_id: str, role: str,
                                                         name: str) -> None:
    desktop, bus, app = chromium
    x, y = app.centre(element_id)
    target = resolve(desktop, bus.address, lambda r: r.at_point(x, y))
    assert target["window"]["pid"] == app.pid and target["window"]["process"] == "chromium", target
    assert target["window"]["title"] == "Account settings - Chromium"
    element = target["element"]
    assert (element["role"], element["name"], element["application"]) == (role, name, "Chromium"), target
    since = app.mark()
    desktop.driver.click({"type": "click", "x": x, "y": y, "button": "left"})
    got = app.wait_for(lambda e: e["type"] == "clicked", since, f"a click on {name!r}")
    assert got["widget"] == element["name"]


def test_chromium_typing_target_is_the_focused_field(chromium: Any) -> None:
    desktop, bus, app = chromium
    x, y = app.centre("search")
    desktop.driver.click({"type": "click", "x": x, "y": y, "button": "left"})
    wait_until(lambda: app.page.evaluate("document.activeElement.id") == "search", 10, "the page to focus the field")
    target = wait_until(lambda: (t := resolve(desktop, bus.address, lambda r: r.focus()))["element"]
                        and t["element"]["role"] != "document web" and t, 10, "the bus to report the focus")
    element = target["element"]
    assert (element["role"], element["name"]) == ("entry", "Search"), target
    assert "focused" in element["states"]
    since = app.mark()
    desktop.driver.type({"type": "type", "text": "xyz"})
    got = app.wait_for(lambda e: e["type"] == "text" and e["value"].endswith("xyz"), since, "the typed text")
    assert got["widget"] == element["name"]
