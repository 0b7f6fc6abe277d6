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


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's request needs root to be made (setpriv)")
def test_without_the_operate_right_a_spec_may_not_act_in_a_session(start_daemon: Any, short_tmp: Path) -> None:
    daemon: Daemon = start_daemon(ANSWER, config='[access]\nsubmit_users = ["nobody"]\n')
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    for key, text in [("setup[0].run", '[[setup]]\nrun = ["/bin/true"]\n'),
                      ("setup[0].files", '[[setup]]\nfiles = [{ src = "f.txt", dest = "f.txt" }]\n'),
                      ("checks[0].command", '[[checks]]\ncommand = ["/bin/true"]\n'),
                      ("collect.files", '[collect]\nfiles = ["f.txt"]\n')]:
        (short_tmp / "f.txt").write_text("x")
        (short_tmp / "f.txt").chmod(0o644)
        spec = spec_file(short_tmp, "s.toml", 'prompt = "p"\n' + text)
        refused = cuctl(daemon.socket, "submit", "--spec", str(spec), prefix=AS_NOBODY)
        assert refused.returncode == 2, refused.stderr
        assert (f"user 'nobody' (uid {NOBODY.pw_uid}) may not submit a spec whose '{key}' acts in a seat's session: "
                "not in [access] operate_users/operate_groups") in refused.stderr
    # What only looks needs no more than the right to submit.
    looks = spec_file(short_tmp, "look.toml", 'prompt = "p"\nreset = false\n[[checks]]\nanswer = "re:42"\n')
    assert cuctl(daemon.socket, "submit", "--spec", str(looks), "--wait", prefix=AS_NOBODY).returncode == 0
