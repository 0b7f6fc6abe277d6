"""Three outcomes end to end (cud/outcome.py), on a real seat and daemon: passed, failed (the task's own) and
error (cud could not do its part) told apart in cuctl eval's table, results.json, JUnit, the index, the exit
status and the metrics; --retry-errors reruns an error run, never a failed one; a check whose accessibility
bus is killed mid-task is an error, not a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml, Properties
from prometheus_client.parser import text_string_to_metric_families

from tests.support.a11y import stop_group
from tests.support.daemon import ROOT, cuctl
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

SCENARIOS = {
    "say-done": {"name": "say-done", "steps": [{"message": "done"}]},
    "slow-done": {"name": "slow-done", "steps": [{"message": "done", "delay": 4}]},
}
NOWHERE = "/nonexistent/cud-no-such-program"
SPECS = {
    "pass": 'model = "scripted:say-done"\n[[checks]]\nanswer = "done"\n',
    # It looked, and the model said otherwise: the task's own failure.
    "fail": 'model = "scripted:say-done"\n[[checks]]\nname = "says finished"\nanswer = "re:finished"\n',
    # The check's command does not start: the check could not look.
    "error": f'model = "scripted:say-done"\n[[checks]]\nname = "runs"\ncommand = ["{NOWHERE}"]\n',
}


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, {"name": "none", "steps": [{"message": "unused"}]}, scenarios=SCENARIOS) as s:
        for name, text in SPECS.items():
            (s.specs / "suite").mkdir(exist_ok=True)
            (s.specs / name).mkdir()
            s.write(f"suite/{name}.toml", f'prompt = "The {name} task."\n' + text)
            s.write(f"{name}/{name}.toml", f'prompt = "The {name} task."\n' + text)
        yield s


def eval_(seat: SpecSeat, *args: str) -> subprocess.CompletedProcess[str]:
    return cuctl(seat.daemon.socket, "eval", *args, timeout=600)


def outcomes_metric(seat: SpecSeat) -> dict[str, float]:
    text = cuctl(seat.daemon.socket, "metrics").stdout
    return {s.labels["outcome"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "cud_task_outcomes_total"}


def by_name(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in data["runs"]:
        runs.setdefault(Path(r["spec"]).stem, []).append(r)
    return runs


def test_each_outcome_in_the_table_results_junit_index_and_metrics(seat: SpecSeat, tmp_path: Path) -> None:
    before = outcomes_metric(seat)
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = eval_(seat, str(seat.specs / "suite"), "--out", str(out), "--junit", str(junit))
    assert done.returncode == 1, done.stderr  # one failed: a failure wins over an error
    data = json.loads((out / "results.json").read_text())
    runs = by_name(data)
    # The error run was retried once (--retry-errors' default), and is judged error; the failed one never retried.
    assert [(r["attempt"], r["outcome"], r["judged"]) for r in runs["error"]] == [(1, "error", False),
                                                                                  (2, "error", True)], runs["error"]
    assert [(r["attempt"], r["outcome"]) for r in runs["fail"]] == [(1, "failed")]
    assert [(r["attempt"], r["outcome"]) for r in runs["pass"]] == [(1, "passed")]
    check = runs["error"][0]["checks"][0]
    assert check["outcome"] == "error" and check["why"].startswith("could not look:") and not check["passed"], check
    assert runs["error"][0]["verdict"] == "error" and runs["fail"][0]["verdict"] == "failed"
    total = data["summary"]["total"]
    assert (total["passed"], total["failed"], total["error"], total["retried_attempts"]) == (1, 1, 1, 1)
    assert total["pass_rate"] == 0.5  # over the runs told: the error is not a failure
    error_run = next(r for r in data["summary"]["spec_runs"] if r["spec"].endswith("error.toml"))
    assert error_run["outcome"] == "error" and [a["outcome"] for a in error_run["attempts"]] == ["error", "error"]
    # The table: an ERROR column, in each spec's line and the total.
    lines = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert lines["SPEC"][:5] == ["SPEC", "RUNS", "PASSED", "FAILED", "ERROR"], done.stdout
    assert lines["total"][1:5] == ["3", "1", "1", "1"], done.stdout
    error_line = next(v for k, v in lines.items() if k.endswith("error.toml"))
    assert error_line[1:5] == ["1", "0", "0", "1"], done.stdout
    # JUnit: <error> for the error run (with its why), <failure> for the failed one; the counts agree.
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    cases = {Path(case.classname).stem: case for case in suite}
    assert [type(r) for r in cases["error"].result] == [Error], cases["error"].result
    assert cases["error"].result[0].message.startswith("runs: could not look:")
    assert [type(r) for r in cases["fail"].result] == [Failure] and not cases["pass"].result
    assert (suite.tests, suite.failures, suite.errors) == (3, 1, 1)
    attempts = {p.name: p.value for props in cases["error"].iterchildren(Properties) for p in props}
    assert attempts["attempts"] == "2" and attempts["attempt 1"].startswith("error, task ")
    # The index: its own error column and count, a cost column, numbers for people.
    index = (out / "index.html").read_text()
    assert "<th>error</th>" in index and "<th>cost</th>" in index and '<td class="error">error, retried</td>' in index
    assert '<td class="n">1.00</td>' in index and '<td class="n">0.00</td>' in index  # scores to 2 decimals
    # The metrics: the daemon counts each task by outcome (two error attempts, one failed, one passed).
    after = outcomes_metric(seat)
    assert {k: after[k] - before.get(k, 0) for k in after} == {"passed": 1, "failed": 1, "error": 2}


def test_the_exit_status_of_eval_submit_and_follow_for_each_outcome(seat: SpecSeat, tmp_path: Path) -> None:
    only_error = eval_(seat, str(seat.specs / "error"), "--retry-errors", "0", "--out", str(tmp_path / "e"))
    assert only_error.returncode == 3, only_error.stderr  # none failed, one errored
    assert [r["attempt"] for r in json.loads((tmp_path / "e" / "results.json").read_text())["runs"]] == [1]
    # --resume keeps the attempts made; with --retry-errors it retries what that now allows, and no more.
    assert eval_(seat, "--resume", str(tmp_path / "e")).returncode == 3
    assert eval_(seat, "--resume", str(tmp_path / "e"), "--retry-errors", "1").returncode == 3
    resumed = json.loads((tmp_path / "e" / "results.json").read_text())
    assert [(r["attempt"], r["outcome"]) for r in resumed["runs"]] == [(1, "error"), (2, "error")]
    assert resumed["suite"]["retry_errors"] == 1
    assert eval_(seat, str(seat.specs / "pass"), "--out", str(tmp_path / "p")).returncode == 0
    assert eval_(seat, str(seat.specs / "fail"), "--retry-errors", "3", "--out", str(tmp_path / "f")).returncode == 1
    assert len(json.loads((tmp_path / "f" / "results.json").read_text())["runs"]) == 1  # failed: never retried
    bad = eval_(seat, str(seat.specs / "pass"), "--retry-errors", "11", "--out", str(tmp_path / "b"))
    assert bad.returncode == 2 and "--retry-errors must be 0 to 10, got 11" in bad.stderr
    for name, status in (("pass", 0), ("fail", 1), ("error", 3)):
        code, task = seat.submit(seat.specs / name / f"{name}.toml")
        assert code == status, (name, task)
        assert cuctl(seat.daemon.socket, "follow", str(task["id"])).returncode == status

    # A setup step: a command that ran and exited 3 is the task's failure; one that did not start is cud's.
    for argv, fault, status in ((["/bin/sh", "-c", "exit 3"], "task", 1), ([NOWHERE], "cud", 3)):
        spec = seat.write(f"setup-{fault}.toml", f'prompt = "p"\nmodel = "scripted:say-done"\n[[setup]]\n'
                                                 f'run = {json.dumps(argv)}\n[[checks]]\nanswer = "done"\n')
        code, task = seat.submit(spec)
        assert (code, task["error"]["kind"], task["error"]["details"]["fault"]) == (status, "setup_failed", fault), task


ELEMENT = ('prompt = "Wait, then say done."\nmodel = "scripted:slow-done"\nreset = false\n'
           '[[checks]]\nname = "the dialog"\nelement = { app = "cud-no-such-app", role = "dialog" }\n')


def test_a_check_whose_accessibility_bus_is_killed_mid_task_is_an_error_and_is_retried(
        seat_users: SeatUsers, tmp_path: Path) -> None:
    with spec_seat(seat_users, {"name": "none", "steps": [{"message": "unused"}]}, scenarios=SCENARIOS) as s:
        (s.specs / "bus").mkdir()
        spec = s.write("bus/element.toml", ELEMENT)
        code, task = s.submit(spec)  # the bus answers: it looked, and no such element is there
        assert code == 1 and task["verdict"]["verdict"] == "failed", task
        assert task["verdict"]["checks"][0]["outcome"] == "failed"
        out = tmp_path / "out"
        proc = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(s.daemon.socket), "eval",
                                 str(s.specs / "bus"), "--out", str(out), "--retry-errors", "1"],
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            def running() -> bool:  # the model is thinking (4 s): the bus goes away under the task
                return any(t["state"] == "running" for t in s.daemon.call("list"))

            wait_until(running, 120, "the suite's task to run")
            stop_group(s.bus.launcher)  # the accessibility bus (at-spi-bus-launcher and its dbus-daemon), by pid
            stdout, stderr = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 3, (stdout, stderr)  # an error, not a failure
        runs = json.loads((out / "results.json").read_text())["runs"]
        assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "error"), (2, "error")], runs
        for r in runs:
            [check] = r["checks"]
            assert check["outcome"] == "error" and check["why"].startswith("could not look:"), check
            assert "org.a11y.Bus" in check["why"], check  # the launcher is gone: nobody answers for the bus
            assert s.daemon.task(r["task_id"])["verdict"]["errors"] == 1
