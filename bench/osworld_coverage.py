"""How much of an OSWorld checkout cud converts (docs/osworld.md#how-much-converts).

For an OSWorld checkout's ``evaluation_examples/`` folder, every task its index lists (``test_all.json``
by default: ``{domain: [task id, ...]}``, each task in ``examples/DOMAIN/ID.json``) goes through
:func:`cud.osworld.convert.convert_osworld`, with a fetcher that returns no bytes for any URL (nothing is
downloaded). Printed: per domain, the tasks, how many convert and the rate, and a total; then the
reasons the others are refused, by class (``config type 'googledrive'``, ``metric 'infeasible'``, ...).

The converter stops at a task's first problem, so each refused task counts once, under its *first*
blocker only: a task refused for a config type may also use a metric cud lacks, which is not counted.

Not part of ``make bench`` (it needs a checkout): ``python -m bench.osworld_coverage PATH [--index
test_all.json] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import table
from cud.errors import SpecError
from cud.osworld.convert import OSWORLD_HOME, convert_osworld

INDEX = "test_all.json"
NOTE = "each refused task counts under its first blocker only: the converter stops at the first"
_INDEX_RE = re.compile(r"\[\d+\]")
_UNKNOWN_KEY = re.compile(r"(OSWorld [\w' ]+?) key ('[^']*') in ")


def no_fetch(url: str) -> bytes:
    """Every download and expected file as empty: the coverage needs no network."""
    return b""


def reason(exc: SpecError) -> str:
    """The class of a refusal, from its details' ``key`` and ``value`` and its message."""
    key = _INDEX_RE.sub("", str(exc.details.get("key", "")))
    value = str(exc.details.get("value", ""))
    message = exc.message
    if "the converted task is not a valid spec" in message:
        return f"converted spec invalid at {key or '?'}"
    if found := _UNKNOWN_KEY.search(message):
        return f"{found.group(1)} key {found.group(2)}"
    if key == "config.type":
        return f"config type {value}"
    if key == "evaluator.postconfig":
        return "evaluator.postconfig"
    if key == "evaluator.conj":
        return f"conj {value}"
    if key == "evaluator.result.type":
        return f"getter {value}"
    if key == "evaluator.expected.type":
        return f"expected type {value}"
    if key == "evaluator.func":
        if "on the getter" in message:
            getter = message.split("on the getter ", 1)[1].split(" ", 1)[0]
            return f"metric {value} on getter {getter}"
        return f"metric {value}" if "OSWorld metric" in message else "evaluator.func malformed"
    if "a path cud cannot map" in message:
        return f"path {_path_kind(value)}"
    if "shell command naming" in message:
        return f"shell text naming {OSWORLD_HOME}"
    if "holds such a path" in message:
        return f"argument holding {OSWORLD_HOME}"
    if "must be true or false" in message:
        return f"{key} not a boolean"
    if "cannot fetch" in message:
        return "download"
    return f"other at {key or '?'}"


def _path_kind(shown: str) -> str:
    """Which kind of path was refused, from its repr (the details' value)."""
    if shown in (f"'{OSWORLD_HOME}'", f"'{OSWORLD_HOME}/'", "'~'", "'~/'"):
        return "(the home itself)"
    if shown.endswith("/'"):
        return "(a directory ending in '/')"
    if not shown.startswith(("'/", "'~")):
        return "(relative)"
    return f"(outside {OSWORLD_HOME}, or with '..')"


def coverage(folder: Path, index: str = INDEX) -> dict[str, Any]:
    """Per domain: tasks, converted, rate; the total; the first blocker's class of every refused task, counted."""
    listed = json.loads((folder / index).read_text(encoding="utf-8"))
    domains: dict[str, dict[str, Any]] = {}
    reasons: Counter[str] = Counter()
    by_domain: dict[str, Counter[str]] = {}
    for domain, ids in listed.items():
        converted = 0
        by_domain[domain] = Counter()
        for task_id in ids:
            path = folder / "examples" / domain / f"{task_id}.json"
            try:
                task = json.loads(path.read_text(encoding="utf-8"))
                convert_osworld(task, source=str(path), fetch=no_fetch)
            except SpecError as exc:
                why = reason(exc)
            except (OSError, ValueError) as exc:  # a missing or broken task file is a blocker too
                why = f"task file unreadable ({type(exc).__name__})"
            else:
                converted += 1
                continue
            reasons[why] += 1
            by_domain[domain][why] += 1
        domains[domain] = {"tasks": len(ids), "converted": converted, "rate": _rate(converted, len(ids)),
                           "reasons": dict(by_domain[domain].most_common())}
    tasks = sum(d["tasks"] for d in domains.values())
    converted = sum(d["converted"] for d in domains.values())
    return {"index": index, "domains": domains,
            "total": {"tasks": tasks, "converted": converted, "rate": _rate(converted, tasks)},
            "reasons": dict(reasons.most_common()), "counted": "first blocker per task", "note": NOTE}


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def report(result: dict[str, Any]) -> str:
    rows: list[tuple[object, ...]] = [(name, d["tasks"], d["converted"], f"{d['rate']:.1%}")
                                      for name, d in result["domains"].items()]
    total = result["total"]
    rows.append(("**total**", total["tasks"], total["converted"], f"{total['rate']:.1%}"))
    reasons: list[tuple[object, ...]] = list(result["reasons"].items())
    return "\n\n".join([
        f"### OSWorld tasks cud converts ({result['index']})",
        table(("domain", "tasks", "converted", "rate"), rows),
        f"Why the others are refused ({NOTE}):",
        table(("first blocker", "tasks"), reasons),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="an OSWorld checkout's evaluation_examples/ folder")
    parser.add_argument("--index", default=INDEX, help=f"the index file in it (default {INDEX})")
    parser.add_argument("--json", action="store_true", help="print the same as JSON")
    args = parser.parse_args(argv)
    result = coverage(args.folder, args.index)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
