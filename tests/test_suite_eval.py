"""cuctl eval end to end: a suite of specs over three real seats with sessions, the scripted model playing
each spec's part (``model = "scripted:NAME"``), and what it writes: the table, results.json, JUnit, the index.

One daemon with three seats (openbox on Xvfb, a user, a home and a template each) for the module.
The specs are cheap: answers, files, commands, and xterm, which the model types into.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from junitparser import Failure, JUnitXml, Skipped

from cud.scripted import scenario_folder
from cud.scripted.chat import ScriptedChat
from cud.scripted.messages import ScriptedMessages
from tests.support.daemon import ROOT, cuctl
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat
from tests.support.sshd import Sshd

SCENARIOS = {
    "say-done": {"name": "say-done", "steps": [{"message": "done"}]},
    "say-done-too": {"name": "say-done-too", "steps": [{"message": "done"}]},  # another model, the same part
    "slow-done": {"name": "slow-done", "steps": [{"message": "done", "delay": 3}]},
    # Holds its seat until someone approves its first action (a safety check).
    "ask-done": {"name": "ask-done", "steps": [
        {"safety_checks": [{"code": "c", "message": "Go on?"}], "actions": [{"type": "move", "x": 5, "y": 5}]},
        {"message": "done"}]},
    "xterm-write": {"name": "xterm-write", "steps": [
        {"actions": [{"type": "type", "text": "echo written > out.txt\n"}]},
        {"actions": [{"type": "wait"}]},
        {"message": "I wrote out.txt"}]},
}
XTERM = """
[[setup]]
launch = ["/usr/bin/xterm", "-e", "/bin/sh"]
wait_for = { window_class = "XTerm", timeout = 60 }
"""
#: name: (text, passes by design)
SPECS: dict[str, tuple[str, bool]] = {
    "answer-pass": ('model = "scripted:say-done"\ntags = ["quick"]\n[[checks]]\nanswer = "done"\n', True),
    "answer-fail": ('model = "scripted:say-done"\ntags = ["quick"]\n[[checks]]\nname = "says finished"\n'
                    'answer = "re:finished"\n', False),
    "file-pass": ('model = "scripted:say-done"\n[[setup]]\nfiles = [{ src = "fx/a.txt", dest = "a.txt" }]\n'
                  '[[checks]]\nfile = "a.txt"\nequals = "fx/a.txt"\n', True),
    "file-fail": ('model = "scripted:say-done"\n[[checks]]\nname = "report written"\nfile = "report.txt"\n', False),
    "run-pass": ('model = "scripted:say-done"\n[[setup]]\nrun = ["/bin/sh", "-c", "echo 42 > n.txt"]\n'
                 '[[checks]]\ncommand = ["/bin/cat", "n.txt"]\noutput = { include = ["42"] }\n', True),
    "run-partial": ('model = "scripted:say-done"\n[[setup]]\nrun = ["/bin/sh", "-c", "echo 42 > n.txt"]\n'
                    '[[checks]]\nfile = "n.txt"\n[[checks]]\nname = "forty-three"\nfile = "n.txt"\n'
                    'matches = "re:43"\n', False),
    "setup-fails": ('model = "scripted:say-done"\n[[setup]]\nrun = ["/bin/sh", "-c", "exit 3"]\n'
                    '[[checks]]\nfile = "n.txt"\n', False),
    "xterm-type": ('model = "scripted:xterm-write"\n' + XTERM + '[[checks]]\nfile = "out.txt"\nmatches = "written\\n"\n'
                   '[[checks]]\nwindow = { class = "XTerm" }\n', True),
    "no-dialog": ('model = "scripted:say-done"\n[[checks]]\nwindow = { class = "Zenity" }\nexists = false\n', True),
    "json-spec": ("", True),
}
EXAMPLES = ROOT / "examples" / "suite"
NOBODY = pwd.getpwnam("nobody")  # a user with only the right to submit
AS_NOBODY = ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups"]
JSON_SPEC = {"prompt": "Say done.", "model": "scripted:say-done", "checks": [{"answer": "re:^done$"}]}


#: The same part played over the other two APIs: Claude's Messages API and an open model's chat completions.
OTHER_APIS = ["claude-done", "tars-done"]
#: Specs every API can run: approval "actions" (the anthropic and chat APIs refuse "safety"), no action asked about.
API_SPECS: dict[str, tuple[str, bool]] = {
    "answer-pass": ('approval = "actions"\n[[checks]]\nanswer = "done"\n', True),
    "answer-fail": ('approval = "actions"\n[[checks]]\nname = "says finished"\nanswer = "re:finished"\n', False),
}


@pytest.fixture(scope="module")
def seats(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    scenarios = {**SCENARIOS, **scenario_folder(EXAMPLES / "scenarios")}
    with contextlib.ExitStack() as stack:
        claude = ScriptedMessages(SCENARIOS["say-done"], record=False)
        tars = ScriptedChat(SCENARIOS["say-done"], format="ui-tars", record=False)
        for server in (claude, tars):
            server.start()
            stack.callback(server.stop)
        models = (f'[models.claude-done]\napi = "anthropic"\nbase_url = "{claude.base_url}"\n'
                  f'api_key_env = "CUD_TEST_SUITE_CLAUDE_KEY"\n'
                  f'[models.tars-done]\napi = "chat"\nbase_url = "{tars.base_url}"\nformat = "ui-tars"\n')
        yield stack.enter_context(_seats(seat_users, scenarios, models))


@contextlib.contextmanager
def _seats(seat_users: SeatUsers, scenarios: dict[str, Any], models: str) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, {"name": "none", "steps": [{"message": "unused"}]}, seats=3, scenarios=scenarios,
                   config=f'[access]\nsubmit_users = ["{NOBODY.pw_name}"]\n' + models,
                   extra_env={"CUD_TEST_SUITE_CLAUDE_KEY": "sk-ant-any"}) as s:
        (s.specs / "apis").mkdir()
        for name, (text, _) in API_SPECS.items():
            s.write(f"apis/{name}.toml", f'prompt = "The {name} task on any API."\n' + text)
        for name, (text, _) in SPECS.items():
            if name == "json-spec":
                s.write("suite/json-spec.json", json.dumps(JSON_SPEC))
            else:
                s.write(f"suite/{name}.toml", f'prompt = "The {name} task."\n' + text, {"suite/fx/a.txt": "alpha\n"})
        yield s


def eval_(seat: SpecSeat, *args: str) -> subprocess.CompletedProcess[str]:
    return cuctl(seat.daemon.socket, "eval", *args, timeout=600)


def results(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text())


def test_a_suite_over_three_seats_agrees_in_table_results_and_junit(seats: SpecSeat, tmp_path: Path) -> None:
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = eval_(seats, str(seats.specs / "suite"), "--out", str(out), "--junit", str(junit))
    assert done.returncode == 1, done.stderr  # some fail by design
    data = results(out)
    runs = {r["spec"].rsplit("/", 1)[-1].split(".")[0]: r for r in data["runs"]}
    assert set(runs) == set(SPECS) and len(data["runs"]) == len(SPECS)
    outcomes = {name: r["outcome"] for name, r in runs.items()}
    assert outcomes == {name: "passed" if ok else "failed" for name, (_, ok) in SPECS.items()}, \
        {n: (r["state"], r["checks"], r["error"]) for n, r in runs.items()}
    assert runs["run-partial"]["score"] == 0.5 and runs["setup-fails"]["error"]["kind"] == "setup_failed"
    assert {r["seat"] for r in data["runs"]} == {"s1", "s2", "s3"}  # the daemon spread them
    assert all(r["judged"] and r["attempt"] == 1 for r in data["runs"])
    # The table says the same: one line per spec and the total.
    lines = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    for name, (_, ok) in SPECS.items():
        spec = next(k for k in lines if k.endswith(f"/{name}.toml") or k.endswith(f"/{name}.json"))
        assert lines[spec][1:4] == ["1", "1" if ok else "0", "0" if ok else "1"], lines[spec]
    passing = sum(ok for _, ok in SPECS.values())
    assert lines["total"][1:4] == [str(len(SPECS)), str(passing), str(len(SPECS) - passing)]
    assert data["summary"]["total"]["passed"] == passing
    # JUnit, read by junitparser: a testcase per run, a failure with each failed check's why.
    cases = {case.classname.rsplit("/", 1)[-1].split(".")[0]: case
             for suite in JUnitXml.fromfile(str(junit)) for case in suite}
    assert set(cases) == set(SPECS)
    for name, (_, ok) in SPECS.items():
        failures = [r for r in cases[name].result if isinstance(r, Failure)]
        assert (not failures) == ok, name
    assert "forty-three: its content does not match /43/" in cases["run-partial"].result[0].text
    assert "says finished" in cases["answer-fail"].result[0].text
    # Every run's report is in the index.
    index = (out / "index.html").read_text()
    for r in data["runs"]:
        assert f'href="{r["report"]}"' in index and (out / r["report"]).stat().st_size > 0
    # --resume reruns nothing judged; --tags picks; a bad spec is refused before anything runs.
    before = len(seats.daemon.call("list"))
    again = eval_(seats, "--resume", str(out))
    assert again.returncode == 1 and len(seats.daemon.call("list")) == before, again.stderr
    assert results(out)["runs"] == data["runs"]
    tagged = eval_(seats, str(seats.specs / "suite"), "--tags", "quick", "--repeat", "2", "--seats", "s2",
                   "--out", str(tmp_path / "tagged"))
    tagged_runs = results(tmp_path / "tagged")["runs"]
    assert tagged.returncode == 1 and len(tagged_runs) == 4 and {r["seat"] for r in tagged_runs} == {"s2"}
    (seats.specs / "bad").mkdir()
    bad = seats.write("bad/x.toml", 'prompt = "x"\n[[checks]]\nfil = "a"\n')
    refused = eval_(seats, str(bad), "--out", str(tmp_path / "bad"))
    assert refused.returncode == 2 and "x.toml" in refused.stderr and "'checks[0].fil'" in refused.stderr
    assert not (tmp_path / "bad").exists() and len(seats.daemon.call("list")) == before + 4  # nothing half-done
    suite = str(seats.specs / "suite")
    for args, says in [((suite, "--seats", "s9"), "--seats names 's9'; the daemon's seats are s1, s2, s3"),
                       ((suite, "--repeat", "0"), "--repeat must be 1 to 1000, got 0"),
                       (("--resume", str(out), suite), "takes no PATH"),
                       ((suite, "--out", str(out)), "already exists"),
                       ((suite, "--tags", "nosuchtag"), "no spec with a tag of nosuchtag")]:
        usage = eval_(seats, *args)
        assert usage.returncode == 2 and says in usage.stderr, (args, usage.stderr)
    assert len(seats.daemon.call("list")) == before + 4


def test_a_suite_of_two_models_runs_every_spec_on_each_and_groups_by_model(seats: SpecSeat, tmp_path: Path) -> None:
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    two = ["scripted:say-done", "scripted:say-done-too"]  # the scripted server plays each model its scenario
    names = ["answer-pass", "answer-fail", "file-pass"]
    specs = [str(seats.specs / "suite" / f"{n}.toml") for n in names]
    for bad, says in [("", "none empty; got ''"), (f"{two[0]},,{two[1]}", "none empty"),
                      (f"{two[0]},{two[0]}", f"names {two[0]!r} more than once")]:
        usage = eval_(seats, *specs, "--model", bad, "--out", str(tmp_path / "bad"))
        assert usage.returncode == 2 and says in usage.stderr and not (tmp_path / "bad").exists(), usage.stderr
    done = eval_(seats, *specs, "--model", ",".join(two), "--out", str(out), "--junit", str(junit))
    assert done.returncode == 1, done.stderr  # answer-fail fails on each
    data = results(out)
    assert data["suite"]["models"] == two and data["suite"]["model"] is None
    verdicts = {(Path(r["spec"]).stem, r["model"]): r["outcome"] for r in data["runs"]}
    assert len(data["runs"]) == 6 and verdicts == {(n, m): "passed" if SPECS[n][1] else "failed"
                                                   for n in names for m in two}, data["runs"]
    for r in data["runs"]:  # each task ran on its model
        assert seats.daemon.task(r["task_id"])["model"] == r["model"]
    groups = data["summary"]["models"]
    assert [g["model"] for g in groups] == two and all(g["total"]["passed"] == 2 for g in groups)
    assert data["summary"]["total"]["runs"] == 6 and data["summary"]["total"]["passed"] == 4
    # The table: a row per model per spec, each model's total, then all.
    rows = [line.split() for line in done.stdout.splitlines() if line.split() and line.split()[0] in (*two, "all")]
    assert [(r[0], Path(r[1]).stem) for r in rows] == [(m, n) for m in two for n in [*names, "total"]] + [
        ("all", "total")]
    assert [r[2:5] for r in rows if Path(r[1]).stem == "answer-fail"] == [["1", "0", "1"]] * 2
    assert [s.name for s in JUnitXml.fromfile(str(junit))] == [f"cuctl eval: {m}" for m in two]
    # --resume goes per spec and model: one model's run taken out of results.json is the one due again; its
    # key (the model's in it) is the task the daemon has, so it is that task again, not a new one.
    lost = next(r for r in data["runs"] if (Path(r["spec"]).stem, r["model"]) == ("file-pass", two[1]))
    (out / "results.json").write_text(json.dumps({**data, "runs": [r for r in data["runs"] if r is not lost]}))
    before = len(seats.daemon.call("list"))
    again = eval_(seats, "--resume", str(out))
    assert again.returncode == 1 and len(seats.daemon.call("list")) == before, again.stderr
    resumed = results(out)["runs"]
    assert len(resumed) == 6 and resumed[:5] == [r for r in data["runs"] if r is not lost]
    assert (resumed[-1]["model"], resumed[-1]["task_id"], resumed[-1]["outcome"]) == (two[1], lost["task_id"],
                                                                                       "passed")


def test_a_suite_of_three_apis_has_a_row_per_model_per_spec(seats: SpecSeat, tmp_path: Path) -> None:
    """One suite on the Responses API, Anthropic's Messages API and an open model's chat completions."""
    out = tmp_path / "out"
    three = ["scripted:say-done", *OTHER_APIS]
    names = list(API_SPECS)
    done = eval_(seats, *(str(seats.specs / "apis" / f"{n}.toml") for n in names), "--model", ",".join(three),
                 "--out", str(out))
    assert done.returncode == 1, done.stderr  # answer-fail fails on each
    data = results(out)
    verdicts = {(Path(r["spec"]).stem, r["model"]): r["outcome"] for r in data["runs"]}
    assert verdicts == {(n, m): "passed" if API_SPECS[n][1] else "failed" for n in names for m in three}, data["runs"]
    for r in data["runs"]:  # each task ran on its model, through that model's API
        assert seats.daemon.task(r["task_id"])["model"] == r["model"]
    rows = [line.split() for line in done.stdout.splitlines() if line.split() and line.split()[0] in (*three, "all")]
    assert [(r[0], Path(r[1]).stem) for r in rows] == [(m, n) for m in three for n in [*names, "total"]] + [
        ("all", "total")]
    assert [r[2:5] for r in rows if Path(r[1]).stem == "answer-pass"] == [["1", "1", "0"]] * 3


def test_a_suite_over_ssh_sends_the_specs_and_fetches_the_reports(seats: SpecSeat, sshd: Sshd, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "cud.cuctl.main", "--host",
                           f"ssh://cud-test{quote(str(seats.daemon.socket))}", "eval",
                           str(seats.specs / "suite" / "file-pass.toml"), str(seats.specs / "suite" / "answer-fail.toml"),
                           "--out", str(out), "--junit", str(tmp_path / "j.xml")],
                          env={**sshd.client_env(), "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    runs = {Path(r["spec"]).stem: r for r in results(out)["runs"]}
    assert {n: r["outcome"] for n, r in runs.items()} == {"file-pass": "passed", "answer-fail": "failed"}
    assert runs["file-pass"]["checks"][0]["why"].endswith("is as expected (6 bytes)")  # the fixture went over ssh
    for r in runs.values():
        local = cuctl(seats.daemon.socket, "report", str(r["task_id"]), "-o", "-").stdout
        assert (out / r["report"]).read_text() == local


def test_the_example_suite_passes_and_fails_as_its_readme_says(seats: SpecSeat, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = eval_(seats, str(EXAMPLES), "--allow-files-outside", "--out", str(out))  # its demo app is in sandbox/
    runs = {Path(r["spec"]).stem: r for r in results(out)["runs"]}
    assert {n: (r["outcome"], r["score"]) for n, r in runs.items()} == {
        "notes-edit": ("passed", 1.0), "demo-form": ("passed", 1.0), "file-count": ("failed", 0.5)}, \
        {n: r["checks"] for n, r in runs.items()}
    assert done.returncode == 1
    print(done.stdout)


def test_a_daemon_killed_mid_suite_comes_back_and_every_run_is_judged_once(seats: SpecSeat, tmp_path: Path) -> None:
    (seats.specs / "slow").mkdir()
    for n in range(3):
        seats.write(f"slow/slow{n}.toml", 'prompt = "Wait, then say done."\nmodel = "scripted:slow-done"\n'
                                          '[[checks]]\nanswer = "done"\n')
    out = tmp_path / "out"
    env = {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(seats.daemon.socket), "eval",
                             str(seats.specs / "slow"), "--repeat", "2", "--out", str(out)],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        def running() -> bool:  # the model is thinking (3 s) on a task of the suite
            return any(t["state"] == "running" and t["steps"] == 0 for t in seats.daemon.call("list"))

        wait_until(running, 120, "a task of the suite to run")
        seats.daemon.kill9()
        time.sleep(1)  # the suite sees the daemon gone (its next look fails) before it is back
        seats.daemon.start()
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()  # and its pipes closed: a failed assert above must not leak them to a later test
    assert proc.returncode == 0, stderr
    assert "waiting up to" in stderr and "answers again" in stderr
    data = results(out)
    interrupted = [r for r in data["runs"] if r["state"] == "interrupted"]
    assert interrupted, (stderr, data["runs"])
    assert all(r["attempt"] == 1 and not r["judged"] for r in interrupted)
    judged = [(r["spec"], r["repeat"]) for r in data["runs"] if r["judged"]]
    assert sorted(judged) == sorted({(s, k) for s in data["suite"]["specs"] for k in range(2)})  # each once
    for r in interrupted:  # retried once, and the retry passed
        retry = [x for x in data["runs"] if (x["spec"], x["repeat"]) == (r["spec"], r["repeat"]) and x["attempt"] == 2]
        assert len(retry) == 1 and retry[0]["outcome"] == "passed"
    # The daemon's own records agree: every attempt is one of its tasks, in the state results.json says.
    for r in data["runs"]:
        task = seats.daemon.task(r["task_id"])
        assert (task["state"], (task["verdict"] or {}).get("verdict")) == (r["state"], r["verdict"])
    assert "total" in stdout


def test_a_suite_whose_cuctl_was_killed_resumes_following_its_tasks_not_submitting_them_again(
        seats: SpecSeat, tmp_path: Path) -> None:
    (seats.specs / "slow2").mkdir()
    for n in range(2):
        seats.write(f"slow2/slow{n}.toml", 'prompt = "Wait, then say done."\nmodel = "scripted:slow-done"\n'
                                           '[[checks]]\nanswer = "done"\n')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(seats.daemon.socket), "eval",
                             str(seats.specs / "slow2"), "--repeat", "2", "--out", str(out)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        def submitted() -> list[int]:
            try:
                return [r["task_id"] for r in results(out)["runs"] if r["task_id"] is not None]
            except (OSError, ValueError):
                return []

        wait_until(lambda: len(submitted()) >= 2, 120, "the suite to submit two tasks")
    finally:
        proc.kill()
        proc.wait()
    flying = submitted()
    before = {t["id"] for t in seats.daemon.call("list")}
    done = eval_(seats, "--resume", str(out))
    assert done.returncode == 0, done.stderr
    data = results(out)
    assert len(data["runs"]) == 4 and all(r["judged"] and r["attempt"] == 1 for r in data["runs"])
    assert [r["task_id"] for r in data["runs"]][:len(flying)] == flying  # followed, not submitted again
    counted = {r["task_id"] for r in data["runs"]}
    assert {t["id"] for t in seats.daemon.call("list")} - before == counted - before  # nothing else submitted
    # A run submitted just before the kill, its id not yet in results.json, was taken back by its key:
    # every task of the suite is one the suite counts.
    assert {t["id"] for t in seats.daemon.call("list", key_prefix=f"eval:{data['suite']['run']}/")} == counted


def test_a_submission_made_again_after_a_lost_reply_is_the_task_the_daemon_has(seats: SpecSeat,
                                                                               tmp_path: Path) -> None:
    (seats.specs / "once").mkdir()
    seats.write("once/once.toml", 'prompt = "Say done."\nmodel = "scripted:say-done"\n[[checks]]\nanswer = "done"\n')
    out = tmp_path / "out"
    assert eval_(seats, str(seats.specs / "once"), "--out", str(out)).returncode == 0
    data = results(out)
    (run,) = data["runs"]
    assert run["judged"]
    first = seats.daemon.task(run["task_id"])
    assert first["key"] == f"eval:{data['suite']['run']}/0/0/a1", first
    # As if cuctl had died after the daemon took the submission and before it heard the reply:
    # results.json does not know the task. Resumed, the suite submits it again, with the same key.
    run.update(task_id=None, state="pending", verdict=None, judged=False, outcome=None)
    (out / "results.json").write_text(json.dumps(data))
    before = {t["id"] for t in seats.daemon.call("list")}
    done = eval_(seats, "--resume", str(out))
    assert done.returncode == 0, done.stderr
    assert {t["id"] for t in seats.daemon.call("list")} == before  # no second task
    (again,) = results(out)["runs"]
    assert again["task_id"] == first["id"] and again["judged"] and again["outcome"] == "passed", again
    assert [t["id"] for t in seats.daemon.call("list", key_prefix=f"eval:{data['suite']['run']}/")] == [first["id"]]


def test_another_users_submit_under_a_running_evals_next_key_is_their_own_task_never_the_evals(
        seats: SpecSeat, tmp_path: Path) -> None:
    """#41: keys are per submitter. While root's eval waits on its first spec, a user with only the submit
    right claims the key of its second with a spec that passes: that user gets a task of their own, sees
    none of root's keys, and the eval still runs its own second task, which fails as it must."""
    (seats.specs / "hijack").mkdir()
    seats.write("hijack/a.toml", 'prompt = "Ask first."\nmodel = "scripted:ask-done"\nreset = false\n'
                                 '[[checks]]\nanswer = "done"\n')
    seats.write("hijack/b.toml", 'prompt = "Say done."\nmodel = "scripted:say-done"\nreset = false\n'
                                 '[[checks]]\nname = "never"\nanswer = "re:^never$"\n')
    passes = seats.write("hijack-pass.toml", 'prompt = "Say done."\nmodel = "scripted:say-done"\nreset = false\n'
                                             '[[checks]]\nanswer = "done"\n')
    os.chmod(seats.daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(seats.daemon.socket, 0o666)
    out = tmp_path / "out"
    suite = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(seats.daemon.socket), "eval",
                              str(seats.specs / "hijack"), "--seats", "s1", "--out", str(out)],
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        def asking() -> dict[str, Any] | None:
            if not (out / "results.json").exists():
                return None
            runs = results(out)["runs"]
            task_id = runs[0].get("task_id") if runs else None
            pending = [a for a in seats.daemon.call("approvals") if a["task_id"] == task_id]
            return pending[0] if pending else None
        approval = wait_until(asking, 120, "the eval's first task to wait for its approval")
        data = results(out)
        runs_now = data["runs"]
        b_index = next(i for i, spec in enumerate(data["suite"]["specs"]) if spec.endswith("b.toml"))
        next_key = f"eval:{data['suite']['run']}/{b_index}/0/a1"
        claimed = cuctl(seats.daemon.socket, "submit", "--spec", str(passes), "--key", next_key, "--json",
                        prefix=AS_NOBODY)
        assert claimed.returncode == 0, claimed.stderr
        theirs = json.loads(claimed.stdout)
        assert theirs["existing"] is False
        # Root's keys are not the other user's to see, nor to find by key.
        seen = json.loads(cuctl(seats.daemon.socket, "list", "--json", prefix=AS_NOBODY).stdout)
        assert [t["key"] for t in seen if t["submitter"]["uid"] == 0] and \
            all(t["key"] is None for t in seen if t["submitter"]["uid"] == 0), seen
        mine = json.loads(cuctl(seats.daemon.socket, "list", "--key-prefix", "eval:", "--json",
                                prefix=AS_NOBODY).stdout)
        assert [t["id"] for t in mine] == [theirs["id"]]
        shown = json.loads(cuctl(seats.daemon.socket, "show", str(runs_now[0]["task_id"]), "--json",
                                 prefix=AS_NOBODY).stdout)
        assert shown["submitter"]["uid"] == 0 and shown["key"] is None, shown
        assert seats.daemon.task(runs_now[0]["task_id"])["key"] is not None  # root, who may approve, sees it
        seats.daemon.call("approve", id=approval["id"])
        stdout, stderr = suite.communicate(timeout=300)
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.communicate()  # and its pipes closed: a failed assert above must not leak them to a later test
    assert suite.returncode == 1, stderr  # b fails, by design
    runs = {Path(r["spec"]).stem: r for r in results(out)["runs"]}
    assert {n: r["outcome"] for n, r in runs.items()} == {"a": "passed", "b": "failed"}, runs
    # b failed on its own check, in its own task: not refused, not the other user's passing one.
    assert (runs["b"]["state"], runs["b"]["verdict"]) == ("succeeded", "failed"), runs["b"]
    assert runs["b"]["task_id"] not in (None, theirs["id"])
    b_task = seats.daemon.task(runs["b"]["task_id"])
    assert (b_task["submitter"]["uid"], b_task["key"]) == (0, next_key)
    assert seats.daemon.wait_state(theirs["id"], "succeeded")["submitter"]["uid"] == NOBODY.pw_uid


def test_ctrl_c_writes_what_is_known_and_says_how_to_resume(seats: SpecSeat, tmp_path: Path) -> None:
    # The only spec waits for an approval nobody gives: the suite is mid-run, its task in flight, at the SIGINT.
    (seats.specs / "asks").mkdir()
    seats.write("asks/asks.toml", 'prompt = "Ask, then say done."\nmodel = "scripted:ask-done"\n'
                                  '[[checks]]\nanswer = "done"\n')
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    proc = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(seats.daemon.socket), "eval",
                             str(seats.specs / "asks"), "--out", str(out), "--junit", str(junit)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    task_id = None
    try:
        def asking() -> int | None:
            try:
                flying = [r["task_id"] for r in results(out)["runs"] if r["task_id"] is not None]
            except (OSError, ValueError):
                return None
            ids = {a["task_id"] for a in seats.daemon.call("approvals")}
            return next((t for t in flying if t in ids), None)

        task_id = wait_until(asking, 120, "the suite's task to ask for approval")
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if task_id is not None:
            seats.daemon.call("cancel", id=task_id)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1] == (f"cuctl eval: interrupted with 0 of 1 runs done (results so far in {out / 'results.json'}, "
                         f"JUnit: {junit}); resume with: cuctl eval --resume {out}"), stderr
    assert "Traceback" not in stderr
    run = results(out)["runs"][0]
    assert run["task_id"] == task_id and not run["judged"] and run["outcome"] in ("running", "pending"), run
    cases = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    assert len(cases) == 1 and isinstance(cases[0].result[0], Skipped), cases
    assert (out / "index.html").exists()
