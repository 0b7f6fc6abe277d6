"""Seats (issue 11): aggregate steps per second, daemon CPU per step, and memory, as one daemon drives
1 to 50 displays.

Every seat is a private 1280x800 Xvfb showing a focused one-line Tk entry: over the
benchmarks' busy scene (a photo-like half and a text half, ``bench/scene.py``) when
the run has at most 8 seats, alone on the bare screen (the light scene, ``--scene``)
when it has more, so that 50 X servers and their windows fit in memory. A task is
``TURNS`` model turns of the scripted model: look, then ``TURNS - 2`` turns that
each click into the entry and type one letter (so every screenshot differs a little
from the last, as in a real task), then the final answer. One daemon per seat count (``--seat s0=:N ...``):

1. warm-up: one task pinned to each seat, so every seat has grabbed, encoded and
   allocated its buffers before anything is measured (not counted);
2. one round per model latency (0 s: the CPU ceiling of the machine; 1 s: a model
   that thinks): ``TASKS_PER_SEAT x seats`` tasks submitted at once, unpinned, so
   the daemon's dispatcher spreads them;
3. memory (VmRSS of the daemon) a moment after the last round, every seat idle.

Steps per second = the steps the daemon recorded for the round's tasks (its
``steps`` column: one per model turn; checked against the scripted model's count
of requests) / (the last task's ``finished_at`` - the first task's ``created_at``),
both the daemon's own timestamps (millisecond resolution), so polling adds nothing.
CPU per step is read from /proc (utime + stime) for the daemon, the benchmark process
(the scripted model's HTTP threads) and the X side (every Xvfb and Tk window). The
bench asks the daemon whether a round has ended only every POLL_SECONDS, one ``show``
of one task at a time, so the daemon's CPU is the steps', not the bench's polling.
A seat's step (seats / steps per second) is split into the model's answer (the scripted
model's mean time from a request's headers to its answer written) and the rest: the
daemon's side, where a busy daemon's queueing shows.

Run alone: ``.venv/bin/python -m bench.seats_bench [--seats 1,2 --tasks 1 --turns 4 --driver-processes]``;
``--daemon-env MALLOC_ARENA_MAX=1`` and the like try the daemon under other settings.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # also runnable as a file, like the other benchmarks

from bench.procstat import Memory, children, cpu_seconds, descendants, memory, summed_memory
from bench.scene import show_busy_scene, show_entry
from bench.stats import table
from cud.cuctl.client import Client
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon
from tests.support.xserver import XServer, start_xvfb, stop_process

SEAT_COUNTS = (1, 2, 4, 8, 16, 50)
#: The most seats a run shows the busy scene on; past it every seat gets the light one (its own
#: Python, PIL and Tk for the scene are what would not fit 50 times).
BUSY_SCENE_SEATS = 8
#: How often a round's end is looked for: rarely, so the bench's requests are no part of the daemon's CPU.
POLL_SECONDS = 2.0
ROUND_TIMEOUT = 1800.0
LATENCIES = (0.0, 1.0)
TASKS_PER_SEAT = 3
TURNS = 40  # issue 20: long enough that a history replayed whole would show
WIDTH, HEIGHT = 1280, 800
#: The targets: 8 seats at least 7x one seat's steps/s with a 1 s model, 50 seats at least 40x; at most
#: 10 MiB per added seat; at most 25 ms of the daemon's CPU (its process and its driver processes) per step.
TARGET_SCALING = 7.0
TARGET_SCALING_50 = 40.0
TARGET_MIB_PER_SEAT = 10.0
TARGET_CPU_MS = 25.0
_ENTRY_X, _ENTRY_Y = 40, HEIGHT - 80
_DONE = ("succeeded", "failed", "cancelled", "interrupted")


def scenario(turns: int) -> dict[str, object]:
    # Clicks walk along the entry: the caret moves and a letter appears, a band or two change.
    edits = [{"actions": [{"type": "click", "button": "left", "x": _ENTRY_X + 200 + 7 * (n % 20), "y": _ENTRY_Y + 18},
                          {"type": "type", "text": "abcdefghijklmnopqrstuvwxyz"[n % 26]}]} for n in range(turns - 2)]
    return {"name": "bench-seats", "steps": [{"actions": [{"type": "screenshot"}]}, *edits, {"message": "done"}]}


@dataclass
class Screen:
    xvfb: XServer
    apps: list[subprocess.Popen[str]]

    def pids(self) -> list[int]:
        return [self.xvfb.pid, *(app.pid for app in self.apps)]


@contextlib.contextmanager
def screens(count: int, busy: bool = True) -> Iterator[list[Screen]]:
    """``count`` private Xvfbs, each with the entry, over the busy scene if ``busy``; everything stopped by pid
    after."""
    made: list[Screen] = []
    workdir = Path(tempfile.mkdtemp(prefix="cud-bench-seats-"))
    try:
        for n in range(count):
            log_dir = workdir / f"x{n}"
            log_dir.mkdir()
            screen = Screen(start_xvfb(log_dir, WIDTH, HEIGHT), [])
            made.append(screen)
            if busy:
                screen.apps.append(show_busy_scene(screen.xvfb.display, WIDTH, HEIGHT))
            screen.apps.append(show_entry(screen.xvfb.display, f"400x36+{_ENTRY_X}+{_ENTRY_Y}"))
        yield made
    finally:
        for screen in made:
            for app in screen.apps:
                stop_process(app)  # type: ignore[arg-type]
            screen.xvfb.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass(frozen=True)
class Round:
    seats: int
    latency: float
    tasks: int
    steps: int
    wall: float  # seconds, first created_at to last finished_at
    spread: tuple[int, int]  # fewest and most tasks one seat ran
    #: CPU seconds of the daemon's process, its driver processes (the fork server and one per seat), the
    #: scripted model, the X side
    cpu: tuple[float, float, float, float]
    peak_pss: int  # KiB: the most the daemon and its driver processes held while the round ran (every 0.2 s)
    model_seconds: float  # the scripted model's mean time per answer (its latency and its own work)

    @property
    def rate(self) -> float:
        return self.steps / self.wall

    @property
    def step_seconds(self) -> float:
        """A seat's step, from one answer to the next, as ``seats / rate``: each seat has its share of the
        round's tasks from the start, so only the round's ragged end (seats done before the last) adds to it."""
        return self.seats / self.rate


@dataclass(frozen=True)
class SeatCount:
    seats: int
    #: The daemon and its driver processes, summed: right after start-up, before any task
    idle: Memory
    after: Memory  # after the warm-up and every round, all seats idle again
    after_daemon: Memory  # of which the daemon's own process
    rounds: list[Round]


def driver_processes(daemon: int) -> list[int]:
    """The daemon's fork server and the driver processes it forked (cud.drivers.forker), not its other
    children (a video recording's ffmpeg)."""
    servers = [pid for pid in children(daemon) if b"cud.drivers.forker" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return [*servers, *(pid for server in servers for pid in descendants(server))]


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()  # Python 3.11 reads the trailing Z


def _submit(daemon: Daemon, count: int, seats: list[str] | None = None) -> list[int]:
    with Client(daemon.socket) as client:
        return [client.call("submit", prompt=f"seat bench {n}", **({"seat": seats[n]} if seats else {}))["id"]
                for n in range(count)]


def _finish(daemon: Daemon, ids: list[int], turns: int) -> list[dict[str, object]]:
    """Wait for the tasks ``ids`` to end, asking for one task every POLL_SECONDS (oldest first: once it
    has ended the next is asked at once); then each one, checked."""
    deadline = time.monotonic() + ROUND_TIMEOUT
    pending = sorted(ids)
    with Client(daemon.socket) as client:
        while pending:
            if daemon.proc is None or daemon.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited; log:\n{daemon.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(pending)} of {len(ids)} tasks had not ended after {ROUND_TIMEOUT:g} s")
            while pending and client.call("show", id=pending[0])["state"] in _DONE:
                pending.pop(0)
            if pending:
                time.sleep(POLL_SECONDS)
        tasks = [client.call("show", id=task_id) for task_id in ids]
    bad = [t for t in tasks if t["state"] != "succeeded" or t["steps"] != turns]
    if bad:
        raise RuntimeError(f"{len(bad)} tasks did not succeed in {turns} steps, e.g. {bad[0]}")
    return list(tasks)


def run_round(daemon: Daemon, model: ScriptedModel, seats: int, tasks: int, turns: int, latency: float,
              x_pids: list[int]) -> Round:
    assert daemon.proc is not None
    model.latency = latency  # read before every answer
    requests, answers = len(model.request_bytes), len(model.answer_seconds)
    drivers = driver_processes(daemon.proc.pid)  # every seat has had its driver process since the warm-up

    def cpu_now() -> tuple[float, float, float, float]:
        assert daemon.proc is not None
        return (cpu_seconds(daemon.proc.pid), sum(map(cpu_seconds, drivers)), time.process_time(),
                sum(map(cpu_seconds, x_pids)))

    cpu_before = cpu_now()
    peak, running = [0], threading.Event()

    def sample(pid: int = daemon.proc.pid) -> None:
        while not running.wait(0.2):
            peak[0] = max(peak[0], summed_memory([pid, *drivers]).pss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        done = _finish(daemon, _submit(daemon, seats * tasks), turns)
    finally:
        running.set()
        sampler.join()
    cpu_after = cpu_now()
    if sorted(driver_processes(daemon.proc.pid)) != sorted(drivers):
        raise RuntimeError("the daemon's driver processes changed during the round: their CPU would be lost")
    steps = sum(int(t["steps"]) for t in done)  # type: ignore[call-overload]
    if len(model.request_bytes) - requests != steps:
        raise RuntimeError(f"the model answered {len(model.request_bytes) - requests} requests for {steps} steps")
    wall = max(_epoch(str(t["finished_at"])) for t in done) - min(_epoch(str(t["created_at"])) for t in done)
    per_seat = Counter(str(t["seat"]) for t in done)
    spread = (min(per_seat.values()) if len(per_seat) == seats else 0, max(per_seat.values()))
    cpu = tuple(b - a for a, b in zip(cpu_before, cpu_after, strict=True))
    answered = model.answer_seconds[answers:]
    return Round(seats, latency, len(done), steps, wall, spread, cpu, peak[0],  # type: ignore[arg-type]
                 sum(answered) / max(1, len(answered)))


def measure_seats(shown: list[Screen], model: ScriptedModel, url: str, tasks: int, turns: int,
                  latencies: tuple[float, ...], env: dict[str, str] | None = None,
                  config: str | None = None) -> SeatCount:
    names = [f"s{n}" for n in range(len(shown))]
    daemon = Daemon("", url, seats=dict(zip(names, (s.xvfb.display for s in shown), strict=True)), max_steps=turns + 2,
                    extra_env=env, config=config)
    try:
        daemon.start()
        assert daemon.proc is not None
        views = daemon.call("seats")
        if [v["name"] for v in views] != names or any(v["state"] != "idle" for v in views):
            raise RuntimeError(f"the daemon's seats are not all idle: {views}")
        time.sleep(1.0)  # start-up's last allocations and checks
        idle = summed_memory([daemon.proc.pid, *driver_processes(daemon.proc.pid)])
        model.latency = 0.0
        _finish(daemon, _submit(daemon, len(names), names), turns)  # warm-up: one task pinned to each seat
        x_pids = [pid for screen in shown for pid in screen.pids()]
        rounds = [run_round(daemon, model, len(names), tasks, turns, latency, x_pids) for latency in latencies]
        time.sleep(2.0)  # past the seats' health checks after their last task
        after = summed_memory([daemon.proc.pid, *driver_processes(daemon.proc.pid)])
        return SeatCount(len(names), idle, after, memory(daemon.proc.pid), rounds)
    finally:
        daemon.cleanup()


def measure(counts: tuple[int, ...] = SEAT_COUNTS, tasks: int = TASKS_PER_SEAT, turns: int = TURNS,
            latencies: tuple[float, ...] = LATENCIES, env: dict[str, str] | None = None,
            busy: bool | None = None, config: str | None = None) -> list[SeatCount]:
    """Each seat count in turn; ``busy``: the scene (None: busy up to BUSY_SCENE_SEATS seats, else light);
    ``config``: the daemon's config file's text."""
    model = ScriptedModel(scenario(turns), record=False)
    url = model.start()
    try:
        with screens(max(counts), max(counts) <= BUSY_SCENE_SEATS if busy is None else busy) as shown:
            results = []
            for count in counts:
                print(f"  seats: {count} ...", file=sys.stderr, flush=True)
                results.append(measure_seats(shown[:count], model, url, tasks, turns, latencies, env, config))
            return results
    finally:
        model.stop()


def report(results: list[SeatCount], tasks: int, turns: int, busy: bool) -> str:
    base = {r.latency: r for r in results[0].rounds} if results[0].seats == 1 else {}
    rows: list[tuple[object, ...]] = []
    for result in results:
        for r in result.rounds:
            one = base.get(r.latency)
            scaling = f"{r.rate / one.rate:.2f}x" if one is not None else "-"
            ms = [1000 * c / r.steps for c in r.cpu]
            rows.append((r.seats, f"{r.latency:g} s", f"{r.tasks} x {turns}", f"{r.spread[0]}-{r.spread[1]}",
                         f"{r.wall:.1f} s", f"{r.rate:.2f}", scaling, f"{ms[0] + ms[1]:.1f}",
                         f"{ms[0]:.1f} / {ms[1]:.1f}", f"{ms[2]:.0f} / {ms[3]:.0f}",
                         f"{r.step_seconds:.3f} = {r.model_seconds:.3f} + {r.step_seconds - r.model_seconds:.3f}"))
    speed = table(("seats", "model latency", "tasks x turns", "tasks per seat", "wall", "steps/s", "vs 1 seat",
                   "daemon CPU ms per step", "of it: event loop process / driver processes",
                   "CPU ms per step: model / X", "a seat's step, s: = the model's answer + the daemon's side"), rows)

    idle1 = results[0].idle.pss if results[0].seats == 1 else None
    after1 = results[0].after.pss if results[0].seats == 1 else None
    mem_rows: list[tuple[object, ...]] = []
    for result in results:
        over_idle = f"{(result.after.pss - idle1) / 1024 / result.seats:.1f} MiB" if idle1 is not None else "-"
        slope = (f"{(result.after.pss - after1) / 1024 / (result.seats - 1):.1f} MiB"
                 if after1 is not None and result.seats > 1 else "-")
        peak = max(r.peak_pss for r in result.rounds)
        mem_rows.append((result.seats, _mib(result.idle.pss), _mib(peak), _mib(result.after.pss),
                         _mib(result.after_daemon.pss), _mib(result.after.shmem), result.after.processes,
                         result.after.threads, over_idle, slope))
    mem = table(("seats", "PSS idle", "PSS peak, every seat busy", "PSS after work", "of it the daemon's process",
                 "shmem", "processes", "threads", "(PSS after - PSS idle 1 seat) / seats",
                 "per added seat: (PSS after - PSS after, 1 seat) / (seats - 1)"), mem_rows)
    scene = "busy scene + Tk entry" if busy else "light scene: a Tk entry on the bare screen"
    return (f"### Seats (one daemon, N private {WIDTH}x{HEIGHT} Xvfbs, {scene}, scripted model)\n\n"
            f"{tasks} tasks per seat of {turns} turns each, submitted at once unpinned (after a pinned warm-up task "
            "per seat); steps/s = steps recorded / (last finished_at - first created_at). The daemon's CPU and "
            "memory are its own process's and its driver processes' (the fork server and one per seat), summed; "
            "memory is PSS, which splits the pages they share among them. A seat's step is seats / steps/s, split "
            "into the scripted model's mean answer time and the daemon's side.\n\n"
            + speed + "\n\n" + mem + "\n\n" + verdict(results))


def verdict(results: list[SeatCount]) -> str:
    by_seats = {r.seats: r for r in results}
    slow = {count: next((r for r in result.rounds if r.latency == 1.0), None) for count, result in by_seats.items()}
    lines = []
    one = by_seats.get(1)
    for count, target in ((8, TARGET_SCALING), (50, TARGET_SCALING_50)):
        if slow.get(1) is not None and slow.get(count) is not None:
            ratio = slow[count].rate / slow[1].rate  # type: ignore[union-attr]
            met = "met" if ratio >= target else "MISSED"
            lines.append(f"- 1 s model, {count} seats vs 1: {ratio:.2f}x (target >= {target:g}x): {met}")
    for count, r in sorted(slow.items()):
        if r is not None and count in (1, 50):
            ms = 1000 * (r.cpu[0] + r.cpu[1]) / r.steps
            met = "met" if ms <= TARGET_CPU_MS else "MISSED"
            lines.append(f"- daemon CPU per step at {count} seat{'s' * (count > 1)}, 1 s model: {ms:.1f} ms "
                         f"(target <= {TARGET_CPU_MS:g} ms): {met}")
    if one is not None:
        for count, result in sorted(by_seats.items()):
            if count > 1:
                slope = (result.after.pss - one.after.pss) / 1024 / (count - 1)
                met = "met" if slope <= TARGET_MIB_PER_SEAT else "MISSED"
                busy = (max(r.peak_pss for r in result.rounds) - max(r.peak_pss for r in one.rounds)) / 1024 / (count - 1)
                lines.append(f"- {count} seats: {slope:.1f} MiB per added seat at rest (target <= "
                             f"{TARGET_MIB_PER_SEAT:g} MiB): {met}; {busy:.1f} MiB per added seat at the peak, every "
                             "seat busy")
    return "\n".join(lines)


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def run() -> str:
    """The seats section of ``make bench`` (markdown)."""
    return report(measure(), TASKS_PER_SEAT, TURNS, max(SEAT_COUNTS) <= BUSY_SCENE_SEATS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seats", default=",".join(map(str, SEAT_COUNTS)), help="seat counts, e.g. 1,2")
    parser.add_argument("--tasks", type=int, default=TASKS_PER_SEAT, help="tasks per seat in each round")
    parser.add_argument("--turns", type=int, default=TURNS, help="model turns per task (at least 3)")
    parser.add_argument("--latencies", default=",".join(f"{x:g}" for x in LATENCIES), help="model latencies, s")
    parser.add_argument("--scene", choices=("busy", "light"),
                        help=f"every seat's scene (default: busy up to {BUSY_SCENE_SEATS} seats, light past it)")
    parser.add_argument("--driver-processes", action="store_true",
                        help="run the daemon with driver_processes = true (a driver process per seat)")
    parser.add_argument("--daemon-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the daemon (repeatable)")
    args = parser.parse_args()
    counts = tuple(int(n) for n in args.seats.split(","))
    latencies = tuple(float(x) for x in args.latencies.split(","))
    env = dict(item.split("=", 1) for item in args.daemon_env)
    turns = max(3, args.turns)
    busy = max(counts) <= BUSY_SCENE_SEATS if args.scene is None else args.scene == "busy"
    config = "driver_processes = true\n" if args.driver_processes else None
    print(report(measure(counts, args.tasks, turns, latencies, env, busy, config), args.tasks, turns, busy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
