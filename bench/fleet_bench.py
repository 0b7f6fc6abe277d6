"""Fleets on Ray (issue 29): what a fleet task costs over a direct submit, a suite's throughput over 1, 2 and 3
nodes of 2 seats, and how long a node's death keeps its tasks from running again.

The fleet is the tests' (tests/support/ray_cluster.py): a head and worker machines, each with its
own daemon, two Xvfb seats and ``cud fleet join``, all in one network namespace on 127.0.0.1.

- overhead: one task of a model that answers at once, :data:`OVERHEAD_RUNS` times one after the
  other, through :func:`cud.fleet.attempt.run_attempt` on the node's socket (direct) and as a fleet
  task (``submit_attempt`` + ``ray.get``) from a driver; the difference of the medians.
- throughput: :data:`PER_SEAT` tasks a seat of a 1 s model (``delay`` 1) over 1, 2, then 3 nodes
  (nodes join between the runs), each timed after an untimed round of one task a seat in the same
  driver: Ray starts a job's workers on each node for its first tasks (a second or more of CPU
  each here) and reuses them for the rest of the job, so a suite of hundreds pays that once; tasks a
  second, its ratio to linear in seats, and how busy the machine's CPUs were
  meanwhile (every node shares them here: a ratio below linear with the CPUs near 100% is this
  machine's limit, not the fleet's).
- node death: two slow tasks on a node whose raylet is killed; from the kill to the registry's
  record of each retried attempt starting elsewhere.

Run alone: ``.venv/bin/python -m bench.fleet_bench``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import table
from tests.support.ray_cluster import Fleet

OVERHEAD_RUNS = 15
PER_SEAT = 4
SCENARIOS = {
    "default": {"name": "default", "steps": [{"message": "done"}]},
    "now": {"name": "now", "steps": [{"message": "done"}]},
    "one-second": {"name": "one-second", "steps": [{"message": "done", "delay": 1}]},
    "slow": {"name": "slow", "steps": [{"message": "done", "delay": 8}]},
}
SPEC = "{'prompt': 'Say done.', 'model': 'scripted:%s', 'reset': False, 'checks': [{'answer': 'done'}]}"

OVERHEAD = """
import statistics, time, uuid
from cud.fleet.attempt import run_attempt
from cud.fleet.remote import submit_attempt
spec = %(spec)s
run = uuid.uuid4().hex[:12]
direct, fleet = [], []
for i in range(%(runs)d + 2):
    t = time.perf_counter(); run_attempt(%(socket)r, spec=spec, files={}, key=f"{run}/d/{i}/a1")
    direct.append(time.perf_counter() - t)
    t = time.perf_counter(); ray.get(submit_attempt(f"{run}/{i}-f/0", spec, {}))
    fleet.append(time.perf_counter() - t)
print(json.dumps([statistics.median(direct[2:]), statistics.median(fleet[2:])]))
"""

THROUGHPUT = """
import time, uuid
from cud.fleet.remote import submit_attempt
def cpu():  # the machine's busy and total jiffies (/proc/stat's first line; idle and iowait are not busy)
    ticks = [int(n) for n in open("/proc/stat").readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)
spec = %(spec)s
run = uuid.uuid4().hex[:12]
ray.get([submit_attempt(f"{run}/{i}-w/0", spec, {}) for i in range(%(warm)d)])  # one a seat, all at once
idle_busy, idle_total = cpu()
time.sleep(3)  # the fleet idle: what its nodes, daemons and seats cost with no task
busy, total = cpu()
idle = (busy - idle_busy) / max(1, total - idle_total)
t = time.perf_counter()
ray.get([submit_attempt(f"{run}/{i}-t/0", spec, {}) for i in range(%(tasks)d)])
seconds = time.perf_counter() - t
busy2, total2 = cpu()
print(json.dumps([seconds, idle, (busy2 - busy) / max(1, total2 - total)]))
"""

DEATH_START = """
import uuid
from cud.fleet.remote import run_spec
from cud.fleet.labels import spec_resources
from cud.seat_needs import SeatNeeds
spec = %(spec)s
run = uuid.uuid4().hex[:12]
refs = [run_spec.options(resources=spec_resources(SeatNeeds()), max_retries=3).remote(f"{run}/{i}-d/0", spec, {})
        for i in range(%(tasks)d)]
ray.get(refs)
from cud.fleet.registry import registry
book = registry()
print(json.dumps([ray.get(book.history.remote(f"{run}/{i}-d/0")) for i in range(%(tasks)d)]))
"""


def run() -> str:
    fleet = Fleet(SCENARIOS)
    try:
        return _measure(fleet)
    finally:
        left = fleet.stop()
        if left:
            raise RuntimeError(f"processes outlived the bench's namespace: {left}")


def _measure(fleet: Fleet) -> str:
    fleet.start({"w1": {"seats": 2}})
    socket = str(fleet.machines["w1"].socket)
    direct, through = fleet.python(OVERHEAD % {"spec": SPEC % "now", "runs": OVERHEAD_RUNS, "socket": socket},
                                   timeout=900)
    rows: list[tuple[object, ...]] = [("task, direct run_attempt (p50)", f"{direct * 1000:.0f} ms"),
                                      ("task, as a fleet task (p50)", f"{through * 1000:.0f} ms"),
                                      ("fleet overhead (p50)", f"{(through - direct) * 1000:.0f} ms")]
    rates = []
    for nodes in (1, 2, 3):
        if nodes > 1:
            name = f"w{nodes}"
            fleet.wait_joined(fleet.add(name))
        tasks = PER_SEAT * 2 * nodes
        seconds, idle, busy = fleet.python(THROUGHPUT % {"spec": SPEC % "one-second", "tasks": tasks, "warm": 2 * nodes},
                                           timeout=900)
        rates.append(tasks / seconds)
        rows.append((f"{nodes} node(s), {2 * nodes} seats, {tasks} tasks of a 1 s model",
                     f"{tasks / seconds:.2f} tasks/s, {rates[-1] / (rates[0] * nodes):.2f}x linear; "
                     f"the machine's CPUs {busy:.0%} busy ({idle:.0%} idle fleet)"))
    rows.append(("node death to its tasks running again", _death(fleet)))
    return "### Fleets on Ray\n\n" + table(("what", "measured"), rows)


def _death(fleet: Fleet) -> str:
    """Kill w1's raylet while two slow tasks run on it; seconds from the kill to each retry's start."""
    victim = fleet.machines["w1"]
    log = fleet.dir / "death.log"
    driver = fleet.ns.popen([sys.executable, "-c", "import json, ray\nray.init(address='127.0.0.1:6379', "
                             "namespace='cud', logging_level='WARNING')\n" + DEATH_START % {"spec": SPEC % "slow",
                                                                                           "tasks": 6}],
                            env=fleet.env, log=log)
    deadline = time.monotonic() + 120
    while not any(t["state"] == "running" for t in victim.call("list")):
        if time.monotonic() > deadline:
            return "not measured: nothing ran on w1"
        time.sleep(0.2)
    killed = time.time()
    os.kill(fleet.raylet(victim), signal.SIGKILL)
    driver.wait(timeout=600)
    histories = json.loads(log.read_text().strip().splitlines()[-1])
    again = [h[1]["at"] - killed for h in histories if len(h) > 1]
    if not again:
        return "not measured: no task was retried"
    return f"{min(again):.1f} s to {max(again):.1f} s ({len(again)} tasks retried)"


if __name__ == "__main__":
    print(run())
