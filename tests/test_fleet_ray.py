"""Fleets on Ray (#29), end to end on a real cluster: a head and three worker machines, each with its own
daemon and two Xvfb seats, all inside one network namespace the module makes (tests/support/ray_cluster.py).

A suite of 12 specs runs over the fleet and is judged as a local run; then the faults: a worker's raylet
killed mid-task, a worker's daemon killed and restarted, the suite's driver dropped (``--detach``). After
each, every spec-run is judged exactly once, counted in every daemon's records by its key prefix, and the
results list the retries. A seat that dies is withdrawn from the pool and comes back. Without the fleet
extra, cud still imports and runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import ROOT
from tests.support.netns import Netns
from tests.support.ray_cluster import ADDRESS, Fleet
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers

SCENARIOS = {
    "default": {"name": "default", "steps": [{"message": "done"}]},
    "say-done": {"name": "say-done", "steps": [{"message": "done"}]},
    # Long enough for a fault to land while it runs.
    "ask-first": {"name": "ask-first", "steps": [{"actions": [{"type": "screenshot"}]},
                                                 {"actions": [{"type": "type", "text": "m"}]}, {"message": "done"}]},
    "slow-done": {"name": "slow-done", "steps": [{"actions": [{"type": "wait"}], "delay": 4},
                                                 {"message": "done", "delay": 4}]},
}
MACHINES = ("w1", "w2", "w3")
FINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    cluster = Fleet(SCENARIOS)
    try:
        # w2's s2 is the fleet's one seat tagged "wide": a spec needing it runs there and nowhere else.
        cluster.start({name: {"seats": 2, "seat_tags": {"s2": ["wide"]} if name == "w2" else {}} for name in MACHINES})
        yield cluster
    finally:
        left = cluster.stop()
        assert not left, f"Ray or cud processes outlived the namespace: {left}"


def write_suite(fleet: Fleet, name: str, count: int, scenario: str) -> Path:
    """``count`` specs, every third one failing its check by design."""
    folder = fleet.dir / name
    folder.mkdir()
    for i in range(count):
        check = 'answer = "re:finished"' if i % 3 == 2 else 'answer = "done"'
        (folder / f"t{i:02d}.toml").write_text(f'prompt = "Task {i} of {name}."\nmodel = "scripted:{scenario}"\nreset = false\n'
                                               f'[[checks]]\n{check}\n')
    return folder


def start_suite(fleet: Fleet, name: str, count: int, scenario: str) -> tuple[Path, Path, subprocess.Popen[bytes]]:
    """``write_suite``'s specs run over the fleet in the background: the suite's folder, cuctl's log, cuctl."""
    suite = write_suite(fleet, name, count, scenario)
    out, log = fleet.dir / f"{name}-out", fleet.dir / f"{name}-cuctl.log"
    return out, log, fleet.cuctl_popen("eval", "--fleet", ADDRESS, str(suite), "--out", str(out), log=log)


def results_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text())


def judged_once(fleet: Fleet, results: dict[str, Any], specs: int) -> list[dict[str, Any]]:
    """Every spec-run judged once in results.json and exactly once across every daemon's records; the runs."""
    runs = results["runs"]
    last = {}
    for run in runs:
        last[(run["spec"], run["repeat"])] = run
    assert len(last) == specs and all(r["judged"] for r in last.values()), runs
    assert all(r["state"] in FINAL for r in last.values()), [r for r in last.values() if r["state"] not in FINAL]
    tasks = [t for found in fleet.tasks(f"eval:{results['suite']['run']}/").values() for t in found]
    per_run = Counter(t["key"].rsplit("/a", 1)[0] for t in tasks if t["state"] in FINAL)
    # One ended task per spec-run, and one more for each attempt that ended error and was retried (--retry-errors):
    # every task the daemons ended is one results.json counts.
    counted = Counter(f"eval:{results['suite']['run']}/{results['suite']['specs'].index(r['spec'])}/{r['repeat']}"
                      for r in runs if r["state"] in FINAL)
    assert len(per_run) == specs and per_run == counted, (per_run, counted)
    open_tasks = [t for t in tasks if t["state"] not in FINAL + ("interrupted",)]
    assert not open_tasks, open_tasks
    return runs


def test_a_suite_spreads_over_the_nodes_and_is_judged_like_a_local_run(fleet: Fleet) -> None:
    suite = write_suite(fleet, "spread", 12, "say-done")
    out = fleet.dir / "spread-out"
    done = fleet.cuctl("eval", "--fleet", ADDRESS, str(suite), "--out", str(out), "--junit", str(out / "j.xml"))
    assert done.returncode == 1, done.stderr  # four specs fail by design
    assert "PASS RATE" in done.stdout and "total" in done.stdout
    results = results_of(out)
    runs = judged_once(fleet, results, 12)
    assert Counter(r["outcome"] for r in runs) == {"passed": 8, "failed": 4}
    assert {r["seat"].split("/")[0] for r in runs} == set(MACHINES)  # every machine took some
    assert all((out / r["report"]).is_file() for r in runs)
    assert (out / "index.html").is_file() and (out / "j.xml").is_file()


def test_a_suite_of_two_models_on_the_fleet_runs_every_spec_on_each_grouped_by_model(fleet: Fleet) -> None:
    suite = write_suite(fleet, "models", 3, "say-done")
    out, two = fleet.dir / "models-out", ["scripted:say-done", "scripted:default"]  # each plays the same part
    done = fleet.cuctl("eval", "--fleet", ADDRESS, str(suite), "--model", ",".join(two), "--out", str(out))
    assert done.returncode == 1, done.stderr  # t02 fails by design, on each model
    results = results_of(out)
    runs = results["runs"]
    assert sorted((Path(r["spec"]).stem, r["model"], r["outcome"]) for r in runs) == sorted(
        (f"t{i:02d}", m, "failed" if i == 2 else "passed") for i in range(3) for m in two)
    # Each model's runs are their own daemon tasks, under keys of their own.
    tasks = [t for found in fleet.tasks(f"eval:{results['suite']['run']}/").values() for t in found]
    assert sorted(t["model"] for t in tasks) == sorted(two * 3)
    assert [(g["model"], g["total"]["passed"], g["total"]["failed"]) for g in results["summary"]["models"]] == [
        (m, 2, 1) for m in two]
    rows = [line.split() for line in done.stdout.splitlines() if line.split() and line.split()[0] in (*two, "all")]
    assert [(r[0], Path(r[1]).stem) for r in rows] == [(m, n) for m in two for n in ("t00", "t01", "t02", "total")] + [
        ("all", "total")]


def retried(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attempts that were retried (interrupted ones, an error, the suite went past), each with why."""
    return [r for r in runs if r["state"] == "interrupted" and r["outcome"] == "error" and not r["judged"]]


def wait_running(fleet: Fleet, machine: str, prefix_of: Path, timeout: float = 120.0) -> None:
    """Until ``machine``'s daemon runs a task of the suite writing into ``prefix_of`` (its results.json)."""
    def running() -> bool:
        if not (prefix_of / "results.json").exists():
            return False
        run_id = results_of(prefix_of)["suite"].get("run")
        tasks = fleet.machines[machine].call("list", key_prefix=f"eval:{run_id}/") if run_id else []
        return any(t["state"] == "running" for t in tasks)

    wait_until(running, timeout, f"a fleet task running on {machine}")


def test_a_raylet_killed_mid_task_costs_one_retry_and_loses_nothing(fleet: Fleet) -> None:
    out, log, driver = start_suite(fleet, "raylet", 6, "slow-done")
    wait_running(fleet, "w1", out)
    os.kill(fleet.raylet(fleet.machines["w1"]), signal.SIGKILL)
    assert driver.wait(timeout=600) in (0, 1), log.read_text()
    runs = judged_once(fleet, results_of(out), 6)
    lost = retried(runs)
    assert lost and all(r["seat"].startswith("w1") for r in lost), runs
    assert all("retried as attempt 2" in r["reason"] for r in lost), lost
    assert {r["attempt"] for r in runs if r["judged"] and r["spec"] in {x["spec"] for x in lost}} == {2}
    # On w1's daemon the lost attempts were ended by its agent, naming the retry to come.
    run_id = results_of(out)["suite"]["run"]
    orphans = [t for t in fleet.machines["w1"].call("list", key_prefix=f"eval:{run_id}/") if t["state"] == "interrupted"]
    assert orphans and all("retries it as attempt 2" in t["reason"] for t in orphans), orphans
    fleet.wait_joined(fleet.machines["w1"])  # the agent joined again: the next test has three machines


def test_a_daemon_killed_and_restarted_under_its_tasks(fleet: Fleet) -> None:
    out, log, driver = start_suite(fleet, "restart", 6, "slow-done")
    machine = fleet.machines["w2"]
    wait_running(fleet, "w2", out)
    fleet.kill_daemon(machine)
    fleet.start_daemon(machine)
    assert driver.wait(timeout=600) in (0, 1), log.read_text()
    runs = judged_once(fleet, results_of(out), 6)
    lost = retried(runs)
    assert lost and all(r["seat"].startswith("w2") for r in lost), runs
    assert all("daemon stopped" in r["reason"] for r in lost), lost


def test_a_detached_suite_outlives_its_driver_and_is_read_back_from_the_head(fleet: Fleet) -> None:
    suite = write_suite(fleet, "detached", 6, "say-done")
    log = fleet.dir / "detach-cuctl.log"
    driver = fleet.cuctl_popen("eval", "--fleet", ADDRESS, str(suite), "--detach", "--json", log=log)
    job = wait_until(lambda: next((json.loads(line)["job"] for line in log.read_text().splitlines()
                                   if line.startswith("{")), None), 180, "the job's id")
    if driver.poll() is None:
        os.kill(Netns.inner_pid(driver), signal.SIGKILL)  # the driver dropped: the suite goes on on the head
    driver.wait(timeout=60)

    def done() -> bool:
        status = fleet.cuctl("fleet", "status", "--fleet", ADDRESS, job, "--json")
        return status.returncode == 0 and json.loads(status.stdout)["done"]

    wait_until(done, 600, f"{job} to finish")
    out = fleet.dir / "detached-out"
    back = fleet.cuctl("fleet", "results", "--fleet", ADDRESS, job, "--out", str(out))
    assert back.returncode == 1, back.stderr  # two fail by design
    runs = judged_once(fleet, results_of(out), 6)
    assert Counter(r["outcome"] for r in runs) == {"passed": 4, "failed": 2}
    assert all((out / r["report"]).is_file() for r in runs) and (out / "index.html").is_file()


def test_a_seat_that_dies_is_withdrawn_and_comes_back(fleet: Fleet) -> None:
    machine = fleet.machines["w3"]
    seats = ("cud_seat", "cud_seat_name:s2", "cud_seat_name:s1")
    wait_until(lambda: fleet.available(*seats) == (6.0, 3.0, 3.0), 120, "every seat free")
    fleet.kill_xvfb(machine, "s2")
    wait_until(lambda: machine.call("seats")[1]["state"] == "unavailable", 60, "w3's s2 unavailable")
    wait_until(lambda: fleet.available(*seats) == (5.0, 2.0, 3.0), 120, "w3's s2 withdrawn, nothing else")
    fleet.restart_xvfb(machine, "s2")
    wait_until(lambda: machine.call("seats")[1]["state"] != "unavailable", 60, "w3's daemon to have s2 again")
    wait_until(lambda: fleet.available(*seats) == (6.0, 3.0, 3.0), 120, "w3's s2 back in the fleet")


def test_an_approval_on_a_node_is_listed_and_answered_from_the_head(fleet: Fleet) -> None:
    spec = fleet.dir / "ask.toml"
    spec.write_text('prompt = "Type m, then say done."\nmodel = "scripted:ask-first"\napproval = "actions"\n'
                    'reset = false\n[[checks]]\nanswer = "done"\n')
    out = fleet.dir / "ask-cuctl.log"
    driver = fleet.cuctl_popen("submit", "--fleet", ADDRESS, "--spec", str(spec), log=out)

    def pending() -> list[dict[str, Any]]:
        listed = fleet.cuctl("fleet", "approvals", "--fleet", ADDRESS, "--json")
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)

    waiting = wait_until(pending, 300, "an approval on some node")
    assert len(waiting) == 1 and waiting[0]["node"] in MACHINES
    target = f"{waiting[0]['node']}:{waiting[0]['id']}"
    shown = fleet.cuctl("fleet", "approvals", "--fleet", ADDRESS)
    assert target in shown.stdout
    answered = fleet.cuctl("fleet", "approve", "--fleet", ADDRESS, target)
    assert answered.returncode == 0 and f"approval {target} approved" in answered.stdout, answered.stderr
    assert driver.wait(timeout=300) == 0, out.read_text()
    wrong = fleet.cuctl("fleet", "approve", "--fleet", ADDRESS, "nowhere:1")
    assert wrong.returncode == 2 and "no fleet node named 'nowhere'" in wrong.stderr


def test_specs_needing_a_seat_tag_run_only_on_the_seat_that_carries_it(fleet: Fleet) -> None:
    assert [s["tags"] for s in fleet.machines["w2"].call("seats")] == [[], ["wide"]]
    folder = fleet.dir / "wide"
    folder.mkdir()
    for i in range(3):
        (folder / f"w{i}.toml").write_text(f'prompt = "Wide task {i}."\nmodel = "scripted:say-done"\n'
                                           'seat_tags = ["wide"]\nreset = false\n[[checks]]\nanswer = "done"\n')
    out = fleet.dir / "wide-out"
    done = fleet.cuctl("eval", "--fleet", ADDRESS, str(folder), "--out", str(out))
    assert done.returncode == 0, done.stderr
    runs = judged_once(fleet, results_of(out), 3)
    assert {r["seat"] for r in runs} == {"w2/s2"} and {r["outcome"] for r in runs} == {"passed"}, runs
    tasks = fleet.machines["w2"].call("list", key_prefix=f"eval:{results_of(out)['suite']['run']}/")
    assert len(tasks) == 3 and all(t["seat_tags"] == ["wide"] and t["seat"] == "s2" for t in tasks), tasks


def test_a_run_waiting_for_a_withdrawn_seat_says_why_on_a_log(fleet: Fleet) -> None:
    """The one seat tagged wide (w2's s2) withdrawn: a spec needing it waits, and cuctl eval, its stderr a file,
    says why at once; the seat back, the run is taken and passes."""
    machine = fleet.machines["w2"]
    wait_until(lambda: fleet.available("cud_tag:wide") == (1.0,), 120, "w2's s2 free")
    fleet.kill_xvfb(machine, "s2")
    driver = None
    try:
        wait_until(lambda: fleet.available("cud_tag:wide") == (0.0,), 120, "w2's s2 withdrawn")
        folder = fleet.dir / "wait-wide"
        folder.mkdir()
        (folder / "w.toml").write_text('prompt = "Wide, later."\nmodel = "scripted:say-done"\nseat_tags = ["wide"]\n'
                                       'reset = false\n[[checks]]\nanswer = "done"\n')
        out, log = fleet.dir / "wait-wide-out", fleet.dir / "wait-wide-cuctl.log"
        driver = fleet.cuctl_popen("eval", "--fleet", ADDRESS, str(folder), "--out", str(out), log=log)
        wait_until(lambda: "cuctl eval: waiting:" in log.read_text(), 120, "a line saying why the run waits")
        said = next(line for line in log.read_text().splitlines() if "cuctl eval: waiting:" in line)
        assert said == ("cuctl eval: waiting: no fleet node has a free seat for them now (busy or withdrawn): "
                        "1 run needs tag wide"), said
    finally:
        fleet.restart_xvfb(machine, "s2")
        if driver is not None:
            try:
                driver.wait(timeout=300)
            except subprocess.TimeoutExpired:
                os.kill(Netns.inner_pid(driver), signal.SIGKILL)
                driver.wait()
                raise
    assert driver.returncode == 0, log.read_text()
    assert results_of(out)["runs"][0]["outcome"] == "passed" and results_of(out)["runs"][0]["seat"] == "w2/s2"


def test_a_spec_no_node_could_take_is_refused_before_submission_and_the_rest_runs(fleet: Fleet) -> None:
    """A spec needing a screen and a tag no seat of any node has is a refused, failed run, never started (Ray would
    hold it for ever), with why: the need and every node's seats; the suite's other specs run."""
    folder = fleet.dir / "impossible"
    folder.mkdir()
    (folder / "huge.toml").write_text('prompt = "Huge."\nmodel = "scripted:say-done"\nscreen = "3840x2160"\n'
                                      'seat_tags = ["gpu"]\nreset = false\n[[checks]]\nanswer = "done"\n')
    for i in range(2):
        (folder / f"ok{i}.toml").write_text(f'prompt = "Fine {i}."\nmodel = "scripted:say-done"\nreset = false\n'
                                            '[[checks]]\nanswer = "done"\n')
    out = fleet.dir / "impossible-out"
    # Before, the suite never ended (Ray held huge.toml's task for ever): bounded here, so that fails, not hangs.
    done = fleet.cuctl("eval", "--fleet", ADDRESS, str(folder), "--out", str(out), "--junit", str(out / "j.xml"),
                       timeout=300)
    assert done.returncode == 1, done.stderr
    results = results_of(out)
    runs = {Path(r["spec"]).name: r for r in results["runs"]}
    huge = runs["huge.toml"]
    assert (huge["state"], huge["outcome"], huge["judged"], huge["task_id"]) == ("refused", "failed", True, None), huge
    why = huge["error"]["message"]
    assert huge["error"]["kind"] == "not_found" and why.startswith(
        f"not submitted: {folder / 'huge.toml'} needs screen 3840x2160, tag gpu, which no seat of the fleet's nodes "
        "offers; their seats: "), why
    assert "w1/s1 (screen 1024x768, no tags)" in why and "w2/s2 (screen 1024x768, tags wide)" in why, why
    assert "huge.toml #1: failed: refused: not submitted:" in done.stderr and why in (out / "j.xml").read_text()
    assert {n: r["outcome"] for n, r in runs.items() if n != "huge.toml"} == {"ok0.toml": "passed", "ok1.toml": "passed"}
    # Nothing of it reached a daemon: only the two others were submitted, once each.
    tasks = [t for found in fleet.tasks(f"eval:{results['suite']['run']}/").values() for t in found]
    assert sorted(t["prompt"] for t in tasks) == ["Fine 0.", "Fine 1."], tasks


def test_leave_drains_the_node_and_it_leaves(fleet: Fleet) -> None:
    machine = fleet.machines["w3"]
    assert machine.agent is not None
    left = fleet.ns.run([sys.executable, "-m", "cud.daemon.main", "fleet", "leave", "--socket", str(machine.socket)],
                        env=fleet.env, timeout=300)
    assert left.returncode == 0, left.stderr
    assert machine.agent.wait(timeout=120) == 0, machine.log("agent")
    wait_until(lambda: "w3" not in fleet.nodes(), 120, "w3 to leave the fleet")
    again = fleet.ns.run([sys.executable, "-m", "cud.daemon.main", "fleet", "leave", "--socket", str(machine.socket)],
                         env=fleet.env, timeout=60)
    assert again.returncode == 2 and "no 'cud fleet join' runs" in again.stderr


def test_a_node_whose_user_may_not_operate_refuses_a_spec_with_setup(fleet: Fleet, seat_users: SeatUsers) -> None:
    """A node run as a user of its own (as cud-fleet.service runs it) with only the submit right: a spec whose
    setup runs in a seat's session is refused there, and the suite says why; a spec without one runs."""
    user = seat_users.make()
    machine = fleet.add("w4", seat_prefix="u", user=user, config=f'[access]\nsubmit_users = ["{user.name}"]\n')
    fleet.wait_joined(machine)
    folder = fleet.dir / "rights"
    folder.mkdir()
    plain = 'prompt = "Say done."\nmodel = "scripted:say-done"\nreset = false\n'
    (folder / "a-setup.toml").write_text(f'{plain}seat = "u1"\n[[setup]]\nrun = ["true"]\n[[checks]]\nanswer = "done"\n')
    (folder / "b-plain.toml").write_text(f'{plain}seat = "u2"\n[[checks]]\nanswer = "done"\n')
    out = fleet.dir / "rights-out"
    done = fleet.cuctl("eval", "--fleet", ADDRESS, str(folder), "--out", str(out))
    runs = {Path(r["spec"]).name: r for r in results_of(out)["runs"]}
    refused, ran = runs["a-setup.toml"], runs["b-plain.toml"]
    why = (f"user {user.name!r} (uid {user.uid}) may not submit a spec whose 'setup[0].run' acts in a seat's "
           "session: not in [access] operate_users/operate_groups")
    assert refused["state"] == "refused" and refused["seat"] == "w4", refused
    assert why in refused["error"]["message"], refused
    # A right the node's user lacks is cud's deployment, not the app: an error (cud.outcome), never retried.
    assert refused["outcome"] == "error" and refused["judged"] and len(runs) == 2, refused
    assert f"a-setup.toml #1: error on w4: refused: {why}" in done.stderr, done.stderr
    assert done.returncode == 3, done.stderr
    assert (ran["state"], ran["outcome"], ran["seat"]) == ("succeeded", "passed", "w4/u2"), ran
    # The node reached its daemon as its own user: that user submitted, and nothing of the refused spec is there.
    # (A key is its submitter's: root's key_prefix finds root's own; root, an approver, sees every task's key.)
    prefix = f"eval:{results_of(out)['suite']['run']}/"
    assert machine.call("list", key_prefix=prefix) == []
    tasks = [t for t in machine.call("list") if (t["key"] or "").startswith(prefix)]
    assert [t["submitter"]["name"] for t in tasks] == [user.name], tasks


def test_a_machine_lost_mid_task_comes_back_and_names_the_retries(fleet: Fleet) -> None:
    """Its daemon, Ray node and agent killed at once (the VM lost): Ray retries its tasks on the other nodes;
    back, its daemon (which ended them at start-up) names each retry, and every spec is judged once."""
    out, log, driver = start_suite(fleet, "lost", 6, "slow-done")  # six free seats: w1 takes two
    machine = fleet.machines["w1"]
    wait_running(fleet, "w1", out)
    fleet.kill_machine(machine)
    assert driver.wait(timeout=600) in (0, 1), log.read_text()
    lost = retried(results_of(out)["runs"])
    assert lost and all(r["seat"] == "w1" and "retried as attempt 2 on" in r["reason"] for r in lost), lost

    fleet.start_daemon(machine)
    fleet.join(machine, machine.extra["index"])
    fleet.wait_joined(machine)
    run_id = results_of(out)["suite"]["run"]

    def named() -> list[dict[str, Any]] | None:
        old = machine.call("list", key_prefix=f"eval:{run_id}/")
        return old if old and all("; retried as attempt 2 on " in (t["reason"] or "") for t in old) else None

    try:
        old = wait_until(named, 120, "w1's lost attempts to name their retries")
    except AssertionError as timeout:
        seen = [(t["id"], t["key"], t["state"], t["reason"]) for t in machine.call("list")]
        agent = (machine.dir / "agent.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"{timeout}: w1's tasks {seen}; its agent's log ends:\n{agent}") from None
    assert len(old) == len(lost) and all(t["state"] == "interrupted" for t in old), old
    assert all(t["reason"].startswith("the daemon stopped while the task was running") for t in old), old
    judged_once(fleet, results_of(out), 6)


def test_a_suite_resumed_after_its_driver_died_follows_its_tasks_again(fleet: Fleet) -> None:
    """``cuctl eval --fleet`` killed mid-suite, then ``--resume``: its runs in flight are followed again on their
    nodes by their keys (the Ray tasks died with the driver, the daemon tasks did not), none run twice."""
    out, log, driver = start_suite(fleet, "resume", 6, "slow-done")
    wait_running(fleet, "w2", out)
    os.kill(Netns.inner_pid(driver), signal.SIGKILL)
    driver.wait(timeout=60)
    assert any(r["state"] == "queued" for r in results_of(out)["runs"])  # in flight when it died
    done = fleet.cuctl("eval", "--fleet", ADDRESS, "--resume", str(out))
    assert done.returncode == 1 and "total" in done.stdout, done.stdout + done.stderr  # two fail by design
    runs = judged_once(fleet, results_of(out), 6)
    assert not retried(runs) and {r["attempt"] for r in runs} == {1}, runs


def test_cud_imports_and_runs_without_ray() -> None:
    """Without the fleet extra: cud, cuctl and cud run import; the fleet commands name the extra to install."""
    hide = ("import sys; sys.modules['ray'] = None\n")
    code = hide + ("import cud.daemon.main, cud.cuctl.main, cud.fleet.attempt, cud.daemon.fleet.cli\n"
                   "from cud.cuctl.main import main\n"
                   "sys.exit(main(['eval', '--fleet', '127.0.0.1:1', 'nowhere.toml']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert "needs the fleet extra: pip install 'cud[fleet]'" in done.stderr, done.stderr


def test_submit_over_a_fleet_refuses_the_flags_it_would_not_carry(tmp_path: Path) -> None:
    """``cuctl submit --fleet`` runs the spec file as written: a flag it would drop is refused by name, before
    any cluster is reached."""
    spec = tmp_path / "t.toml"
    spec.write_text('prompt = "Say done."\n')
    done = subprocess.run([sys.executable, "-m", "cud.cuctl.main", "submit", "--fleet", "127.0.0.1:1", "--spec",
                           str(spec), "--seat", "s2", "--max-steps", "3"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert "--seat, --max-steps would be lost: put it in the spec" in done.stderr, done.stderr

