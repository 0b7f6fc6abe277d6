"""cud.fleet.attempt.run_attempt (#29) without Ray, against one real daemon for the module (scripted model, Xvfb).

An attempt submits its spec under its key or re-attaches, follows it to the end, and brings the
record back inline or as a reference. The daemon killed (-9) and started again on the same state
directory while an attempt follows: the attempt re-attaches by the key and there is exactly one
task for it, interrupted if it was running (the fleet then retries under a new key), run and
judged if it was still queued. A daemon's refusal reaches the caller as the daemon said it.
"""

from __future__ import annotations

import os
import pwd
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.cuctl.client import RemoteError, check_own_task
from cud.errors import AccessDenied, ConnectionFailed, ProtocolError
from cud.fleet.attempt import INLINE_RECORD_LIMIT, AttemptOutcome, run_attempt
from cud.scripted import ScriptedModel
from cud.spec import parse_spec
from tests.support.daemon import ROOT, Daemon, cuctl, scenario
from tests.support.recorder import wait_until
from tests.support.xserver import start_xvfb

SCENARIOS = {
    "approve": scenario({"safety_checks": [{"code": "c", "message": "Move the pointer?"}],
                         "actions": [{"type": "move", "x": 10, "y": 10}]}, {"message": "moved"}),
    "slow": scenario({"message": "late", "delay": 30}, look_first=False),
}
ANSWER = {"prompt": "What is the answer?", "reset": False, "checks": [{"answer": "re:42"}]}
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    xvfb = start_xvfb(tmp_path_factory.mktemp("xvfb"))
    model = ScriptedModel(scenario({"message": "The answer is 42."}, look_first=False), scenarios=SCENARIOS,
                          record=False)
    made = Daemon(xvfb.display, model.start(), config='[access]\nsubmit_users = ["nobody"]\n')
    try:
        yield made.start()
    finally:
        made.cleanup()
        model.stop()
        xvfb.stop()


def tasks_with(daemon: Daemon, key: str) -> list[int]:
    """The ids of the tasks the database file holds with ``key`` (read beside the daemon, or after it)."""
    db = sqlite3.connect(f"file:{daemon.state_dir / 'cud.sqlite3'}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT id FROM tasks WHERE idempotency_key = ?", (key,))]
    finally:
        db.close()


class Following:
    """``run_attempt`` on a thread; ``saw(kind)`` waits until it has passed on an event of that kind."""

    def __init__(self, daemon: Daemon, spec: dict[str, Any], key: str) -> None:
        self.kinds: list[str] = []
        self.seqs: list[int] = []
        self.outcome: AttemptOutcome | None = None
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(daemon, spec, key))
        self.thread.start()

    def _run(self, daemon: Daemon, spec: dict[str, Any], key: str) -> None:
        def progress(event: Any) -> None:
            with self._changed:
                self.kinds.append(event["kind"])
                self.seqs.append(event["seq"])
                self._changed.notify_all()

        try:
            self.outcome = run_attempt(daemon.socket, spec=spec, files={}, key=key, on_progress=progress,
                                       restart_wait=60)
        except BaseException as exc:  # the test reads it
            self.error = exc

    def saw(self, kind: str, timeout: float = 30) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: kind in self.kinds, timeout), (kind, self.kinds, self.error)

    def result(self, timeout: float = 120) -> AttemptOutcome:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"run_attempt still following after {timeout} s: {self.kinds}"
        assert self.error is None and self.outcome is not None, self.error
        assert self.seqs == sorted(set(self.seqs)), self.seqs  # each event once, in order, across the restart
        return self.outcome


def test_an_attempt_is_judged_once_and_brings_its_record_back(daemon: Daemon) -> None:
    seen: list[Any] = []
    first = run_attempt(daemon.socket, spec=ANSWER, files={}, key="run-1/answer/1#1", on_progress=seen.append,
                        seat="default")
    assert (first.task["state"], first.task["verdict"]["verdict"], first.task["key"]) == \
        ("succeeded", "passed", "run-1/answer/1#1")
    assert first.reattached is False and first.host == socket.gethostname() and first.task["pinned"] is True
    assert [e["kind"] for e in seen][0] == "queued" and seen[-1]["kind"] == "end"
    record = first.record
    assert record.inline and record.report_html is not None and record.report_html.startswith(b"<!doctype html>")
    assert b"run-1/answer/1#1" in record.report_html and record.bytes == len(record.report_html)
    assert record.reference == {"host": socket.gethostname(), "task": first.task["id"]}
    assert INLINE_RECORD_LIMIT == 8 * 1024 * 1024

    # The same key again: the same task, nothing queued; a record over the limit stays on the node.
    again = run_attempt(daemon.socket, spec=ANSWER, files={}, key="run-1/answer/1#1", inline_limit=1000)
    assert again.reattached is True and again.task == first.task
    assert (again.record.inline, again.record.report_html, again.record.bytes) == (False, None, 0)
    assert again.record.reference == {"host": socket.gethostname(), "task": first.task["id"]}
    assert tasks_with(daemon, "run-1/answer/1#1") == [first.task["id"]]


def test_what_is_wrong_is_said_as_the_daemon_said_it(daemon: Daemon, short_tmp: Path) -> None:
    acting = {"prompt": "p", "reset": False, "setup": [{"run": ["/bin/true"]}]}
    # This daemon's seat has no session: its refusal, unchanged; nothing queued under the key.
    with pytest.raises(RemoteError) as refused:
        run_attempt(daemon.socket, spec=acting, files={}, key="run-1/acting/1#1")
    assert refused.value.kind == "spec" and "no seat of this daemon has a session" in refused.value.message
    assert tasks_with(daemon, "run-1/acting/1#1") == []
    with pytest.raises(ProtocolError, match="'submit' field 'key' must be a key of 1 to 160 characters"):
        run_attempt(daemon.socket, spec=ANSWER, files={}, key="a key")
    with pytest.raises(ConnectionFailed, match=re.escape("gave up after 0.3 s without the daemon")):
        run_attempt(short_tmp / "no.sock", spec=ANSWER, files={}, key="k", restart_wait=0.3)


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's request needs root to be made (setpriv)")
def test_a_node_user_without_the_operate_right_gets_the_daemons_refusal(daemon: Daemon) -> None:
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    script = ("from cud.fleet.attempt import run_attempt\nfrom cud.cuctl.client import RemoteError\n"
              "try:\n    run_attempt(" + repr(str(daemon.socket)) + ", spec={'prompt': 'p', 'setup': "
              "[{'run': ['/bin/true']}]}, files={}, key='run-1/op/1#1')\n"
              "except RemoteError as exc:\n    print(exc.kind, exc.message)\n")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups",
                           sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"access_denied user 'nobody' (uid {NOBODY.pw_uid}) may not submit a spec whose "
                                  "'setup[0].run' acts in a seat's session"), done.stdout
    assert tasks_with(daemon, "run-1/op/1#1") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's request needs root to be made (setpriv)")
def test_another_users_attempt_under_the_same_key_is_theirs_and_never_handed_over(daemon: Daemon) -> None:
    """#41: a key is its submitter's. A submit-only user's attempt takes a key first, with a spec that passes;
    root's attempt under the same key gets a task of its own, judged on its own spec (failed), not re-attached
    to that user's. And what a daemon answers is checked client-side too: a task of another user is refused."""
    key = "run-3/claimed/1#1"
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    script = ("from cud.fleet.attempt import run_attempt\n"
              f"outcome = run_attempt({str(daemon.socket)!r}, spec={ANSWER!r}, files={{}}, key={key!r})\n"
              "print(outcome.task['id'], outcome.task['verdict']['verdict'])\n")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups",
                           sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    theirs, verdict = done.stdout.split()
    assert verdict == "passed"
    never = {**ANSWER, "checks": [{"answer": "re:^never$"}]}
    ours = run_attempt(daemon.socket, spec=never, files={}, key=key)
    assert ours.reattached is False and ours.task["id"] != int(theirs)
    assert (ours.task["submitter"]["uid"], ours.task["key"], ours.task["verdict"]["verdict"]) == (0, key, "failed")
    assert sorted(tasks_with(daemon, key)) == sorted([int(theirs), ours.task["id"]])
    # The check cuctl eval and the fleet make on submit's reply, on that user's real task: not ours.
    their_task = daemon.task(int(theirs))
    with pytest.raises(AccessDenied, match=f"with task {theirs} of 'nobody' \\(uid {NOBODY.pw_uid}, key '{key}'\\)"):
        check_own_task({"task": their_task, "existing": True}, key, 0)
    assert check_own_task({"task": ours.task, "existing": True}, key, 0) == ours.task


def test_a_daemon_killed_under_a_running_attempt_leaves_one_task_interrupted(daemon: Daemon) -> None:
    key = "run-1/slow/1#1"
    following = Following(daemon, {**ANSWER, "model": "scripted:slow"}, key)
    following.saw("running")
    daemon.kill9()
    daemon.start()
    outcome = following.result()
    # Found running at start-up: interrupted, and re-attached (never a second task); the fleet's retry
    # is another attempt, under another key.
    assert outcome.task["state"] == "interrupted" and "daemon stopped" in outcome.task["reason"]
    assert outcome.reattached is False and outcome.task["verdict"] is None
    assert following.kinds[-1] == "end" and tasks_with(daemon, key) == [outcome.task["id"]]


def test_a_daemon_killed_while_an_attempt_is_queued_runs_it_after_its_restart(daemon: Daemon) -> None:
    holder = daemon.call("submit", prompt="hold the seat", model="scripted:approve")["id"]
    daemon.wait_approval(holder)
    key = "run-1/answer/1#2"
    following = Following(daemon, parse_spec(ANSWER).to_dict(), key)  # a spec's normal form: seat "any"
    following.saw("queued")
    assert daemon.call("list", key=key)[0]["state"] == "queued"
    daemon.kill9()
    daemon.start()
    outcome = following.result()
    assert (outcome.task["state"], outcome.task["verdict"]["verdict"]) == ("succeeded", "passed")
    assert outcome.task["pinned"] is False
    assert outcome.reattached is False and tasks_with(daemon, key) == [outcome.task["id"]]
    assert following.kinds.count("queued") == 1 and following.kinds[-1] == "end"
    assert daemon.task(holder)["state"] == "interrupted"
    wait_until(lambda: daemon.call("seats")[0]["state"] == "idle", 30, "the seat to be free")


def test_a_recorded_video_comes_back_inline_within_the_limit_and_stays_past_it(start_daemon: Any,
                                                                               short_tmp: Path) -> None:
    moving = scenario({"actions": [{"type": "move", "x": 40, "y": 40}]}, {"message": "The answer is 42."})
    daemon: Daemon = start_daemon(moving, config="[video]\nenabled = true\nfps = 2\n")
    outcome = run_attempt(daemon.socket, spec=ANSWER, files={}, key="run-2/video/1#1")
    record = outcome.record
    assert outcome.task["verdict"]["verdict"] == "passed" and record.inline and record.video_name == "video.mp4"
    saved = short_tmp / "v.mp4"
    assert cuctl(daemon.socket, "video", str(outcome.task["id"]), "-o", str(saved)).returncode == 0
    assert record.video == saved.read_bytes() and record.artifacts == {}
    assert record.report_html is not None and b"<video" in record.report_html
    # What counts: the page (which embeds the video again) and the video; one byte less and it stays.
    assert record.bytes == len(record.report_html) + len(record.video)
    kept = run_attempt(daemon.socket, spec=ANSWER, files={}, key="run-2/video/1#1", inline_limit=record.bytes - 1)
    assert kept.reattached and not kept.record.inline and kept.record.video is None
    exact = run_attempt(daemon.socket, spec=ANSWER, files={}, key="run-2/video/1#1", inline_limit=record.bytes)
    assert exact.record.inline and exact.record.bytes == record.bytes
