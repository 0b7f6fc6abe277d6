"""Every setup kind and every check kind of a spec, each check passing and failing, on a real seat.

One task runs every setup kind (files, run, launch with wait_for an accessibility element,
open with wait_for a window, clipboard, sleep) and then a check of each kind that must pass
and one that must fail, named so: the verdict's per-check results are compared with the names.
The GTK demo app (sandbox/demo_app.py), a zenity slider and mousepad, opened by xdg-open, are the applications;
the scripted model only answers. A second task's wait_for runs out: setup_failed, naming what
is on the screen instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from cud.daemon.spec.checks import windows_there
from tests.support.apps.reporting import SYSTEM_PYTHON
from tests.support.daemon import ROOT, scenario
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

ANSWER = scenario({"message": "The answer is 42."}, look_first=False)
EXPECTED = "expected content ✓\n"
MIMEAPPS = "[Default Applications]\ntext/plain=org.xfce.mousepad.desktop\n"
SETUP = f"""
prompt = "What is the answer?"
seat = "s1"
[[setup]]
files = [{{ src = "fixtures/expected.txt", dest = "Documents/expected.txt", mode = 0o640 }},
         {{ src = "fixtures/notes2.txt", dest = "notes2.txt" }}]
[[setup]]
run = ["/bin/sh", "-c", "printf 'from run\\\\n' > made-by-run.txt"]
timeout = 20
[[setup]]
launch = ["{SYSTEM_PYTHON}", "{ROOT / 'sandbox' / 'demo_app.py'}"]
wait_for = {{ app = "cud-demo", role = "text", name = "Line to send", timeout = 60 }}
[[setup]]
launch = ["/usr/bin/zenity", "--scale", "--text=Volume", "--value=30", "--min-value=0", "--max-value=100"]
wait_for = {{ app = "zenity", role = "slider", timeout = 60 }}
[[setup]]
open = "notes2.txt"
wait_for = {{ window_class = "Mousepad", window_title = "re:notes2", timeout = 60 }}
[[setup]]
clipboard = "clipboard text ✓"
[[setup]]
sleep = 0.1
"""
CHECKS = f"""
[[checks]]
name = "pass: command output"
command = ["/bin/cat", "made-by-run.txt"]
output = {{ include = ["from run"], exclude = ["error"], matches = "from run\\n" }}
[[checks]]
name = "pass: command sees the clipboard"
command = ["/usr/bin/xclip", "-o", "-selection", "clipboard"]
output = {{ matches = "clipboard text ✓" }}
[[checks]]
name = "pass: command sees the file's mode"
command = ["/usr/bin/stat", "-c", "%a", "Documents/expected.txt"]
output = {{ matches = "640\\n" }}
[[checks]]
name = "fail: command exit status"
command = ["/bin/sh", "-c", "exit 3"]
[[checks]]
name = "fail: command output excluded"
command = ["/bin/echo", "an error"]
output = {{ exclude = ["error"] }}
[[checks]]
name = "pass: file equals its fixture"
file = "Documents/expected.txt"
equals = "fixtures/expected.txt"
sha256 = "{hashlib.sha256(EXPECTED.encode()).hexdigest()}"
[[checks]]
name = "pass: file absent"
file = "nothing-here.txt"
exists = false
[[checks]]
name = "fail: file sha256"
file = "made-by-run.txt"
sha256 = "{'0' * 64}"
[[checks]]
name = "fail: file absent"
file = "made-by-run.txt"
exists = false
[[checks]]
name = "fail: file missing"
file = "nothing-here.txt"
[[checks]]
name = "pass: element"
element = {{ app = "cud-demo", role = "text", name = "Line to send" }}
text = ""
states = ["editable", "showing", "!checked"]
[[checks]]
name = "fail: element text"
element = {{ app = "cud-demo", role = "text", name = "Line to send" }}
text = "re:never"
[[checks]]
name = "pass: element value"
element = {{ app = "zenity", role = "slider" }}
value = 30
[[checks]]
name = "fail: element value"
element = {{ app = "zenity", role = "slider" }}
value = 31
[[checks]]
name = "pass: element absent"
element = {{ role = "push button", name = "Launch missiles" }}
exists = false
[[checks]]
name = "fail: element missing"
element = {{ app = "cud-demo", role = "push button", name = "Launch missiles" }}
[[checks]]
name = "pass: window"
window = {{ class = "re:(?i)^cud-demo$", title = "cud demo" }}
[[checks]]
name = "pass: the window open opened"
window = {{ class = "Mousepad", title = "re:notes2\\\\.txt" }}
[[checks]]
name = "fail: window missing"
window = {{ class = "NoSuchApp" }}
[[checks]]
name = "fail: window present"
window = {{ title = "cud demo" }}
exists = false
[[checks]]
name = "pass: answer"
answer = "re:\\\\b42\\\\b"
[[checks]]
name = "fail: answer"
answer = "The answer is 41."
"""


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    # Which editor xdg-open picks for a .txt is the seat's choice, not the machine's: with LibreOffice
    # installed (the OSWorld profile) it would win, so the seat's template names mousepad.
    with spec_seat(seat_users, ANSWER, template_files={".config/mimeapps.list": MIMEAPPS}) as s:
        yield s


def test_every_setup_kind_runs_and_every_check_kind_passes_and_fails(seat: SpecSeat) -> None:
    spec = seat.write("kinds.toml", SETUP + CHECKS, {"fixtures/expected.txt": EXPECTED,
                                                     "fixtures/notes2.txt": "the second notes\n"})
    code, task = seat.submit(spec)
    assert task["state"] == "succeeded" and code == 1, (task["error"], task["reason"])
    results = task["verdict"]["checks"]
    wrong = [(r["name"], r["why"], r["observed"]) for r in results if r["passed"] != r["name"].startswith("pass:")]
    assert wrong == []
    assert {r["kind"] for r in results} == {"command", "file", "element", "window", "answer"}
    passed = sum(r["passed"] for r in results)
    assert task["verdict"]["score"] == round(passed / len(results), 6) and 0 < passed < len(results)
    setups = [e["data"] for e in seat.events(task["id"]) if e["kind"] == "setup"]
    assert [(s["kind"], s["ok"]) for s in setups] == [(k, True) for k in ("files", "run", "launch", "launch",
                                                                          "open", "clipboard", "sleep")]
    why = {r["name"]: r["why"] for r in results}
    assert why["fail: command exit status"] == "it exited with status 3, not 0"
    assert why["fail: command output excluded"] == "its output has 'error'"
    assert why["fail: file sha256"].startswith("its sha256 is ")
    assert why["fail: file missing"] == "there is no nothing-here.txt"
    assert why["fail: element text"] == ("text 'Line to send' in cud-demo: its text does not match /never/: it is "
                                         "''")
    assert why["fail: element missing"] == "no such element is showing"
    assert why["fail: element value"] == "slider in zenity: its value is 30"
    # a passing element check says what it compared, and names the element as a failing one does
    assert why["pass: element"] == "text 'Line to send' in cud-demo: its text is '', it is editable, showing, not checked"
    assert why["pass: element value"] == "slider in zenity: its value is 30"
    assert why["fail: window missing"].startswith("no such window is there; there are "), why["fail: window missing"]
    assert why["fail: answer"] == "the final message is not 'The answer is 41.': it is 'The answer is 42.'"


def test_a_wait_that_runs_out_fails_the_setup_naming_what_is_there(seat: SpecSeat) -> None:
    asked = len(seat.model.requests)
    spec = seat.write("never.toml", """
prompt = "Never asked."
[[setup]]
launch = ["/bin/sleep", "30"]
wait_for = { window_class = "NeverThere", timeout = 1 }
[[checks]]
answer = "re:."
""")
    code, task = seat.submit(spec)
    assert code == 1 and task["state"] == "failed" and task["error"]["kind"] == "setup_failed"
    assert task["error"]["message"] == ("setup step 1 (setup[0].launch: launch /bin/sleep 30) failed: no window with "
                                        "window_class is 'NeverThere' appeared within 1 s (windows now: none)")
    # It only looked at the display, so everyone who may read the task reads why (AccessRights.task_for).
    assert task["error"]["details"]["part"] == "wait_for"
    assert len(seat.model.requests) == asked


def test_a_failed_window_checks_why_names_the_windows_that_are_there_a_few_cut() -> None:
    there = [{"class": "xterm", "title": "bash"}, {"class": "Mousepad", "title": "Untitled 1 - " + "x" * 80}]
    assert windows_there(there, 2) == ("no such window is there; there are xterm 'bash', "
                                       f"Mousepad 'Untitled 1 - {'x' * 27}…'")
    many = [{"class": f"app{i}", "title": f"w{i}"} for i in range(10)]
    assert windows_there(many, 12) == ("no such window is there; there are app0 'w0', app1 'w1', app2 'w2', app3 'w3', "
                                       "app4 'w4' and 7 more")
    assert windows_there([], 0) == "no such window is there; no window is there at all"
