"""Task specs end to end on a real seat: mousepad edits a file for the scripted model, and the checks judge it.

One seat (openbox on Xvfb, shared buses, a seat user with a home and its template) and one
daemon for the module; its scripted model plays the same edit for every task: go to the end
of the file, type a line ``done``, save, and say so. Three specs around it: one whose checks
pass, one that fails by design with a partial score, one whose setup fails before the model is
asked anything.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.daemon.server.access import WITHHELD, WITHHELD_ARTIFACT, WITHHELD_SETUP
from cud.daemon.session.user import SeatUser
from cud.spec.setup import failure_message
from tests.support.daemon import cuctl, json_out, scenario
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

EDIT = scenario(
    {"actions": [{"type": "keypress", "keys": ["CTRL", "END"]}]},
    {"actions": [{"type": "type", "text": "done\n"}]},
    {"actions": [{"type": "keypress", "keys": ["CTRL", "S"]}]},
    {"message": "I added the line 'done' at the end of notes.txt and saved it."},
)
SETUP = """
[[setup]]
files = [{ src = "fixtures/notes.txt", dest = "Desktop/notes.txt" }]
[[setup]]
launch = ["/usr/bin/mousepad", "Desktop/notes.txt"]
wait_for = { window_class = "Mousepad", timeout = 60 }
[[setup]]
run = ["/bin/sh", "-c", "chmod 600 Desktop/notes.txt"]
"""
PROMPT = 'prompt = "Open notes.txt on the Desktop in the editor, add a line \'done\' at the end and save."\n'
NOTIFY = """
[[notify]]
events = ["task_finished"]
command = ["/bin/sh", "-c", "cat >> \\"$0\\"; echo >> \\"$0\\"", "{out}"]
"""


@pytest.fixture(scope="module")
def operator(seat_users: SeatUsers) -> SeatUser:
    """A user with the operate right and no other (as root; else the tests' own user, who has every right)."""
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, operator: SeatUser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpecSeat]:
    hooks = tmp_path_factory.mktemp("hooks") / "events.jsonl"
    # nobody may submit, not operate; the operator may operate, not submit.
    access = f'[access]\nsubmit_users = ["nobody"]\noperate_users = ["{operator.name}"]\n'
    with spec_seat(seat_users, EDIT, config=access + NOTIFY.format(out=hooks),
                   template_files={"Desktop/.keep": ""}) as s:
        s.hooks = hooks  # type: ignore[attr-defined]
        yield s


def test_a_spec_whose_checks_pass_is_judged_and_shown_everywhere(seat: SpecSeat, tmp_path: Path) -> None:
    spec = seat.write("edit.toml", PROMPT + 'seat = "s1"\nmax_steps = 10\ntags = ["editor", "smoke"]\n' + SETUP + """
[[checks]]
name = "line added"
file = "Desktop/notes.txt"
matches = "re:(?m)^done$"
[[checks]]
name = "saved, editor still open"
window = { class = "Mousepad", title = "re:notes\\\\.txt" }
[[checks]]
command = ["/usr/bin/grep", "-c", "done", "Desktop/notes.txt"]
output = { include = ["1"] }
[[checks]]
name = "the editor shows it"
element = { app = "mousepad", role = "text" }
text = "re:(?m)^done$"
states = ["editable", "!checked"]
[[checks]]
answer = "re:(?i)saved"

[collect]
files = ["Desktop/notes.txt"]
""", {"fixtures/notes.txt": "first line\n"})
    code, task = seat.submit(spec)
    verdict = task["verdict"]
    assert task["state"] == "succeeded", task
    assert verdict["verdict"] == "passed" and verdict["score"] == 1.0, json.dumps(verdict, indent=1)
    assert code == 0
    assert [c["name"] for c in verdict["checks"]] == ["line added", "saved, editor still open",
                                                      "command /usr/bin/grep -c done Desktop/notes.txt",
                                                      "the editor shows it", "answer"]
    assert verdict["checks"][0]["observed"]["text"] == "first line\ndone\n"
    assert verdict["checks"][1]["observed"][0]["class"] == "Mousepad"
    assert task["spec"]["tags"] == ["editor", "smoke"] and task["spec"]["reset"] is True
    assert task["artifacts"][0]["path"] == "Desktop/notes.txt" and task["artifacts"][0]["bytes"] == 16
    kinds = [e["kind"] for e in seat.events(task["id"])]
    assert kinds[:6] == ["queued", "running", "reset", "setup", "setup", "setup"]
    assert kinds.count("check") == 5 and kinds[-2:] == ["collected", "end"]
    # show, follow, report, export, the hook and the metrics all say it.
    shown = cuctl(seat.daemon.socket, "show", str(task["id"]))
    assert "verdict:       passed, score 1.00: 5 of 5 checks passed" in shown.stdout, shown.stdout
    assert "✓ line added (file): Desktop/notes.txt is as expected (16 bytes)" in shown.stdout
    followed = cuctl(seat.daemon.socket, "follow", str(task["id"]))
    assert "setup 2 (launch /usr/bin/mousepad Desktop/notes.txt): done" in followed.stdout, followed.stdout
    assert "check 4: ✓ the editor shows it (element)" in followed.stdout
    assert "; verdict passed (score 1.00)" in followed.stdout and followed.returncode == 0
    report = tmp_path / "r.html"
    assert cuctl(seat.daemon.socket, "report", str(task["id"]), "-o", str(report)).returncode == 0
    page = report.read_text()
    assert 'id="verdict"' in page and "saved, editor still open" in page and "first line\ndone\n" in page
    exported = tmp_path / "export"
    assert cuctl(seat.daemon.socket, "export", str(task["id"]), "-o", str(exported)).returncode == 0
    assert json.loads((exported / "verdict.json").read_text())["verdict"] == verdict
    assert (exported / "artifacts" / "Desktop" / "notes.txt").read_text() == "first line\ndone\n"
    assert "artifacts/Desktop/notes.txt" in [f["name"] for f in json.loads((exported / "manifest.json").read_text())
                                             ["files"]]
    copied = tmp_path / "notes-copy.txt"
    out = cuctl(seat.daemon.socket, "cp", f"task/{task['id']}:Desktop/notes.txt", str(copied))
    assert out.returncode == 0 and copied.read_text() == "first line\ndone\n", out
    missing = cuctl(seat.daemon.socket, "cp", f"task/{task['id']}:Desktop/other.txt", str(tmp_path / "x"))
    assert missing.returncode == 2 and "kept no file 'Desktop/other.txt' (it collected: 'Desktop/notes.txt')" in \
        missing.stderr, missing
    into = cuctl(seat.daemon.socket, "cp", str(copied), f"task/{task['id']}:Desktop/notes.txt")
    assert into.returncode == 2 and "copy them out of it, not into it" in into.stderr, into
    hooks = [json.loads(line) for line in seat.hooks.read_text().splitlines() if line.strip()]  # type: ignore[attr-defined]
    finished = next(h for h in hooks if h["task"]["id"] == task["id"])
    assert finished["task"]["verdict"] == {"verdict": "passed", "score": 1.0, "passed": 5, "failed": 0,
                                           "errors": 0,
                                           "failed_checks": []}
    metrics = cuctl(seat.daemon.socket, "metrics").stdout
    assert 'cud_tasks_judged_total{verdict="passed"} 1.0' in metrics
    assert 'cud_spec_checks_total{kind="element",result="passed"} 1.0' in metrics


def test_a_spec_that_fails_by_design_gets_a_partial_score(seat: SpecSeat) -> None:
    spec = seat.write("partial.toml", PROMPT + SETUP + """
[[checks]]
name = "line added"
weight = 3
file = "Desktop/notes.txt"
matches = "re:(?m)^done$"
[[checks]]
name = "a second line that nobody asked for"
file = "Desktop/notes.txt"
matches = "re:(?m)^done twice$"
""", {"fixtures/notes.txt": "first line\n"})
    code, task = seat.submit(spec)
    verdict = task["verdict"]
    assert task["state"] == "succeeded" and code == 1  # the model did its part; the spec says failed
    assert (verdict["verdict"], verdict["score"], verdict["passed"], verdict["failed"]) == ("failed", 0.75, 1, 1)
    failed = verdict["checks"][1]
    assert not failed["passed"] and failed["expected"] == "Desktop/notes.txt exists, content matches /(?m)^done twice$/"
    assert failed["why"] == "its content does not match /(?m)^done twice$/: it is 'first line\\ndone\\n'"
    hooks = [json.loads(line) for line in seat.hooks.read_text().splitlines() if line.strip()]  # type: ignore[attr-defined]
    finished = next(h for h in hooks if h["task"]["id"] == task["id"])
    assert finished["task"]["verdict"]["failed_checks"][0]["name"] == "a second line that nobody asked for"


def test_a_failed_setup_step_fails_the_task_before_the_model_is_asked(seat: SpecSeat) -> None:
    asked = len(seat.model.requests)
    spec = seat.write("broken.toml", PROMPT + """
[[setup]]
files = [{ src = "fixtures/notes.txt", dest = "Desktop/notes.txt" }]
[[setup]]
run = ["/bin/sh", "-c", "echo no such printer >&2; exit 4"]
[[setup]]
launch = ["/usr/bin/mousepad", "Desktop/notes.txt"]
[[checks]]
file = "Desktop/notes.txt"
""", {"fixtures/notes.txt": "first line\n"})
    code, task = seat.submit(spec)
    assert code == 1 and task["state"] == "failed" and task["verdict"] is None
    error = task["error"]
    assert error["kind"] == "setup_failed" and error["details"]["key"] == "setup[1].run"
    assert error["message"] == ("setup step 2 (setup[1].run: run /bin/sh -c echo no such printer >&2; exit 4) "
                                "failed: it exited with status 4, not 0; output: no such printer")
    assert len(seat.model.requests) == asked  # no model request was made
    setups = [e["data"] for e in seat.events(task["id"]) if e["kind"] == "setup"]
    assert [(s["index"], s["ok"]) for s in setups] == [(0, True), (1, False)]  # the third never ran
    assert not any(e["kind"] in ("check", "step") for e in seat.events(task["id"]))


def test_a_task_that_hits_a_limit_is_still_judged_on_what_it_left(seat: SpecSeat) -> None:
    # max_steps = 4: the SDK runs the first three turns' actions (look, go to the end, type the line) and
    # stops at the fourth (the save) without running it.
    spec = seat.write("limited.toml", PROMPT + "max_steps = 4\n" + SETUP + """
[[checks]]
name = "the file is still there"
file = "Desktop/notes.txt"
[[checks]]
name = "line saved"
file = "Desktop/notes.txt"
matches = "re:(?m)^done$"
[[checks]]
name = "the editor shows the unsaved line"
element = { app = "mousepad", role = "text" }
text = "re:(?m)^done$"
[[checks]]
answer = "re:(?i)saved"
""", {"fixtures/notes.txt": "first line\n"})
    code, task = seat.submit(spec)
    verdict = task["verdict"]
    assert code == 1 and task["state"] == "failed" and verdict["state"] == "failed", task["error"]
    assert [c["passed"] for c in verdict["checks"]] == [True, False, True, False], [c["why"] for c in verdict["checks"]]
    assert verdict["checks"][3]["why"] == "the model gave no final message"
    assert verdict["score"] == 0.5


def as_user(uid: int, gid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


@pytest.mark.skipif(os.geteuid() != 0, reason="other users' requests need root to be made (setpriv)")
def test_a_collected_file_is_read_only_by_whoever_may_read_the_seats_files(seat: SpecSeat, operator: SeatUser) -> None:
    """root's spec collects a secret from the home: a user with only the submit right is refused it (by ``cp`` and
    in the record, which says it withheld it), as they are refused the seat's own file; the operator reads it."""
    spec = seat.write("secret.toml", 'prompt = "Look."\nseat = "s1"\nreset = false\nmax_steps = 1\n[[setup]]\n'
                                     'files = [{ src = "fixtures/secret.txt", dest = "secret.txt", mode = 0o600 }]\n'
                                     '[[checks]]\nfile = "secret.txt"\nmatches = "re:^root"\n[[checks]]\n'
                                     'answer = "re:."\n[collect]\nfiles = ["secret.txt"]\n',
                       {"fixtures/secret.txt": "root's secret\n"})
    _code, task = seat.submit(spec)
    assert [a["error"] for a in task["artifacts"]] == [None], task["artifacts"]
    sock, source = seat.daemon.socket, f"task/{task['id']}:secret.txt"
    os.chmod(seat.daemon.dir, 0o711)  # the socket's mode is the first fence; the rights are the second, tested here
    os.chmod(sock, 0o666)
    nobody = pwd.getpwnam("nobody")
    as_nobody = as_user(nobody.pw_uid, nobody.pw_gid)
    from_seat = cuctl(sock, "cp", "s1:secret.txt", "-", prefix=as_nobody)
    assert from_seat.returncode != 0 and "operate_users/operate_groups" in from_seat.stderr, from_seat
    refused = cuctl(sock, "cp", source, "-", prefix=as_nobody)
    assert refused.returncode != 0 and "secret" not in refused.stdout, refused
    assert (f"user 'nobody' (uid {nobody.pw_uid}) may not read the files task {task['id']} collected from a seat's "
            "home") in refused.stderr, refused.stderr
    # What the file check saw is the file too: show, follow and the record keep whether it passed, not what it saw.
    shown = json_out(cuctl(sock, "show", str(task["id"]), "--json", prefix=as_nobody))
    assert [c["passed"] for c in shown["verdict"]["checks"]] == [c["passed"] for c in task["verdict"]["checks"]]
    assert shown["verdict"]["checks"][0]["observed"] is None and shown["verdict"]["checks"][0]["why"] == WITHHELD
    assert shown["verdict"]["checks"][1] == task["verdict"]["checks"][1]  # an answer check only looks
    followed = cuctl(sock, "follow", str(task["id"]), prefix=as_nobody)
    assert "root's secret" not in followed.stdout and WITHHELD in followed.stdout, followed.stdout
    assert "root's secret" in json.dumps(task["verdict"])  # root sees it, and so does the operator
    as_operator = as_user(operator.uid, operator.gid)
    assert json_out(cuctl(sock, "show", str(task["id"]), "--json", prefix=as_operator))["verdict"] == task["verdict"]
    # The record streams the rest, and says what it withheld.
    place = Path(tempfile.mkdtemp(prefix="cud-export-", dir="/tmp"))
    try:
        place.chmod(0o777)
        exported = cuctl(sock, "export", str(task["id"]), "-o", str(place / "e"), prefix=as_nobody)
        assert exported.returncode == 0, exported.stderr
        assert "1 collected file withheld (reading them needs the operate right)" in exported.stdout, exported.stdout
        assert not (place / "e" / "artifacts").exists()
        assert b"root's secret" not in b"".join(p.read_bytes() for p in (place / "e").rglob("*") if p.is_file())
    finally:
        shutil.rmtree(place)
    # Whoever may read the seat's files reads it: the operator (no submit right) and root.
    for prefix in (as_user(operator.uid, operator.gid), None):
        read = cuctl(sock, "cp", source, "-", prefix=prefix)
        assert read.returncode == 0 and read.stdout == "root's secret\n", read


@pytest.mark.skipif(os.geteuid() != 0, reason="other users' requests need root to be made (setpriv)")
def test_what_a_failed_setup_step_met_in_the_seats_session_is_read_only_by_whoever_may_read_its_files(
        seat: SpecSeat) -> None:
    """root's setup ``run`` fails printing a file of the seat's home, and root's ``collect`` meets a link the seat's
    user made: a user with only the submit right sees that the step failed, which one and how, and which file
    was not kept, in show, list, follow and the record, but not what the session said; root sees it all."""
    secret = "the seat user's own secret 7b1f"
    planted = seat.home / "secret-withhold.txt"
    planted.write_text(secret + "\n")
    os.chown(planted, seat.user.uid, seat.user.gid)
    planted.chmod(0o600)
    try:
        head = 'prompt = "Look."\nseat = "s1"\nreset = false\nmax_steps = 1\n'
        failing = seat.write("leaky-setup.toml", head + '[[setup]]\nrun = ["/bin/sh", "-c", '
                                                         '"cat secret-withhold.txt; exit 3"]\n')
        # The link's target is the secret (the spec does not know it): a link the collect does not follow.
        linking = seat.write("leaky-collect.toml", head + '[[setup]]\nrun = ["/bin/sh", "-c", \'ln -sfn '
                                                          '"/nonexistent/$(cat secret-withhold.txt)" out-link\']\n'
                                                          '[[checks]]\nanswer = "re:."\n'
                                                          '[collect]\nfiles = ["out-link"]\n')
        _code, failed = seat.submit(failing)
        _code, collected = seat.submit(linking)
    finally:
        planted.unlink()
    # root (who has the operate right) reads what the session said.
    what = "run /bin/sh -c cat secret-withhold.txt; exit 3"
    assert failed["error"]["message"] == failure_message(0, "setup[0].run", what, "it exited with status 3, not 0; "
                                                         f"output: {secret}"), failed["error"]
    assert f"/nonexistent/{secret}" in collected["artifacts"][0]["error"], collected["artifacts"]
    sock = seat.daemon.socket
    os.chmod(seat.daemon.dir, 0o711)  # the socket's mode is the first fence; the rights are the second, tested here
    os.chmod(sock, 0o666)
    nobody = pwd.getpwnam("nobody")
    as_nobody = as_user(nobody.pw_uid, nobody.pw_gid)
    for task in (failed, collected):
        number = str(task["id"])
        shown = json_out(cuctl(sock, "show", number, "--json", prefix=as_nobody))
        listed = next(t for t in json_out(cuctl(sock, "list", "--json", prefix=as_nobody)) if t["id"] == task["id"])
        followed = cuctl(sock, "follow", number, prefix=as_nobody)
        place = Path(tempfile.mkdtemp(prefix="cud-export-", dir="/tmp"))
        try:
            place.chmod(0o777)
            exported = cuctl(sock, "export", number, "-o", str(place / "e"), prefix=as_nobody)
            assert exported.returncode == 0, exported.stderr
            record = b"".join(p.read_bytes() for p in (place / "e").rglob("*") if p.is_file())
        finally:
            shutil.rmtree(place)
        assert listed == shown and secret not in json.dumps(shown), shown
        assert secret not in followed.stdout and secret.encode() not in record, followed.stdout
        assert secret in json.dumps(json_out(cuctl(sock, "show", number, "--json")))  # root still reads it
        assert secret in cuctl(sock, "follow", number).stdout
    # What is withheld is what the session said: that the step failed, which and how, stay.
    error = json_out(cuctl(sock, "show", str(failed["id"]), "--json", prefix=as_nobody))["error"]
    assert error == {**failed["error"], "message": failure_message(0, "setup[0].run", what, WITHHELD_SETUP)}, error
    assert error["kind"] == "setup_failed" and error["details"]["key"] == "setup[0].run"
    followed = cuctl(sock, "follow", str(failed["id"]), prefix=as_nobody).stdout
    assert f"setup 1 ({what}): FAILED: {WITHHELD_SETUP}" in followed, followed
    artifacts = json_out(cuctl(sock, "show", str(collected["id"]), "--json", prefix=as_nobody))["artifacts"]
    assert artifacts == [{**collected["artifacts"][0], "error": WITHHELD_ARTIFACT}], artifacts
