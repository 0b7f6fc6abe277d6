"""Suites (issue 28): a suite's throughput at 1, 2 and 4 seats, with ``cuctl eval`` and the scripted model.

One daemon per seat count, each seat openbox on its own Xvfb with a user, a home and a template
(``tests/support/spec_seat.py``, as the tests'). The suite: :data:`SPECS` (an answer, a file
sent and compared, a command, and xterm typed into by the model), ``--repeat`` times, each run
reset to the template first. Reported: the wall time of ``cuctl eval`` and spec-runs per
minute; the ratio to one seat is what to compare (the machine is shared).

Run alone: ``.venv/bin/python -m bench.suite_bench [--repeat 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import table
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import spec_seat

REPEAT = 4
SEAT_COUNTS = (1, 2, 4)
SCENARIOS = {
    "say-done": {"name": "say-done", "steps": [{"message": "done"}]},
    "xterm-write": {"name": "xterm-write", "steps": [
        {"actions": [{"type": "type", "text": "echo written > out.txt\n"}]},
        {"actions": [{"type": "wait"}]},
        {"message": "I wrote out.txt"}]},
}
SPECS = {
    "answer.toml": 'prompt = "Say done."\nmodel = "scripted:say-done"\n[[checks]]\nanswer = "done"\n',
    "file.toml": 'prompt = "Nothing."\nmodel = "scripted:say-done"\n[[setup]]\n'
                 'files = [{ src = "fx/a.txt", dest = "a.txt" }]\n[[checks]]\nfile = "a.txt"\nequals = "fx/a.txt"\n',
    "command.toml": 'prompt = "Nothing."\nmodel = "scripted:say-done"\n[[setup]]\n'
                    'run = ["/bin/sh", "-c", "echo 42 > n.txt"]\n[[checks]]\ncommand = ["/bin/cat", "n.txt"]\n'
                    'output = { include = ["42"] }\n',
    "xterm.toml": 'prompt = "Write out.txt."\nmodel = "scripted:xterm-write"\n[[setup]]\n'
                  'launch = ["/usr/bin/xterm", "-e", "/bin/sh"]\nwait_for = { window_class = "XTerm", timeout = 60 }\n'
                  '[[checks]]\nfile = "out.txt"\nmatches = "written\\n"\n',
}


def _suite(seats: int, repeat: int, users: SeatUsers) -> tuple[float, int, int]:
    """Seconds ``cuctl eval`` took, spec-runs, and how many passed."""
    with spec_seat(users, {"name": "none", "steps": [{"message": "unused"}]}, seats=seats,
                   scenarios=SCENARIOS) as seat:
        for name, text in SPECS.items():
            seat.write(f"suite/{name}", text, {"suite/fx/a.txt": "alpha\n"})
        scratch = Path(tempfile.mkdtemp(prefix="cud-bench-suite-", dir="/tmp"))
        out = scratch / "out"
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "cud.cuctl.main", "--socket", str(seat.daemon.socket), "eval",
                                   str(seat.specs / "suite"), "--repeat", str(repeat), "--out", str(out), "--json"],
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                                  timeout=1800)
            took = time.monotonic() - started
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"cuctl eval failed: {done.stderr}")
        total = json.loads(done.stdout)["total"]
        return took, total["runs"], total["passed"]


def run(repeat: int = REPEAT) -> str:
    users = SeatUsers()
    rows = []
    try:
        base: float | None = None
        for seats in SEAT_COUNTS:
            took, runs, passed = _suite(seats, repeat, users)
            rate = runs / took * 60
            base = base or rate
            rows.append((str(seats), str(runs), f"{passed}", f"{took:.1f}", f"{rate:.1f}", f"{rate / base:.2f}x"))
    finally:
        users.remove_all()
    return "\n\n".join([
        "### Suites: throughput (issue 28)",
        f"`cuctl eval` of {len(SPECS)} specs x {repeat} repeats (an answer, a file, a command, xterm typed into), "
        "scripted model, a reset before every run; one task in flight per seat.",
        table(("seats", "spec-runs", "passed", "wall s", "runs/min", "vs 1 seat"), rows),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=REPEAT)
    print(run(parser.parse_args().repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
