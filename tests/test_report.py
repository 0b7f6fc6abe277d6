"""cuctl report and follow on a real task: the real daemon, Xvfb, the scripted model and headless Chromium.

How the page is checked, and why this way: Debian's Chromium is driven by
Playwright (tests/support/browser.py; no browser download), which reports
every console message (CSP violations and failed loads included), uncaught
exception and request of the page itself, unlike ``--dump-dom`` or scraping
``--enable-logging`` output. Control pages prove the harness sees those when
they happen. The page is also checked without a browser: every loadable
attribute must be a ``data:`` image or an in-page anchor, and no tag may come
from model text.
"""

from __future__ import annotations

import fcntl
import html
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cud.cuctl.progress import Progress
from cud.record.html import render
from cud.record.reading import Record
from tests.support.browser import CHROMIUM, Browser
from tests.support.daemon import ROOT, Daemon, cuctl
from tests.support.recorder import Recorder, wait_until
from tests.support.records import FINAL, HOSTILE, PROMPT, RICH, TYPED, run_rich_task, whoami

needs_chromium = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM}")

PROBE = """(async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { i.loading = "eager"; });  // lazy images below the fold must load too
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return {
    images: imgs.length,
    data: imgs.filter(i => i.src.startsWith("data:image/")).length,
    decoded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    shown: imgs.filter(i => i.getBoundingClientRect().width > 100).length,
    steps: [...document.querySelectorAll("section.step")].map(s => s.id),
    stepImages: [...document.querySelectorAll("section.step")].map(s => s.querySelectorAll("img").length),
    index: [...document.querySelectorAll("nav.index a")].map(a => a.getAttribute("href")),
    marks: [...document.querySelectorAll("svg.overlay .mark")].map(m => m.getAttribute("class")),
    scripts: document.scripts.length,
    text: document.body.innerText,
  };
})()"""


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "span", "dl", "dt", "dd",
                "code", "nav", "ol", "ul", "li", "a", "main", "section", "div", "p", "figure", "img", "svg", "g",
                "circle", "path", "polyline", "polygon", "text", "figcaption", "b", "br", "details", "summary", "pre"}


def check_self_contained(page: str, *, text_has_urls: bool = False) -> _Tags:
    """Only known tags; nothing that loads from anywhere but data: images and in-page anchors."""
    parsed = _Tags()
    parsed.feed(page)
    assert {tag for tag, _ in parsed.tags} <= ALLOWED_TAGS
    for tag, attrs in parsed.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "srcset", "poster", "data", "action", "xlink:href", "background"):
                assert tag == "img" and name == "src" and (value or "").startswith("data:image/"), (tag, name)
            if name == "href":
                assert (value or "").startswith("#"), (tag, value)
    if not text_has_urls:  # a page whose data holds no URL has none anywhere
        assert "http:" not in page and "https:" not in page and "url(" not in page and "@import" not in page
    return parsed


def test_a_report_escapes_everything_it_is_given() -> None:
    bad = "<script>alert(1)</script><img src=http://example.invalid/x onerror=alert(2)>\"'&"
    task = {"id": 7, "state": "failed", "prompt": bad, "model": bad, "max_steps": 5, "approval": "safety", "steps": 1,
            "final_message": bad, "error": {"kind": bad, "message": bad, "details": {"x": bad}}, "reason": bad,
            "submitter": {"uid": 0, "name": bad}, "created_at": bad, "started_at": None, "finished_at": None}
    action = {"type": "type", "text": bad}
    events = [
        {"task_id": 7, "seq": 1, "at": bad, "kind": "approval_requested",
         "data": {"approval_id": 3, "kind": bad, "checks": [{"code": bad, "message": bad}], "actions": [action],
                  "screenshot": bad, "deadline_at": bad}},
        {"task_id": 7, "seq": 2, "at": bad, "kind": "approval_decided",
         "data": {"approval_id": 3, "outcome": bad, "by": {"uid": 0, "name": bad}, "reason": bad}},
        {"task_id": 7, "seq": 3, "at": bad, "kind": "step",
         "data": {"step": 1, "saw": bad, "screenshot": None, "messages": [bad], "total_ms": 1,
                  "actions": [{"action": action, "ms": 1}, {"action": {"type": "keypress", "keys": [bad]}, "ms": 1},
                              {"action": {"type": "click", "button": bad, "x": bad, "y": 1}, "ms": 1}]}},
        {"task_id": 7, "seq": 4, "at": bad, "kind": bad, "data": {bad: bad}},
    ]
    page = render(Record(task=task, events=events, files={}))
    parsed = check_self_contained(page, text_has_urls=True)
    assert sum(bad in chunk for chunk in parsed.text) >= 10  # shown, as text
    assert [tag for tag, _ in parsed.tags].count("img") == 0


def test_a_long_task_has_an_index_and_lazy_images() -> None:
    png = io.BytesIO()
    Image.new("RGB", (64, 40), "#3366CC").save(png, "PNG")
    steps = 300
    events = [
        {"task_id": 1, "seq": n, "at": f"2026-01-01T00:00:{n % 60:02d}.000Z", "kind": "step",
         "data": {"step": n, "saw": f"step-{n - 1:04d}.png" if n > 1 else None, "screenshot": f"step-{n:04d}.png",
                  "messages": [], "actions": [{"action": {"type": "click", "button": "left", "x": n % 64, "y": 5},
                                               "ms": 1.0}],
                  "total_ms": 3, "model_ms": 1, "driver_ms": 1, "approval_ms": 0, "overhead_ms": 1}}
        for n in range(1, steps + 1)
    ]
    task = {"id": 1, "state": "interrupted", "prompt": "p", "model": "m", "max_steps": 500, "approval": "safety",
            "steps": steps, "final_message": None, "error": None, "reason": "the daemon stopped",
            "submitter": {"uid": 0, "name": "root"}, "created_at": "2026-01-01T00:00:00.000Z",
            "started_at": "2026-01-01T00:00:00.000Z", "finished_at": "2026-01-01T00:05:00.000Z"}
    files = {f"step-{n:04d}.png": png.getvalue() for n in range(1, steps + 1)}
    parsed = check_self_contained(render(Record(task=task, events=events, files=files)))
    links = [a["href"] for tag, a in parsed.tags if tag == "a" and a.get("href", "").startswith("#step-")]
    ids = [a["id"] for tag, a in parsed.tags if tag == "section"]
    # Each step is in the index and has its anchor (its own heading links to it too).
    assert links[:steps] == [f"#step-{n}" for n in range(1, steps + 1)]
    assert ids == [f"step-{n}" for n in range(1, steps + 1)] + ["after"]  # the unseen last screen comes last
    images = [a for tag, a in parsed.tags if tag == "img"]
    assert len(images) == steps  # steps 2..300 show what they saw, plus the screen after step 300
    assert all(a["loading"] == "lazy" and (a["width"], a["height"]) == ("64", "40") for a in images)


@needs_chromium
def test_the_step_index_cuts_a_long_message_after_a_whole_word() -> None:
    said = 'Done: I typed "Hello from cud — ✓ ü €" into the demo app and pressed Enter.'
    task = {"id": 1, "state": "succeeded", "prompt": "p", "model": "m", "max_steps": 5, "approval": "safety",
            "steps": 1, "final_message": said, "error": None, "reason": None, "submitter": {"uid": 0, "name": "root"},
            "created_at": "2026-01-01T00:00:00.000Z", "started_at": None, "finished_at": None}
    events = [{"task_id": 1, "seq": 1, "at": "2026-01-01T00:00:01.000Z", "kind": "step",
               "data": {"step": 1, "saw": None, "screenshot": None, "messages": [said], "actions": [], "total_ms": 1}}]
    page = render(Record(task=task, events=events, files={}))
    check_self_contained(page)
    entries = re.findall(r'<nav class="index".*?<li value="1"><a href="#step-1">(.*?)</a>', page)
    assert [html.unescape(e) for e in entries] == ['said: Done: I typed "Hello from cud — ✓ ü €" into the demo app…']


def test_the_page_check_sees_errors_and_requests_when_there_are_some(tmp_path: Path) -> None:
    # The control: without it, "no console errors, no requests" could be a harness that sees nothing.
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><html><head><meta charset="utf-8"><title>bad</title></head><body>'
                    '<img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script></body></html>')
    # And what a Content-Security-Policy refuses (the console's own and the report's rely on it).
    strict = tmp_path / "csp.html"
    strict.write_text('<!doctype html><html><head><meta charset="utf-8"><title>csp</title>'
                      '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'"></head><body>'
                      '<img src="http://127.0.0.1:9/y.png"><script>document.title = "ran"</script></body></html>')
    browser = Browser(tmp_path)
    try:
        seen = browser.inspect(page.as_uri(), "document.images.length")
        refused = browser.inspect(strict.as_uri(), "document.title")
    finally:
        browser.close()
    assert seen.value == 1
    assert "http://127.0.0.1:9/x.png" in seen.requests
    assert seen.foreign("file://") == ["http://127.0.0.1:9/x.png"]
    assert any("boom" in p for p in seen.problems())
    assert refused.value == "csp"  # the inline script did not run
    problems = refused.problems()
    assert any("violates the following Content Security Policy" in p and "y.png" in p for p in problems), problems
    assert any("inline script" in p for p in problems), problems


@needs_chromium
def test_the_report_of_a_real_task_renders_in_chromium(start_daemon, recorder: Recorder, tmp_path: Path) -> None:
    daemon: Daemon = start_daemon(RICH)
    task = run_rich_task(daemon)
    assert task["state"] == "succeeded", task
    recorder.wait_text(TYPED + "\n")
    out = tmp_path / "report.html"
    made = cuctl(daemon.socket, "report", str(task["id"]), "-o", str(out))
    assert made.returncode == 0, made.stderr
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)
    page = out.read_text(encoding="utf-8")
    shots = sorted(p.name for p in (daemon.state_dir / "trajectories" / str(task["id"])).iterdir())
    assert len(shots) == 4

    parsed = check_self_contained(page)
    images = [attrs for tag, attrs in parsed.tags if tag == "img"]
    assert len(images) == len(shots)
    assert all(a.get("loading") == "lazy" and a.get("width") == "1280" and a.get("height") == "800" for a in images)

    browser = Browser(tmp_path)
    try:
        seen = browser.inspect(out.as_uri(), PROBE, screenshot_height=2600)
    finally:
        browser.close()
    assert seen.problems() == []
    assert [u for u in seen.requests if not u.startswith("data:")] == [out.as_uri()]
    assert seen.foreign("file://") == []
    value: dict[str, Any] = seen.value
    # Every step's screenshot is there, decoded and on screen; step 1 came before any screenshot.
    assert value["images"] == value["data"] == value["decoded"] == value["shown"] == len(shots)
    assert value["steps"] == [f"step-{n}" for n in range(1, 6)]
    assert value["stepImages"] == [0, 1, 1, 1, 1]
    assert value["index"] == [f"#step-{n}" for n in range(1, 6)]
    assert value["marks"] == ["mark click", "mark scroll", "mark drag", "mark click", "mark click"]
    assert value["scripts"] == 0
    text = value["text"]
    # Model text is shown as text, tags and all; the approver and the timings are there.
    for needle in (PROMPT, HOSTILE, TYPED, FINAL.replace("\n", " "), "keys ENTER", "About to type <into>",
                   f"approved by {whoami()}", "drag (100, 600) → (500, 600)", "gpt-5.4", "succeeded"):
        assert needle in text, needle
    # Each pointer action names what it touched: here the recording window (no accessibility bus).
    for verb, at in (("click", "(200, 150)"), ("scroll (0, 3)", "(640, 400)"), ("double-click", "(900, 300)"),
                     ("click right", "(1000, 500)")):
        assert re.search(re.escape(verb) + r' the window "[^"]+" \([^)]+\) at ' + re.escape(at), text), (verb, at)
    assert "ms in all: model" in text

    image = Image.open(io.BytesIO(seen.screenshot)).convert("RGB")
    assert image.size == (1280, 2600)
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50  # text, badges, screenshots: not a blank page
    # The overlay's red marks are drawn on the page, not just present in the DOM.
    assert any(abs(r - 0xE0) < 12 and abs(g - 0x24) < 12 and abs(b - 0x5E) < 12 for _, (r, g, b) in colours)


def test_report_of_an_unknown_task_fails_cleanly(start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon({"name": "t", "steps": [{"message": "hi"}]})
    result = cuctl(daemon.socket, "report", "99", "-o", str(tmp_path / "x.html"))
    assert result.returncode == 2 and "no task with id 99" in result.stderr
    assert not (tmp_path / "x.html").exists()


def _read_until(fd: int, needle: bytes, seen: bytearray, proc: subprocess.Popen[bytes], timeout: float) -> None:
    def found() -> bool:
        while select.select([fd], [], [], 0)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return needle in seen
            if not chunk:
                break
            seen.extend(chunk)
        if needle not in seen and proc.poll() is not None:
            raise AssertionError(f"cuctl follow exited {proc.returncode} before {needle!r}; output: {bytes(seen)!r}")
        return needle in seen

    wait_until(found, timeout, f"{needle!r} on the terminal")


def test_follow_on_a_terminal_shows_a_live_status_and_the_approve_hint(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(RICH)
    task_id = daemon.call("submit", prompt=PROMPT)["id"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cud.cuctl.main", "--socket", str(daemon.socket), "follow", str(task_id)],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        approval = daemon.wait_approval(task_id)
        _read_until(master, f"cuctl approve {approval['id']}".encode(), seen, proc, 30)
        _read_until(master, f"waiting for approval {approval['id']}".encode(), seen, proc, 30)
        assert cuctl(daemon.socket, "approve", str(approval["id"])).returncode == 0
        _read_until(master, f"task {task_id} succeeded after 5 steps".encode(), seen, proc, 60)
        assert proc.wait(timeout=30) == 0
        _read_until(master, b"", seen, proc, 1)  # whatever is left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    screen = seen.decode("utf-8", errors="replace")
    assert "\r\x1b[K" in screen  # the status line is redrawn in place
    assert f"task {task_id} · seat default · step " in screen and "/50 · " in screen  # the seat, the step counter
    assert "awaiting_approval" in screen and "\x1b[1;33mapproval" in screen  # the notice stands out
    # The click names what it touched: the recording window (no accessibility bus here).
    assert re.search(r'step 2: click the window "[^"]+" \([^)]+\) at \(200, 150\)', screen), screen
    assert f"approval {approval['id']} approved by {whoami()}" in screen
    # Every status line (drawn without a newline) fits the 120 columns, so redrawing it never scrolls.
    statuses = [d for d in screen.split("\r\x1b[K") if d and not d.endswith("\n")]
    assert len(statuses) >= 5 and all(len(d) < 120 for d in statuses), statuses


def test_follow_without_a_terminal_prints_plain_lines(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(RICH)
    task = run_rich_task(daemon)
    result = cuctl(daemon.socket, "follow", str(task["id"]))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    lines = result.stdout.splitlines()
    assert len(lines) == len(daemon.events(task["id"]))  # one line per event
    assert any("waiting for approval" in line and "cuctl approve" in line for line in lines)
    assert lines[-1].endswith(f"ended succeeded: {FINAL}")


def test_follow_never_hands_control_characters_from_the_model_to_the_terminal() -> None:
    out = io.StringIO()
    task = {"id": 4, "state": "running", "prompt": "p\x1b[31m", "steps": 2, "max_steps": 9,
            "created_at": "2026-01-01T00:00:00.000Z", "started_at": "2026-01-01T00:00:01.000Z"}
    progress = Progress(out, task)
    progress.colour = True
    evil = "ok\x1b]0;owned\x07\x1b[2J\r\nnext\x9b"
    for kind, data in (
        ("action", {"step": 3, "action": {"type": "type", "text": evil}, "ms": 1}),
        ("approval_requested", {"approval_id": 2, "kind": "safety", "checks": [{"code": "c", "message": evil}],
                                "actions": []}),
        ("end", {"state": "succeeded", "final_message": evil, "error": None, "reason": None}),
    ):
        progress._on_event({"task_id": 4, "seq": 1, "at": "2026-01-01T00:00:02.000Z", "kind": kind, "data": data})
        progress._redraw()
    shown = out.getvalue()
    assert "owned" in shown and "next" in shown  # the text is there...
    assert "\x07" not in shown and "\x1b]" not in shown and "\x1b[2J" not in shown and "\x9b" not in shown
    # ...and the only escapes are our own: erase-line, the notice's colour and its reset.
    assert set(re.findall("\x1b\\[[0-9;]*[A-Za-z]", shown)) == {"\x1b[K", "\x1b[1;33m", "\x1b[0m"}


def test_the_report_shows_a_pending_and_then_a_denied_approval(start_daemon, recorder: Recorder,
                                                               tmp_path: Path) -> None:
    daemon = start_daemon({"name": "deny", "steps": [
        {"actions": [{"type": "screenshot"}]},
        {"message": "Typing now.", "safety_checks": [{"code": "risky", "message": "This may send mail."}],
         "actions": [{"type": "type", "text": "never typed"}]},
        {"message": "never"},
    ]})
    task_id = daemon.call("submit", prompt="send it")["id"]
    approval = daemon.wait_approval(task_id)
    pending = tmp_path / "pending.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(pending)).returncode == 0
    text = " ".join(check_self_contained(pending.read_text()).text)
    assert "awaiting_approval" in text and "pending" in text and f"cuctl approve {approval['id']}" in text
    assert "This may send mail." in text and "did not finish" in text

    assert cuctl(daemon.socket, "deny", str(approval["id"]), "--reason", "not <today>").returncode == 0
    daemon.wait_state(task_id, "failed")
    ended = tmp_path / "ended.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(ended)).returncode == 0
    parsed = check_self_contained(ended.read_text())
    text = " ".join(parsed.text)
    assert f"denied by {whoami()}" in text and "not <today>" in text and "no action ran" in text
    assert f"approval: approval {approval['id']} was denied by {whoami()}" in text  # the task's error, by kind
    assert "never typed" in text  # the action that was asked for, though it never ran
    assert len([t for t, _ in parsed.tags if t == "img"]) == 1  # the one screenshot, seen by step 2


def test_the_top_badge_of_a_judged_task_is_its_verdict_not_its_state() -> None:
    task = {"id": 8, "state": "succeeded", "prompt": "p", "model": "m", "max_steps": 5, "approval": "never", "steps": 0,
            "submitter": {"uid": 0, "name": "root"}, "created_at": None, "started_at": None, "finished_at": None,
            "verdict": {"verdict": "failed", "score": 0.0, "passed": 0, "failed": 1, "state": "succeeded"}}
    page = render(Record(task=task, events=[], files={}))
    header = page.split("<h1>", 1)[1].split("</h1>", 1)[0]
    assert header == 'Task 8 <span class="state failed">failed</span>' and "<title>cud task 8 — failed</title>" in page
    assert "<dt>State</dt><dd>succeeded</dd>" in page
    unjudged = render(Record(task={**task, "verdict": None}, events=[], files={})).split("</h1>", 1)[0]
    assert '<span class="state succeeded">succeeded</span>' in unjudged, unjudged
