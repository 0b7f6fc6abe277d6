"""Submitting a spec to a daemon whose seat has no session: what it may and may not ask for, and who may.

A spec that only looks (an answer check, no reset) runs on any seat and is judged; one that
acts in a session (run, files, a command or file check, collect, or a reset) is refused naming
the seat and the key when no seat has a session, and, from a submitter without the operate
right, refused naming the right before anything else.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from cud.daemon.config import Access
from cud.daemon.server.access import WITHHELD_SETUP, AccessRights, Peer
from cud.spec.checks import CHECK_KINDS, Check
from cud.spec.setup import SETUP_KINDS, SetupStep, failure_message
from tests.support.daemon import Daemon, cuctl, json_out, scenario

ANSWER = scenario({"message": "The answer is 42."}, look_first=False)
NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups"]


def spec_file(folder: Path, name: str, text: str) -> Path:
    folder.chmod(0o755)  # nobody reads it through cuctl
    path = folder / name
    path.write_text(text)
    path.chmod(0o644)
    return path


def test_a_spec_that_only_looks_runs_on_a_seat_without_a_session(start_daemon: Any, short_tmp: Path) -> None:
    daemon: Daemon = start_daemon(ANSWER)
    spec = spec_file(short_tmp, "look.toml", 'prompt = "What is the answer?"\nreset = false\ntags = ["quick"]\n'
                                             '[[checks]]\nanswer = "re:42"\n[[checks]]\nanswer = "43"\nweight = 0.5\n')
    done = cuctl(daemon.socket, "submit", "--spec", str(spec), "--wait")
    assert done.returncode == 1, done.stderr  # one check of two failed: the verdict is failed
    assert "verdict: failed, score 0.67: 1 of 2 checks passed (the model's part ended succeeded)" in done.stderr
    task = json_out(cuctl(daemon.socket, "show", "1", "--json"))
    assert task["state"] == "succeeded" and task["spec"]["tags"] == ["quick"] and task["verdict"]["score"] == 0.666667
    # --max-steps beside --spec replaces the spec's own, through submit's one bounds check.
    too_many = cuctl(daemon.socket, "submit", "--spec", str(spec), "--max-steps", "100000")
    assert too_many.returncode == 2 and "'max_steps'" in too_many.stderr and "100000" in too_many.stderr


@pytest.mark.parametrize(("text", "words"), [
    ('prompt = "p"\nseat = "default"\n[[checks]]\nfile = "notes.txt"\n',
     "seat 'default' has no session (user and home in its [[seats]] table), which spec key 'checks[0].file' needs"),
    ('prompt = "p"\n[[setup]]\nsleep = 0.1\n',
     "no seat of this daemon has a session (user and home in [[seats]]), which spec key 'reset' needs"),
    ('prompt = "p"\nreset = false\n[[checks]]\nanswer = "x"\nrules = 5\n',
     "unknown spec key 'checks[0].rules'"),
    ('prompt = "p"\nreset = false\nrules = [{ decision = "allow" }]\n',
     "spec key 'rules[0].decision' is 'allow'; expected 'ask' or 'deny'"),
])
def test_what_the_daemon_refuses_is_named(start_daemon: Any, short_tmp: Path, text: str, words: str) -> None:
    daemon: Daemon = start_daemon(ANSWER)
    refused = cuctl(daemon.socket, "submit", "--spec", str(spec_file(short_tmp, "s.toml", text)))
    assert refused.returncode == 2 and words in refused.stderr, refused.stderr
    assert daemon.call("list") == []  # nothing was queued


#: A spec's part of each kind (setup steps, checks, collect), to submit without the operate right.
ACTS = {
    "setup[0].run": '[[setup]]\nrun = ["/bin/true"]\n',
    "setup[0].files": '[[setup]]\nfiles = [{ src = "f.txt", dest = "f.txt" }]\n',
    "setup[0].launch": '[[setup]]\nlaunch = ["/usr/bin/xterm"]\n',
    "setup[0].open": '[[setup]]\nopen = "https://example.com/"\n',
    "setup[0].clipboard": '[[setup]]\nclipboard = "text"\n',
    "checks[0].command": '[[checks]]\ncommand = ["/bin/true"]\n',
    "checks[0].file": '[[checks]]\nfile = "f.txt"\n',
    "checks[0].metric": '[[checks]]\nmetric = "diff_text_file"\nresult = { file = "f.txt" }\nexpected = { value = "x" }\n',
    "collect.files": '[collect]\nfiles = ["f.txt"]\n',
}
#: The parts that only wait or look: the right to submit is enough.
LOOKS = {
    "setup[0].sleep": '[[setup]]\nsleep = 0.1\n',
    "checks[0].answer": '[[checks]]\nanswer = "re:42"\n',
    "checks[0].window": '[[checks]]\nwindow = { class = "Xterm" }\nexists = false\n',
    "checks[0].element": '[[checks]]\nelement = { role = "push button" }\nexists = false\n',
}


def test_every_kind_of_step_and_check_is_either_acting_or_only_looking() -> None:
    """A new kind needs the operate right until it is listed as harmless; these tests name each kind once."""
    kinds = {key.split(".")[-1] for key in [*ACTS, *LOOKS]}
    assert kinds >= set(SETUP_KINDS) | set(CHECK_KINDS), "a kind this test does not submit"
    assert SetupStep.ONLY_WAITS == {"sleep"} and Check.ONLY_LOOKS == {"answer", "window", "element"}


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's request needs root to be made (setpriv)")
def test_without_the_operate_right_a_spec_may_not_act_in_a_session(start_daemon: Any, short_tmp: Path) -> None:
    daemon: Daemon = start_daemon(ANSWER, config='[access]\nsubmit_users = ["nobody"]\n')
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    (short_tmp / "f.txt").write_text("x")
    (short_tmp / "f.txt").chmod(0o644)
    for key, text in ACTS.items():
        spec = spec_file(short_tmp, "s.toml", 'prompt = "p"\n' + text)
        refused = cuctl(daemon.socket, "submit", "--spec", str(spec), prefix=AS_NOBODY)
        assert refused.returncode == 2, (key, refused.stderr)
        assert (f"user 'nobody' (uid {NOBODY.pw_uid}) may not submit a spec whose '{key}' acts in a seat's session: "
                "not in [access] operate_users/operate_groups") in refused.stderr, (key, refused.stderr)
    assert daemon.call("list") == []
    # What only waits or looks needs no more than the right to submit.
    for key, text in LOOKS.items():
        looks = spec_file(short_tmp, "look.toml", 'prompt = "p"\nreset = false\n' + text)
        accepted = cuctl(daemon.socket, "submit", "--spec", str(looks), prefix=AS_NOBODY)
        assert accepted.returncode == 0, (key, accepted.stderr)


def test_a_submitter_who_had_the_operate_right_reads_their_tasks_collected_files() -> None:
    """``AccessRights.may_read_collected``: the operate right reads any task's collected files; without it, only the
    submitter of a task whose spec collects (submit took the operate right for it) reads them, since lost."""
    rights = AccessRights(Access(submit_users=("nobody",)))
    nobody = Peer(pid=1, uid=NOBODY.pw_uid, gid=NOBODY.pw_gid, groups=frozenset(), name="nobody")
    other = Peer(pid=1, uid=NOBODY.pw_uid - 1, gid=NOBODY.pw_gid, groups=frozenset(), name="other")
    root = Peer(pid=1, uid=0, gid=0, groups=frozenset(), name="root")

    def task(uid: int, collect: list[str]) -> Any:
        return {"id": 7, "prompt": "p", "submitter": {"uid": uid, "name": "x"}, "spec": {"collect": {"files": collect}}}

    assert rights.may_read_collected(nobody, task(NOBODY.pw_uid, ["a.txt"]))
    assert not rights.may_read_collected(other, task(NOBODY.pw_uid, ["a.txt"]))
    assert not rights.may_read_collected(nobody, task(NOBODY.pw_uid, []))
    assert not rights.may_read_collected(nobody, task(0, ["a.txt"]))
    assert rights.may_read_collected(root, task(NOBODY.pw_uid, ["a.txt"]))


def test_a_failed_setup_step_says_what_it_met_in_the_session_only_to_whoever_may_read_the_seats_files() -> None:
    """``AccessRights.task_for``/``event_for``: why a step failed is withheld from a reader without the right unless
    only the display was looked at (a ``wait_for`` that ran out); an error from before parts were recorded is withheld
    (deny by default). Which step failed, and how, stay. A submitter whose spec acted in the session (submit took
    the operate right for it) reads their own."""
    rights = AccessRights(Access(submit_users=("nobody",)))
    nobody = Peer(pid=1, uid=NOBODY.pw_uid, gid=NOBODY.pw_gid, groups=frozenset(), name="nobody")
    root = Peer(pid=1, uid=0, gid=0, groups=frozenset(), name="root")
    why = "it exited with status 3, not 0; output: a secret"

    def task(uid: int, part: str | None) -> Any:
        details = {"key": "setup[0].launch", "step": 0, "cause": "error", "what": "launch x",
                   **({"part": part} if part is not None else {})}
        return {"id": 7, "prompt": "p", "key": None, "submitter": {"uid": uid, "name": "x"},
                "spec": {"setup": [{"launch": ["x"]}]}, "verdict": None, "artifacts": None,
                "error": {"kind": "setup_failed", "message": failure_message(0, "setup[0].launch", "launch x", why),
                          "details": details}}

    def event(kind: str, data: dict[str, Any]) -> Any:
        return {"task_id": 7, "seq": 1, "at": "", "kind": kind, "data": data}

    withheld = failure_message(0, "setup[0].launch", "launch x", WITHHELD_SETUP)
    for part in ("launch", None):
        shown = rights.task_for(nobody, task(0, part))
        assert shown["error"] == {**task(0, part)["error"], "message": withheld}
        setup = event("setup", {"index": 0, "kind": "launch", "what": "launch x", "ok": False, "error": why,
                                **({"part": part} if part else {})})
        assert rights.event_for(nobody, task(0, part), setup)["data"] == {**setup["data"], "error": WITHHELD_SETUP}
        end = event("end", {"state": "failed", "error": task(0, part)["error"]})
        assert rights.event_for(nobody, task(0, part), end)["data"]["error"]["message"] == withheld
        assert rights.task_for(root, task(0, part)) == task(0, part)
        assert rights.task_for(nobody, task(NOBODY.pw_uid, part)) == task(NOBODY.pw_uid, part)  # their own
    waited = event("setup", {"index": 0, "kind": "launch", "what": "launch x", "ok": False, "error": why,
                             "part": "wait_for"})
    assert rights.task_for(nobody, task(0, "wait_for")) == task(0, "wait_for")
    assert rights.event_for(nobody, task(0, "wait_for"), waited) == waited
