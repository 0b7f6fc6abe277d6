"""Run every benchmark in one process, one after another, and print one report.

Each module's ``run()`` returns a markdown section. The report also goes to
``bench-results/latest.md`` so docs/benchmarks.md's tables can be refreshed from it.
"""

from __future__ import annotations

import importlib
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

SECTIONS = ("bench.screenshot_bench", "bench.x11_bench", "bench.vnc_bench", "bench.apps_bench", "bench.targets_bench",
            "bench.daemon_bench", "bench.step_parts_bench", "bench.long_task_bench", "bench.seats_bench",
            "bench.video_bench", "bench.reliability_bench", "bench.session_bench", "bench.suite_bench",
            "bench.fleet_bench")


def main() -> int:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    header = (f"cud benchmark, {now} UTC, Python {platform.python_version()}, "
              f"{platform.machine()}, shared machine: compare ratios, not milliseconds")
    parts = [header]
    failed = False
    for name in SECTIONS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            parts.append(module.run())
        except Exception as exc:  # one broken section must not hide the others
            failed = True
            parts.append(f"### {name}\n\nfailed: {exc!r}")
    report = "\n\n".join(parts) + "\n"
    out = Path("bench-results")
    out.mkdir(exist_ok=True)
    (out / "latest.md").write_text(report)
    print(report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
