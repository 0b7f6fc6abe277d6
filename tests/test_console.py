"""cuctl console: the real daemon, a private Xvfb with the recording window, the scripted model, and
Debian's Chromium driven by Playwright (tests/support/browser.py) as the person at the page.

The HTTP guards are checked with a plain HTTP client, which can send what a
browser never would (a foreign Host, no Origin); everything a person does is
done by clicking the page. Every page test also checks that the page logged no
error or warning and asked for nothing outside its own origin.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import pwd
import re
import signal
from collections.abc import Callable, Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cud.drivers.x11 import X11Driver
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.browser import CHROMIUM, Browser, Watched
from tests.support.console import Console
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.recorder import Recorder, presses, wait_until
from tests.support.xserver import start_xvfb

needs_chromium = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM}")

TARGET = (200, 150)
CLICK_WITH_CHECK = scenario(
    {"message": "I'll press Send.", "safety_checks": [{"code": "confirm_send", "message": "This sends <mail>."}],
     "actions": [{"type": "click", "button": "left", "x": TARGET[0], "y": TARGET[1]}]},
    {"message": "Sent."},
)
MODEL_TYPES = scenario({"actions": [{"type": "type", "text": "m"}]}, {"actions": [{"type": "wait"}]},
                       {"message": "done"})
MIXED = "Grüße, 12 €!"
MARK = (0xE0, 0x24, 0x5E)  # the report's colour for the model's pointer actions (cud/record/overlay.py)
NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups"]


@pytest.fixture
def open_console(short_tmp: Path) -> Iterator[Callable[..., Console]]:
    made: list[Console] = []

    def start(daemon: Daemon, prefix: list[str] | None = None) -> Console:
        console = Console(daemon.socket, short_tmp, prefix=prefix)
        made.append(console)
        return console

    yield start
    for console in made:  # every console exits cleanly, and none logged an error on the way
        assert console.stop() == 0, console.log_text()
        assert "Traceback" not in console.log_text() and "Error handling request" not in console.log_text()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chromium = Browser(tmp_path)
    yield chromium
    chromium.close()


def _request(console: Console, method: str, path: str, *, headers: dict[str, str] | None = None,
             body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", console.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{console.port}", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _session(console: Console) -> str:
    """Trade the console's token for its cookie, as the browser does; return the Cookie header."""
    status, headers, _ = _request(console, "GET", console.url.removeprefix(console.origin))
    assert status == 303 and headers["location"] == "/", (status, headers)
    cookie = SimpleCookie(headers["set-cookie"])
    (name, morsel), = cookie.items()
    assert morsel["httponly"] and morsel["samesite"] == "Strict" and morsel["path"] == "/", headers["set-cookie"]
    return f"{name}={morsel.value}"


def _open(browser: Browser, console: Console) -> Watched:
    watched = browser.open(console.url, width=1400, height=1000)
    assert watched.page.url == f"{console.origin}/"  # the token left the address bar
    watched.page.wait_for_selector("#status.ok")
    return watched


def _clean(watched: Watched, console: Console, allow: tuple[str, ...] = ()) -> None:
    assert watched.report.problems(allow=allow) == []
    assert watched.report.foreign(console.origin) == []


_SEEN = """() => {
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => "%s"});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def _pixels(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


# -- the HTTP side ------------------------------------------------------------------------------
def test_the_console_listens_on_loopback_only_and_refuses_strangers(start_daemon, open_console) -> None:
    daemon = start_daemon(CLICK_WITH_CHECK)
    task_id = daemon.call("submit", prompt="send it")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon)
    listening = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    ours = [f[1] for f in listening if f[3] == "0A" and int(f[1].split(":")[1], 16) == console.port]
    assert ours == [f"0100007F:{console.port:04X}"]  # 127.0.0.1, nothing else
    assert not any(int(line.split()[1].split(":")[1], 16) == console.port
                   for line in Path("/proc/net/tcp6").read_text().splitlines()[1:])

    # No session: nothing at all, the page's own files included.
    for path in ("/", "/static/app.js", "/api/state", f"/api/tasks/{task_id}/images/{approval['screenshot']}"):
        status, headers, body = _request(console, "GET", path)
        assert status == 401, (path, status)
        assert "default-src 'self'" in headers["content-security-policy"]
    assert _request(console, "GET", "/?token=wrong")[0] == 403
    cookie = _session(console)
    status, _, body = _request(console, "GET", console.url.removeprefix(console.origin))
    assert status == 403 and b"already used" in body  # the token works once
    status, headers, body = _request(console, "GET", "/", headers={"Cookie": cookie})
    assert status == 200 and b"cud console" in body
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "img-src 'self' data: blob:" in csp
    assert "http" not in csp and "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff"

    # DNS rebinding: the right cookie, but the name of someone else's site (or another port).
    for host in ("evil.example", f"evil.example:{console.port}", f"localhost:{console.port}",
                 f"127.0.0.1:{console.port + 1}"):
        status, _, body = _request(console, "GET", "/api/state", headers={"Host": host, "Cookie": cookie})
        assert status == 403 and host.encode() in body, (host, status, body)

    # A POST from another page: a foreign Origin, none, or not a JSON body. The approval stays pending.
    approve = f"/api/approvals/{approval['id']}/approve"
    for headers in ({"Origin": "http://evil.example", "Content-Type": "application/json"},
                    {"Origin": f"http://localhost:{console.port}", "Content-Type": "application/json"},
                    {"Content-Type": "application/json"},
                    {"Origin": console.origin, "Content-Type": "text/plain"}):
        status, _, body = _request(console, "POST", approve, headers={"Cookie": cookie, **headers}, body=b"{}")
        assert status in (403, 415), (headers, status, body)
    assert [a["id"] for a in daemon.call("approvals")] == [approval["id"]]
    ok = {"Cookie": cookie, "Origin": console.origin, "Content-Type": "application/json"}
    status, _, body = _request(console, "POST", approve, headers=ok, body=b"{}")
    assert status == 200 and json.loads(body)["state"] == "approved"
    daemon.wait_state(task_id, "succeeded")
    assert console.stop(signal.SIGINT) == 0  # Ctrl-C: a clean exit


def test_bad_input_gets_an_error_that_names_it(start_daemon, open_console) -> None:
    daemon = start_daemon(MODEL_TYPES, approval="actions")
    task_id = daemon.call("submit", prompt="type m")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon)
    cookie = _session(console)
    get = {"Cookie": cookie}
    post = {**get, "Origin": console.origin, "Content-Type": "application/json"}

    def error(method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
        status, headers, raw = _request(console, method, path, headers=post if method == "POST" else get, body=body)
        assert headers["content-type"].startswith("application/json"), (path, raw)
        return status, json.loads(raw)["error"]["message"]

    wanted = f"task id must be an integer from 1 to {(1 << 63) - 1}, got 'abc'"
    assert error("GET", "/api/tasks/abc/events") == (400, wanted)
    assert error("GET", "/api/tasks/99/events") == (404, "no task with id 99")
    status, message = error("GET", "/api/tasks/" + "9" * 5000 + "/events")
    assert status == 400 and "task id must be an integer" in message
    status, message = error("GET", f"/api/tasks/{task_id}/images/..%2Fcud.db")
    assert status == 400 and "'../cud.db' is not the name of a trajectory file" in message
    status, message = error("GET", "/api/seats/no.such.seat/screen.png")
    assert status == 404 and "no.such.seat" in message
    status, message = error("POST", f"/api/approvals/{approval['id']}/deny", b"{not json")
    assert status == 400 and "not valid JSON" in message
    status, message = error("POST", f"/api/approvals/{approval['id']}/deny", b"[" * 100_000)
    assert status == 400 and "nested too deeply" in message
    status, message = error("POST", f"/api/approvals/{approval['id']}/deny", b'{"reason": 5}')
    assert (status, message) == (400, "'reason' must be a string, got 5")
    status, message = error("POST", f"/api/approvals/{approval['id']}/deny", b'{"because": "x"}')
    assert status == 400 and "unknown field 'because'" in message
    status, message = error("POST", f"/api/tasks/{task_id}/act", b'{"action": "click"}')
    assert status == 400 and "'action' must be a JSON object" in message and '"click"' in message
    status, message = error("POST", f"/api/tasks/{task_id}/act", b'{"action": {"type": "fly"}}')
    assert status == 400 and "'fly'" in message
    status, message = error("POST", f"/api/tasks/{task_id}/act", b'{"action": {"type": "type", "text": "x"}}')
    assert status == 409 and f"task {task_id} is not paused" in message  # the daemon's words
    status, message = error("POST", "/api/approvals/77/approve", b"{}")
    assert status == 404 and "77" in message
    assert error("GET", "/api/nothing") == (404, "no such page: '/api/nothing'")
    assert [a["id"] for a in daemon.call("approvals")] == [approval["id"]]  # nothing was decided


def test_without_a_daemon_the_console_does_not_start(short_tmp: Path) -> None:
    result = cuctl(short_tmp / "absent.sock", "console")
    assert result.returncode == 2 and "cannot connect to the daemon" in result.stderr and not result.stdout


# -- the page ---------------------------------------------------------------------------------------
@needs_chromium
def test_approve_on_the_page_with_the_screenshot_and_its_mark(start_daemon, recorder: Recorder, open_console,
                                                             browser: Browser) -> None:
    daemon = start_daemon(CLICK_WITH_CHECK)
    task_id = daemon.call("submit", prompt="send <it>")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon)
    watched = _open(browser, console)
    page = watched.page
    card = page.locator(f'article.approval[data-id="{approval["id"]}"]')
    card.wait_for()
    text = card.inner_text()
    for needle in ("This sends <mail>.", f"at ({TARGET[0]}, {TARGET[1]})", "send <it>",
                   f"task {task_id}", "seat default"):
        assert needle in text, needle
    # What the click touches, in words: the recording window (this desktop has no accessibility bus).
    assert re.search(r'click the window "[^"]+" \([^)]+\) at \(200, 150\)', text), text
    # The picture is the approval's own screenshot, its target marked where the model aimed.
    page.wait_for_function("""() => [...document.querySelectorAll("article.approval img")]
                              .every(i => i.complete && i.naturalWidth > 0)""")
    shot = card.locator("img.shot")
    assert shot.get_attribute("src") == f"/api/tasks/{task_id}/images/{approval['screenshot']}"
    assert shot.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [1280, 800]
    frame = card.locator(".frame")
    picture = _pixels(frame.screenshot())
    scale = picture.width / 1280
    x, y = round(TARGET[0] * scale), round(TARGET[1] * scale)
    near = picture.crop((x - 30, y - 30, x + 30, y + 30)).getcolors(1 << 16) or []
    assert any(all(abs(c - m) < 24 for c, m in zip(colour[:3], MARK, strict=True)) for _, colour in near)
    far = picture.crop((picture.width - 60, picture.height - 60, picture.width, picture.height)).getcolors(1 << 16)
    assert not any(all(abs(c - m) < 24 for c, m in zip(colour[:3], MARK, strict=True)) for _, colour in far or [])

    mark = recorder.mark()
    card.get_by_role("button", name="Approve", exact=True).click()
    assert daemon.wait_state(task_id, "succeeded")["final_message"] == "Sent."
    recorder.wait_for(lambda e: e["type"] == "ButtonPress", since=mark, what="the approved click")
    assert presses(recorder.events(mark))[:1] == [(1, *TARGET)]
    card.wait_for(state="detached")  # no longer pending: gone from the page
    decided = next(e for e in daemon.events(task_id) if e["kind"] == "approval_decided")["data"]
    assert decided["outcome"] == "approved" and decided["by"]["uid"] == os.getuid()

    # The task's events, in cuctl follow's words; its report, from cuctl report's renderer.
    page.locator(f'#tasks tr[data-id="{task_id}"]').click()
    page.wait_for_selector("#events li.closing")
    shown = page.locator("#events li[data-kind]").all_inner_texts()
    assert shown == cuctl(daemon.socket, "follow", str(task_id)).stdout.splitlines()
    page.wait_for_selector(f'#tasks tr[data-id="{task_id}"] .state.succeeded')  # the next poll's
    href = page.locator("#report-link").get_attribute("href")
    assert href == f"/tasks/{task_id}/report"
    report = browser.open(console.origin + "/", width=1280, height=900)  # a fresh context has no cookie
    assert report.page.locator("body").inner_text().startswith("no console session")
    report.close()
    with page.context.expect_page() as opened:
        page.locator("#report-link").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.title() == f"cud task {task_id} — succeeded"
    assert "approved by" in tab.locator("body").inner_text()
    tab.close()
    _clean(watched, console)
    watched.close()


@needs_chromium
def test_deny_on_the_page_with_a_reason(start_daemon, recorder: Recorder, open_console, browser: Browser) -> None:
    daemon = start_daemon(CLICK_WITH_CHECK)
    task_id = daemon.call("submit", prompt="send it")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon)
    watched = _open(browser, console)
    card = watched.page.locator(f'article.approval[data-id="{approval["id"]}"]')
    mark = recorder.mark()
    card.get_by_placeholder("Reason (optional)").fill("not <today> ✓")
    card.get_by_role("button", name="Deny", exact=True).click()
    task = daemon.wait_state(task_id, "failed")
    assert "denied" in task["error"]["message"]
    decided = next(e for e in daemon.events(task_id) if e["kind"] == "approval_decided")["data"]
    assert decided["outcome"] == "denied" and decided["reason"] == "not <today> ✓"
    assert presses(recorder.fenced(mark)) == []  # the click never ran
    card.wait_for(state="detached")
    watched.page.wait_for_selector(f'#tasks tr[data-id="{task_id}"] .state.failed')
    _clean(watched, console)
    watched.close()


@needs_chromium
def test_the_live_screen_follows_the_display(start_daemon, recorder: Recorder, xvfb: Any, open_console,
                                             browser: Browser) -> None:
    daemon = start_daemon(scenario({"message": "nothing to do"}))
    console = open_console(daemon)
    watched = _open(browser, console)
    page = watched.page
    seat = page.locator('article.seat[data-seat="default"]')
    page.wait_for_function("() => Number(document.querySelector('article.seat').dataset.frames) > 1")
    live = seat.locator("img.live")
    assert live.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [1280, 800]
    before = _pixels(live.screenshot())
    driver = X11Driver(xvfb.display)
    try:
        driver.type({"type": "type", "text": "WWWW MMMM " * 8})  # into the recording window, on our own Xvfb
    finally:
        driver.close()
    recorder.wait_text("WWWW MMMM " * 8)
    # The page shows what the display shows now: its own frames, fetched while it is visible.
    wait_until(lambda: _pixels(live.screenshot()).tobytes() != before.tobytes(), 30, "the live screen to change")

    # A page nobody looks at fetches no frames (the state keeps being polled, which is the clock
    # here); seen again, it fetches them again. Headless pages are always visible, so the page is
    # told it is hidden the way a browser tells it: visibilityState and a visibilitychange event.
    def frames_asked() -> int:
        return sum(u.endswith("/api/seats/default/screen.png") for u in watched.report.requests)

    page.evaluate(_SEEN % "hidden")
    hidden_at = frames_asked()
    for _ in range(3):
        with page.expect_request(lambda r: r.url.endswith("/api/state")):
            pass
    assert frames_asked() <= hidden_at + 1  # the one already on its way, at most
    page.evaluate(_SEEN % "visible")
    for _ in range(3):
        with page.expect_request(lambda r: r.url.endswith("/screen.png")):
            pass
    _clean(watched, console)
    watched.close()


@needs_chromium
def test_an_approve_the_daemon_refuses_is_shown_on_the_page(start_daemon, recorder: Recorder, open_console,
                                                            browser: Browser) -> None:
    daemon = start_daemon(CLICK_WITH_CHECK, config='[access]\nsubmit_users = ["nobody"]\n')
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    task_id = daemon.call("submit", prompt="send it")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon, prefix=AS_NOBODY)  # a submitter, not an approver
    watched = _open(browser, console)
    page = watched.page
    assert "nobody (uid 65534) · may not approve" in page.locator("#who").inner_text()
    card = page.locator(f'article.approval[data-id="{approval["id"]}"]')
    card.get_by_role("button", name="Approve", exact=True).click()
    refusal = card.locator(".result.error")
    refusal.wait_for()
    assert refusal.inner_text().startswith("The daemon refused: user 'nobody' (uid 65534) may not approve actions")
    assert "may not approve actions" in page.locator("#notice").inner_text()
    assert daemon.task(task_id)["state"] == "awaiting_approval"
    assert [a["id"] for a in daemon.call("approvals")] == [approval["id"]]
    # Root, an approver, still can; the page of the refused user sees the task go on.
    daemon.call("approve", id=approval["id"])
    daemon.wait_state(task_id, "succeeded")
    card.wait_for(state="detached")
    _clean(watched, console, allow=("status of 403 (Forbidden)",))  # the refusal itself
    assert sum("403" in p for p in watched.report.problems()) == 1
    watched.close()


@needs_chromium
def test_pause_take_over_with_exact_text_and_hand_back_on_the_page(start_daemon, recorder: Recorder, open_console,
                                                                   browser: Browser) -> None:
    # The model's typing needs an approval; Pause is pressed while it waits, so the pause lands right
    # after the typed batch, before its screenshot: no timing involved.
    daemon = start_daemon(MODEL_TYPES, approval="actions")
    task_id = daemon.call("submit", prompt="type m")["id"]
    approval = daemon.wait_approval(task_id)
    console = open_console(daemon)
    watched = _open(browser, console)
    page = watched.page
    seat = page.locator('article.seat[data-seat="default"]')
    seat.get_by_role("button", name="Pause", exact=True).click()
    seat.locator(".result:not(.error)").filter(has_text="pause requested").wait_for()
    page.locator(f'article.approval[data-id="{approval["id"]}"]').get_by_role("button", name="Approve",
                                                                              exact=True).click()
    daemon.wait_state(task_id, "paused")
    recorder.wait_text("m")
    page.wait_for_selector('article.seat[data-task-state="paused"]')

    seat.get_by_role("button", name="Take over", exact=True).click()
    seat.get_by_placeholder("Text to type, exactly").fill(MIXED)
    seat.get_by_role("button", name="Type", exact=True).click()
    recorder.wait_text("m" + MIXED)
    seat.locator(".screen").focus()
    page.keyboard.type("ok")  # keys pressed on the live screen go to the seat too
    recorder.wait_text("m" + MIXED + "ok")
    seat.get_by_role("button", name="Enter", exact=True).click()
    recorder.wait_text("m" + MIXED + "ok\n")
    live = seat.locator("img.live")
    box = live.bounding_box()
    assert box is not None
    mark = recorder.mark()
    live.click(position={"x": box["width"] / 2, "y": box["height"] / 4})
    want = (1280 // 2, 800 // 4)  # the same spot in screen pixels, however big the picture is shown
    (button, x, y), = presses([recorder.wait_for(lambda e: e["type"] == "ButtonPress", since=mark,
                                                 what="the person's click")])
    assert button == 1 and abs(x - want[0]) <= 1 and abs(y - want[1]) <= 1, ((x, y), want)
    assert daemon.task(task_id)["state"] == "paused"  # the model did nothing meanwhile

    seat.get_by_role("button", name="Hand back", exact=True).click()
    assert daemon.wait_state(task_id, "succeeded")["final_message"] == "done"
    events = daemon.events(task_id)
    humans = [e["data"] for e in events if e["kind"] == "human_action"]
    me = {"uid": os.getuid(), "name": pwd.getpwuid(os.getuid()).pw_name}
    assert [h["action"]["type"] for h in humans] == ["type", "type", "type", "keypress", "click"]
    assert humans[0]["action"] == {"type": "type", "text": MIXED}
    assert "".join(h["action"]["text"] for h in humans[1:3]) == "ok"
    assert all(h["by"] == me for h in humans)
    kinds = [e["kind"] for e in events if e["kind"] in ("pause_requested", "paused", "resumed")]
    assert kinds == ["pause_requested", "paused", "resumed"]
    # The step that ended in the pause records the person's actions, with their author.
    step = next(e["data"] for e in events if e["kind"] == "step" and any("by" in a for a in e["data"]["actions"]))
    assert [a["action"] for a in step["actions"] if "by" in a] == [h["action"] for h in humans]
    page.wait_for_selector(f'#tasks tr[data-id="{task_id}"] .state.succeeded')
    _clean(watched, console)
    watched.close()


@needs_chromium
def test_every_seat_is_shown_and_the_console_stops_cleanly_under_an_open_page(start_daemon, xvfb: Any, tmp_path: Path,
                                                                             open_console, browser: Browser) -> None:
    (tmp_path / "small").mkdir()
    small = start_xvfb(tmp_path / "small", 1024, 768)  # another size: each card shows its own display
    try:
        daemon = start_daemon(MODEL_TYPES, approval="actions", seats={"big": xvfb.display, "small": small.display})
        task_id = daemon.call("submit", prompt="type m", seat="small")["id"]
        daemon.wait_approval(task_id)
        console = open_console(daemon)
        watched = _open(browser, console)
        page = watched.page
        page.wait_for_function("""() => document.querySelectorAll("article.seat").length === 2 &&
            [...document.querySelectorAll("article.seat")].every(c => Number(c.dataset.frames) > 0)""")
        sizes = {name: page.locator(f'article.seat[data-seat="{name}"] img.live')
                 .evaluate("i => [i.naturalWidth, i.naturalHeight]") for name in ("big", "small")}
        assert sizes == {"big": [1280, 800], "small": [1024, 768]}  # never [0, 0]: the next frame loads off-page
        page.wait_for_selector('article.seat[data-seat="small"][data-task-state="awaiting_approval"]')
        assert page.locator('article.seat[data-seat="big"] .task').inner_text() == "no task"
        # A live task's event stream is open when the console is stopped: it still exits at once, cleanly.
        page.locator(f'#tasks tr[data-id="{task_id}"]').click()
        page.wait_for_selector("#events li[data-kind='approval_requested']")
        _clean(watched, console)
        assert console.stop(signal.SIGTERM) == 0
        page.wait_for_selector("#status.bad")  # and the page says the console is gone
        assert "console unreachable" in page.locator("#status").inner_text()
        watched.close()
    finally:
        small.stop()


def test_a_judged_task_shows_its_verdict_and_checks_on_the_page(start_daemon, open_console, browser: Browser,
                                                                 tmp_path: Path) -> None:
    daemon = start_daemon(scenario({"message": "done"}))
    spec = tmp_path / "judged.toml"
    spec.write_text('prompt = "say done"\nreset = false\n'
                    '[[checks]]\nname = "said done"\nanswer = "done"\n'
                    '[[checks]]\nname = "said <nope>"\nanswer = "re:^nope$"\n')
    task_id = daemon.call("submit", **submit_fields(*load_spec(spec)))["id"]
    daemon.wait_state(task_id, "succeeded")
    console = open_console(daemon)
    watched = _open(browser, console)
    row = watched.page.locator(f'#tasks tr[data-id="{task_id}"]')
    row.locator(".verdict.failed").wait_for()
    assert row.locator(".verdict").inner_text() == "failed 0.50"
    row.click()
    watched.page.wait_for_selector("#task-verdict:not([hidden])")
    line = watched.page.locator("#task-verdict-line").inner_text()
    assert line.startswith("Verdict: failed, score 0.50: 1 of 2 checks passed"), line
    checks = watched.page.locator("#task-checks li").all_inner_texts()
    assert len(checks) == 2 and checks[0].startswith("✓ said done (answer)"), checks
    assert checks[1].startswith("✗ said <nope> (answer)"), checks  # model-free text, shown as text
    _clean(watched, console)
    watched.close()
