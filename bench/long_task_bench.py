"""Long tasks (issue 20): what a 100-step task uploads, costs the daemon and holds in memory.

One daemon on a private Xvfb showing the busy scene (``bench/scene.py``) with a
one-line entry over it, at 1280x800 and 1920x1080. A task is 101 model turns of
the scripted model, which keeps the API's per-request limits: look, then 100
turns that each click into the entry and type one letter (every screenshot differs
a little from the last, as a real task's do), then the answer. Once in each
``[history]`` mode: ``stored`` (the default: each request continues the previous
response) and ``replay`` (``[request] store = false``, the defaults' budget).

Reported per size and mode:

* total bytes uploaded (every request body, as the scripted model read it off the
  socket) against the new screenshots' bytes as they travel (base64 data URLs,
  each counted once) — goal <= 1.1x in stored mode;
* the request body at steps 1, 50 and 100;
* the daemon's own overhead per step (its step records), steps 2-11 and 91-100;
* the daemon's RSS at step 100 (sampled while the model holds its last answer).

Run alone: ``.venv/bin/python -m bench.long_task_bench [--steps 100]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.procstat import memory
from bench.scene import show_busy_scene, show_entry
from bench.stats import table
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon
from tests.support.recorder import wait_until
from tests.support.xserver import start_xvfb, stop_process

SIZES = ((1280, 800), (1920, 1080))
MODES = {"stored": None, "replay": "[request]\nstore = false\n"}
STEPS = 100
#: The model holds its last answer this long, so the daemon's RSS is read at the last step.
HOLD_SECONDS = 3.0


def _scenario(steps: int, height: int) -> dict[str, object]:
    x, y = 240, height - 62  # inside the entry
    letters = "abcdefghijklmnopqrstuvwxyz"
    edits = [{"actions": [{"type": "click", "button": "left", "x": x + (7 * n) % 300, "y": y},
                          {"type": "type", "text": letters[n % 26]}]} for n in range(steps)]
    return {"name": "bench-long", "steps": [{"actions": [{"type": "screenshot"}]}, *edits,
                                           {"message": "done", "delay": HOLD_SECONDS}]}


def measure(width: int, height: int, mode: str, steps: int) -> dict[str, object]:
    model = ScriptedModel(_scenario(steps, height), record=False)
    xvfb = start_xvfb(Path(tempfile.mkdtemp(prefix="cud-bench-long-")), width, height)
    procs: list[subprocess.Popen[str]] = []
    daemon: Daemon | None = None
    try:
        procs.append(show_busy_scene(xvfb.display, width, height))
        procs.append(show_entry(xvfb.display, f"400x36+40+{height - 80}"))
        daemon = Daemon(xvfb.display, model.start(), max_steps=steps + 5, config=MODES[mode])
        daemon.start()
        assert daemon.proc is not None
        task_id = daemon.call("submit", prompt="type the alphabet")["id"]
        # The last answer is held back: the daemon then has every step's screenshot behind it.
        wait_until(lambda: len(model.request_bytes) >= steps + 2, 900, "the last request")
        rss = memory(daemon.proc.pid).rss
        task = daemon.wait_state(task_id, "succeeded", "failed", timeout=120)
        if task["state"] != "succeeded":
            raise RuntimeError(f"the {mode} task at {width}x{height} ended {task['state']}: {task['error']}")
        records = [e["data"] for e in daemon.events(task_id) if e["kind"] == "step"]
        # Each screenshot as it travels: a base64 data URL of the PNG the daemon kept.
        shots = sorted((daemon.state_dir / "trajectories" / str(task_id)).iterdir())
        new = sum(len("data:image/png;base64,") + 4 * -(-path.stat().st_size // 3) for path in shots)
    finally:
        if daemon is not None:
            daemon.cleanup()
        model.stop()
        for proc in procs:
            stop_process(proc)
        xvfb.stop()
    sizes = model.request_bytes
    overhead = [r["overhead_ms"] for r in records]
    return {"total": sum(sizes), "new": new, "at": [sizes[0], sizes[min(49, len(sizes) - 1)],
                                                    sizes[min(steps, len(sizes) - 1)]],
            "early": statistics.median(overhead[1:11]), "late": statistics.median(overhead[-10:]), "rss": rss,
            "steps": task["steps"]}


def _size(count: float) -> str:
    if count < 10 * 1024:
        return f"{count:.0f} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / 1024 / 1024:.2f} MiB"


def run(steps: int = STEPS) -> str:
    results = {(size, mode): measure(*size, mode, steps) for size in SIZES for mode in MODES}
    columns = [f"{w}x{h} {mode}" for (w, h) in SIZES for mode in MODES]
    cells = [results[(size, mode)] for size in SIZES for mode in MODES]
    rows: list[tuple[object, ...]] = [
        ("total uploaded", *(_size(c["total"]) for c in cells)),  # type: ignore[arg-type]
        ("new screenshots, once each (base64)", *(_size(c["new"]) for c in cells)),  # type: ignore[arg-type]
        ("uploaded / new screenshots", *(f"{c['total'] / c['new']:.2f}x" for c in cells)),  # type: ignore[operator]
        *[(f"request body, step {step}", *(_size(c["at"][i]) for c in cells))  # type: ignore[index]
          for i, step in enumerate((1, 50, steps))],
        ("daemon overhead per step, steps 2-11 (median)", *(f"{c['early']:.1f} ms" for c in cells)),
        (f"daemon overhead per step, steps {steps - 9}-{steps} (median)", *(f"{c['late']:.1f} ms" for c in cells)),
        (f"daemon RSS at step {steps}", *(f"{c['rss'] / 1024:.1f} MiB" for c in cells)),  # type: ignore[operator]
    ]
    return (f"### Long tasks ({steps} steps on the busy scene, scripted model with the API's limits)\n\n"
            + table(("", *columns), rows)
            + "\n\nStored mode sends each screenshot once (goal <= 1.1x of the new screenshots' bytes); replay "
            "mode sends the newest 8 in full each step, the rest as a 1x1 placeholder.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    started = time.monotonic()
    print(run(args.steps))
    print(f"\n({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
