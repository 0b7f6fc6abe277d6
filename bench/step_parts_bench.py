"""What each part of a step costs the daemon: the parts' own code, one at a time, in this process's CPU time.

The seats bench (``bench/seats_bench.py``) gives the daemon's CPU per step as a whole, from /proc. This one
says where it goes, each part run ``STEPS`` times on what a step gives it, and timed with
``time.process_time`` (this process's CPU, every thread; the X server's is not counted, as it is not the
daemon's):

* **act**: one letter typed into a focused entry over the busy scene (``bench/scene.py``), 1280x800;
* **screenshot**: the screenshot after it: the grab, waiting for the screen to settle (its grabs), and the
  PNG encode of the bands that changed; **grab** alone is one XShm grab;
* **guard**: the stuck guard's look at that frame (:class:`cud.drivers.frames.Fingerprinter`, 8 bytes a tile)
  and its ``see``/``act``;
* **request**: the Responses request the SDK sends with it, as ``[history] mode = "stored"`` shapes it
  (only the new computer call output travels), encoded as JSON as the client's HTTP layer does;
* **recording**: the step's screenshot written to the task's trajectory and its ``step`` event (with the
  task's usage) written to the database;
* **clients**: a ``list`` reply of one page (the newest 200 of 1,000 tasks, each view encoded once) and a
  ``show`` of one task, per request, not per step.

Run alone: ``.venv/bin/python -m bench.step_parts_bench [--steps N]``. The figures are medians over the
steps, in CPU milliseconds; read them against each other, not against another machine's.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scene import show_busy_scene, show_entry
from bench.stats import table
from cud.daemon.model.history import History, HistoryShaper, shaper_for
from cud.daemon.server.handlers.tasks import _fitting
from cud.daemon.store.database import Store
from cud.daemon.store.trajectory import Trajectories
from cud.daemon.tasks.stuck import StuckGuard
from cud.drivers.x11 import X11Driver
from cud.protocol import encode_json, encode_ok
from tests.support.xserver import start_xvfb

STEPS = 40
WIDTH, HEIGHT = 1280, 800
#: The page a ``list`` answers (cud.protocol.LIST_PAGE) and the tasks the database holds.
PAGE, TASKS = 200, 1000


def cpu_ms(part: Callable[[], Any]) -> tuple[float, Any]:
    """``part()``'s CPU time in this process, in ms, and what it returned."""
    started = time.process_time()
    value = part()
    return (time.process_time() - started) * 1000, value


def look(guard: StuckGuard, driver: X11Driver, action: dict[str, Any]) -> None:
    """The stuck guard's part of a step: the frame's fingerprint, then the action checked against what it saw."""
    guard.see(driver.fingerprint())
    guard.act(action)


def record(store: Store, trajectories: Trajectories, task_id: int, number: int, image_url: str) -> None:
    """The step's screenshot file and its ``step`` event, with the task's usage so far."""
    trajectories.save_screenshot(task_id, number, image_url)
    store.add_event(task_id, "step", {"number": number, "model_ms": 500.0, "driver_ms": 20.0}, steps=number,
                    usage={"input_tokens": 1000 * number, "output_tokens": 20 * number})


def request(shaper: HistoryShaper, items: list[Any], response_id: str) -> bytes:
    """The request body the SDK sends for the loop's ``items``, the response to it taken as answered."""
    sent, extra = shaper.request(items)
    body = encode_json({"model": "m", "input": sent, "tools": [{"type": "computer"}], **extra})
    shaper.accepted(items, type("Response", (), {"id": response_id, "output": []})())
    return body


def measure(steps: int = STEPS) -> dict[str, list[float]]:
    costs: dict[str, list[float]] = {part: [] for part in
                                      ("act", "screenshot", "grab", "guard", "request", "recording", "list", "show")}
    with tempfile.TemporaryDirectory(prefix="cud-parts-") as tmp:
        xserver = start_xvfb(Path(tmp), WIDTH, HEIGHT)
        scene = show_busy_scene(xserver.display, WIDTH, HEIGHT)
        entry = show_entry(xserver.display, f"400x40+{WIDTH // 2 - 200}+{HEIGHT // 2 - 20}")
        driver = X11Driver(xserver.display)
        store = Store(Path(tmp) / "cud.sqlite3")
        trajectories = Trajectories(Path(tmp))
        try:
            task = store.submit("type letters", "m", steps + 1, "safety", 0, "bench")
            for _ in range(TASKS - 1):
                store.submit("p", "m", 5, "safety", 0, "bench")
            guard = StuckGuard(repeat_limit=1000, cycle_limit=1000)
            shaper = shaper_for(History())
            items: list[Any] = [{"role": "user", "content": "type letters"}]
            driver.screenshot()  # buffers allocated, the first full encode done
            for step in range(steps):
                action = {"type": "type", "text": "abcdefghijklmnopqrstuvwxyz"[step % 26]}
                costs["act"].append(cpu_ms(functools.partial(driver.type, action))[0])
                ms, shot = cpu_ms(driver.screenshot)
                costs["screenshot"].append(ms)
                conn = driver._conn  # the driver's own connection: the grab alone, as bench.screenshot_bench does
                assert conn is not None
                costs["grab"].append(cpu_ms(conn.grab)[0])
                costs["guard"].append(cpu_ms(functools.partial(look, guard, driver, action))[0])
                items += [{"type": "computer_call", "call_id": f"c{step}", "actions": [action]},
                          {"type": "computer_call_output", "call_id": f"c{step}", "output": shot}]
                costs["request"].append(cpu_ms(functools.partial(request, shaper, items, f"r{step}"))[0])
                costs["recording"].append(cpu_ms(functools.partial(record, store, trajectories, task["id"], step + 1,
                                                                   shot["image_url"]))[0])
                costs["list"].append(cpu_ms(lambda: encode_ok(_fitting(store.tasks(limit=PAGE))))[0])
                costs["show"].append(cpu_ms(lambda: encode_ok(store.task(task["id"])))[0])
        finally:
            driver.close()
            store.close()
            for proc in (entry, scene):
                proc.terminate()
                proc.wait(timeout=30)
            xserver.stop()
    return costs


def report(costs: dict[str, list[float]]) -> str:
    median = {part: statistics.median(values) for part, values in costs.items()}
    per_step = sum(median[p] for p in ("act", "screenshot", "guard", "request", "recording"))
    rows = [(part, f"{median[part]:.2f}", f"{max(costs[part]):.2f}",
             f"{median[part] / per_step:.0%}" if part not in ("grab", "list", "show") else "—")
            for part in ("act", "screenshot", "grab", "guard", "request", "recording", "list", "show")]
    rows.append(("a step (act + screenshot + guard + request + recording)", f"{per_step:.2f}", "", "100%"))
    body = table(("part", "median CPU ms", "slowest", "share of a step"), rows)
    steps = len(costs["act"])
    return (f"### What each part of a step costs (bench/step_parts_bench.py)\n\n"
            f"{steps} steps, one letter typed each into an entry over the busy scene, {WIDTH}x{HEIGHT}; CPU time "
            f"of this process. grab is part of screenshot; list (a page of {PAGE} of {TASKS} tasks) and show are "
            f"per client request.\n\n{body}")


def run(steps: int = STEPS) -> str:
    return report(measure(steps))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    print(run(parser.parse_args().steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
