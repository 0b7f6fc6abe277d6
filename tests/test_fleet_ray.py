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
from tests.support.ray_cluster import ADDRESS, Fleet
from tests.support.recorder import wait_until

SCENARIOS = {
    "default": {"name": "default", "steps": [{"message": "done"}]},
    "say-done": {"name": "say-done", "steps": [{"message": "done"}]},
    # Long enough for a fault to land while it runs.
    "slow-done": {"name": "slow-done", "steps": [{"actions": [{"type": "wait"}], "delay": 4},
                                                 {"message": "done", "delay": 4}]},
}
MACHINES = ("w1", "w2", "w3")
FINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    cluster = Fleet(SCENARIOS)
    try:
        cluster.start({name: {"seats": 2} for name in MACHINES})
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
    run_id = results["suite"]["fleet_run"]
    tasks = [t for found in fleet.tasks(run_id + "/").values() for t in found]
    per_run = Counter(t["key"].rsplit("/a", 1)[0] for t in tasks if t["state"] in FINAL)
    assert len(per_run) == specs and set(per_run.values()) == {1}, per_run
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
