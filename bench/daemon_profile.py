"""Where a 1-seat daemon's CPU goes, part by part, sampled with py-spy.

One daemon, one private 1280x800 Xvfb with the busy scene and a Tk entry (as ``bench/seats_bench.py``),
the scripted model answering after ``--latency`` seconds, tasks of ``TURNS`` turns back to back.
After a warm-up task, ``py-spy record --subprocesses --nonblocking`` samples the daemon and its
driver processes for ``--seconds`` (only threads on a CPU are counted, so samples are CPU time).
Each sample is put in the first part (``PARTS``, most specific first) one of its frames belongs to,
and the table gives each part's share of the samples, in the daemon's own process and in its driver
processes.

Run alone: ``.venv/bin/python -m bench.daemon_profile [--seconds 45 --scene light --driver-processes]`` (py-spy needs
ptrace: run as root, or with ``kernel.yama.ptrace_scope`` 0).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # also runnable as a file, like the other benchmarks

from bench.seats_bench import scenario, screens
from bench.stats import table
from cud.cuctl.client import Client
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon

TURNS = 40
#: (part, what a frame's text contains), the first match of a sample wins: the leaf-most work first.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PNG encoding", ("drivers/png",)),
    ("settling", ("frames.py", "settle (")),
    ("X grabs and input", ("mss/", "Xlib/", "drivers/x11", "drivers/x11_keyboard", "drivers/drag_motion")),
    ("driver calls passed to the driver process", ("drivers/worker", "multiprocessing/connection")),
    ("the socket server (clients)", ("daemon/server/", "cud/protocol/")),
    ("the store (SQLite)", ("daemon/store/",)),
    ("the model client (httpx, JSON)", ("httpx/", "httpcore/", "h11/", "openai/_", "json/", "anyio/")),
    ("the SDK's toolset", ("openai/lib/computer",)),
    ("the task's checkpoint (guard, binding, budgets)", ("daemon/tasks/", "daemon/budget/")),
    ("asyncio", ("asyncio/",)),
)


def part_of(stack: str) -> str:
    for part, marks in PARTS:
        if any(mark in stack for mark in marks):
            return part
    return "other"


def profile(seconds: float, latency: float, keep: Path | None = None, busy: bool = True,
            config: str | None = None) -> tuple[Counter[str], Counter[str], int]:
    """Samples per part in the daemon's process and in its driver processes; the steps made meanwhile."""
    model = ScriptedModel(scenario(TURNS), record=False)
    url = model.start()
    raw = Path(tempfile.mkdtemp(prefix="cud-bench-profile-")) / "raw.txt"
    try:
        with screens(1, busy) as shown:
            daemon = Daemon("", url, seats={"s0": shown[0].xvfb.display}, max_steps=TURNS + 2, config=config)
            try:
                daemon.start()
                assert daemon.proc is not None
                model.latency = latency
                stop = threading.Event()
                steps = [0]

                def feed() -> None:  # one task after another, for as long as the profile runs
                    with Client(daemon.socket) as client:
                        while not stop.is_set():
                            task = client.call("submit", prompt="profile")["id"]
                            while client.call("show", id=task)["state"] not in ("succeeded", "failed", "cancelled"):
                                if stop.wait(1.0):
                                    return
                            steps[0] += int(client.call("show", id=task)["steps"])

                feeder = threading.Thread(target=feed, daemon=True)
                feeder.start()
                spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
                done = subprocess.run([spy, "record", "--pid", str(daemon.proc.pid), "--subprocesses", "--nonblocking",
                                       "--rate", "100", "--duration", str(int(seconds)), "--format", "raw",
                                       "--output", str(raw)], capture_output=True, text=True)
                stop.set()
                feeder.join(30)
                if done.returncode != 0:
                    raise RuntimeError(f"py-spy failed: {done.stderr.strip()[-500:]}")
            finally:
                daemon.cleanup()
        if keep is not None:
            shutil.copy(raw, keep)
        own: Counter[str] = Counter()
        drivers: Counter[str] = Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            # A sample of a child process has that child's "process PID:..." frame after the daemon's.
            into = drivers if stack.count("process ") > 1 else own
            into[part_of(stack)] += int(count)
        return own, drivers, steps[0]
    finally:
        model.stop()
        shutil.rmtree(raw.parent, ignore_errors=True)


def report(own: Counter[str], drivers: Counter[str], steps: int, seconds: float, latency: float, scene: str) -> str:
    total = sum(own.values()) + sum(drivers.values())
    parts = [part for part, _ in PARTS] + ["other"]
    rows = [(part, f"{100 * own[part] / total:.0f}%", f"{100 * drivers[part] / total:.0f}%")
            for part in parts if own[part] or drivers[part]]
    rows.append(("all", f"{100 * sum(own.values()) / total:.0f}%", f"{100 * sum(drivers.values()) / total:.0f}%"))
    return (f"### Where a 1-seat daemon's CPU goes (py-spy, {scene} scene, {seconds:g} s, {latency:g} s model, "
            f"about {steps} steps counted)\n\nShares of every sample on a CPU, in the daemon's own process and in its driver "
            "processes:\n\n" + table(("part", "daemon's process", "driver processes"), rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--latency", type=float, default=0.5, help="the scripted model's answer time, s")
    parser.add_argument("--scene", choices=("busy", "light"), default="busy", help="the seat's scene (bench/scene.py)")
    parser.add_argument("--driver-processes", action="store_true",
                        help="run the daemon with driver_processes = true (a driver process per seat)")
    parser.add_argument("--raw", type=Path, help="also keep py-spy's samples (collapsed stacks) in this file")
    args = parser.parse_args()
    config = "driver_processes = true\n" if args.driver_processes else None
    own, drivers, steps = profile(args.seconds, args.latency, args.raw, args.scene == "busy", config)
    print(report(own, drivers, steps, args.seconds, args.latency, args.scene))
    return 0


if __name__ == "__main__":
    sys.exit(main())
