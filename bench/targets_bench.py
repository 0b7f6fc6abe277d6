"""What an action touches: the lookup before each action (window + accessibility element), per toolkit.

On openbox with a session bus and at-spi-bus-launcher (tests/support/a11y.py):
the GTK and Qt dialogs and Chromium's form page. Each lookup is the daemon's own
(cud.daemon.targets.lookup.TargetResolver.at_point / focus) with its real budget; a
lookup that ran out of it counts as "window only". The anchor is the window
half alone (no bus), so the ratio says what the accessibility bus adds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cud.daemon.targets.lookup import BUDGET_MS, HARD_TIMEOUT, TargetResolver
from tests.support.a11y import ChromiumForm, FormApp, start_a11y_bus
from tests.support.desktop import start_desktop

from .daemon_bench import percentile
from .stats import table

LOOKUPS = 60
SEED = 22


def _measure(display: str, bus: str | None, points: list[tuple[int, int]], focus: bool,
             click: Callable[[], None] | None = None) -> tuple[list[float], int]:
    async def main() -> tuple[list[float], int]:
        resolver = TargetResolver(display, bus, timeout=5.0)
        try:
            # A toolkit builds its accessible objects on the first question, and a new client
            # connection costs once: not what is measured. Then the daemon's own limit.
            await resolver.warm()
            await resolver.at_point(*points[0])
            await resolver.focus()
            if click is not None:  # as a model does before typing: the focus event names the field
                click()
                await asyncio.sleep(0.5)
            resolver.timeout = HARD_TIMEOUT
            samples, found = [], 0
            for point in points:
                target = await (resolver.focus() if focus else resolver.at_point(*point))
                samples.append(target["ms"])
                found += target["element"] is not None
            return samples, found
        finally:
            await resolver.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's sync loop owns this thread
        return pool.submit(asyncio.run, main()).result()


def _row(app: str, what: str, display: str, bus: str, points: list[tuple[int, int]], focus: bool = False,
         click: Callable[[], None] | None = None) -> tuple[Any, ...]:
    samples, found = _measure(display, bus, points, focus, click)
    anchor, _ = _measure(display, None, points, focus)
    p50, p95 = statistics.median(samples), percentile(samples, 95)
    verdict = "ok" if p95 <= BUDGET_MS else "OVER BUDGET"
    return (app, what, f"{p50:.1f} ms", f"{p95:.1f} ms ({verdict})", f"{found}/{len(samples)}",
            f"{statistics.median(anchor):.1f} ms", f"{p50 / max(statistics.median(anchor), 0.01):.1f}x")


def run() -> str:
    rng = random.Random(SEED)
    rows: list[tuple[Any, ...]] = []
    with tempfile.TemporaryDirectory(prefix="cud-bench-targets-") as tmp:
        for toolkit in ("gtk", "qt", "chromium"):
            workdir = Path(tmp) / toolkit
            workdir.mkdir()
            with start_desktop("x11", workdir) as desktop:
                bus = start_a11y_bus(desktop)
                app: Any = ChromiumForm(desktop, bus) if toolkit == "chromium" else FormApp(desktop, bus, toolkit)
                try:
                    app.start()
                    if toolkit == "chromium":
                        boxes = [app.rect(i) for i in ("delete", "cancel", "help", "search")]
                        field = app.rect("search")
                    else:
                        state = app._state()
                        boxes = [*state["buttons"].values(), state["field"]]
                        field = state["field"]
                    points = [(x + rng.randrange(w), y + rng.randrange(h))
                              for x, y, w, h in (rng.choice(boxes) for _ in range(LOOKUPS))]
                    rows.append(_row(toolkit, "point (click)", desktop.display, bus.address, points))
                    rows.append(_row(toolkit, "focus, none moved since connecting (walk)", desktop.display,
                                     bus.address, points[:20], True))

                    def click(box: tuple[int, int, int, int] = field) -> None:
                        desktop.driver.click({"type": "click", "x": box[0] + box[2] // 2, "y": box[1] + box[3] // 2,
                                              "button": "left"})

                    rows.append(_row(toolkit, "focus after a click (events)", desktop.display, bus.address,
                                     points[:20], True, click))
                finally:
                    app.stop()
                    bus.stop()
    return (f"### What an action touches: lookup per action (budget p95 <= {BUDGET_MS} ms, "
            f"hard limit {HARD_TIMEOUT * 1000:.0f} ms)\n\n"
            + table(("toolkit", "lookup", "p50", "p95", "element found", "window only (anchor)", "ratio"), rows))


if __name__ == "__main__":
    print(run())
