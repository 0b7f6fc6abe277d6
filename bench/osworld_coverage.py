"""How much of an OSWorld checkout cud converts, and every blocker of the rest (docs/osworld.md#how-much-converts).

For an OSWorld checkout's ``evaluation_examples/`` folder, every task its index lists (``test_all.json``
by default: ``{domain: [task id, ...]}``, each task in ``examples/DOMAIN/ID.json``) goes through
:func:`cud.osworld.convert.osworld_blockers`, with a fetcher that returns no bytes for any URL (nothing is
downloaded). Printed: per domain, the tasks, how many convert and the rate, and a total; then every
blocker class (``config type 'googledrive'``, ``metric 'check_structure_sim'``, ...) with the tasks it
blocks and the tasks it alone blocks. A task counts once under each class of its blockers (each config
entry, postconfig entry and metric is tried, so a task refused for a config type shows its metric too).

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
from cud.osworld.convert import OSWORLD_HOME, osworld_blockers

INDEX = "test_all.json"
NOTE = "a task counts once under each class of its blockers; 'alone': the tasks that class is the only blocker of"
_INDEX_RE = re.compile(r"\[\d+\]")
_UNKNOWN_KEY = re.compile(r"(OSWorld [\w' ]+?) key ('[^']*') in ")
_PARAMETER = re.compile(r"OSWorld ('\w+') parameter ('\w+') in \S+ has no counterpart in cud:")
_OPTION = re.compile(r"OSWorld (\w+) option '[^']*' in ")


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
    if "{CLIENT_PASSWORD}" in message:
        return "{CLIENT_PASSWORD} (a sudo password)"
    if found := _OPTION.search(message):
        return f"{found.group(1)} option {key.rsplit('.', 1)[-1]!r}"
    if found := _PARAMETER.search(message):
        return f"{found.group(1)} parameter {found.group(2)}"
    if found := _UNKNOWN_KEY.search(message):
        return f"{found.group(1)} key {found.group(2)}"
    if "OSWorld config type" in message:
        return f"config type {value}"
    if "OSWorld getter" in message or "OSWorld result getter" in message:
        return f"getter {value}"
    if "OSWorld expected type" in message:
        return f"expected type {value}"
    if "OSWorld metric" in message and "no counterpart" in message:
        return f"metric {value}"
    if "(multi)" in message:
        return "a multi getter's path, dest or gives"
    if "a path cud cannot map" in message:
        return f"path {_path_kind(value)}"
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
    """Per domain: tasks, converted, rate, blocker classes; the total; each class's tasks, and those it alone blocks."""
    listed = json.loads((folder / index).read_text(encoding="utf-8"))
    domains: dict[str, dict[str, Any]] = {}
    reasons: Counter[str] = Counter()
    alone: Counter[str] = Counter()
    for domain, ids in listed.items():
        converted = 0
        by_domain: Counter[str] = Counter()
        for task_id in ids:
            path = folder / "examples" / domain / f"{task_id}.json"
            try:
                task = json.loads(path.read_text(encoding="utf-8"))
                whys = {reason(exc) for exc in osworld_blockers(task, source=str(path), fetch=no_fetch)}
            except (OSError, ValueError) as exc:  # a missing or broken task file is a blocker too
                whys = {f"task file unreadable ({type(exc).__name__})"}
            if not whys:
                converted += 1
                continue
            reasons.update(whys)
            by_domain.update(whys)
            if len(whys) == 1:
                alone.update(whys)
        domains[domain] = {"tasks": len(ids), "converted": converted, "rate": _rate(converted, len(ids)),
                           "reasons": dict(_ordered(by_domain))}
    tasks = sum(d["tasks"] for d in domains.values())
    converted = sum(d["converted"] for d in domains.values())
    return {"index": index, "domains": domains,
            "total": {"tasks": tasks, "converted": converted, "rate": _rate(converted, tasks)},
            "reasons": {why: {"tasks": n, "alone": alone[why]} for why, n in _ordered(reasons)},
            "counted": "every blocker per task", "note": NOTE}


def _ordered(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def report(result: dict[str, Any]) -> str:
    rows: list[tuple[object, ...]] = [(name, d["tasks"], d["converted"], f"{d['rate']:.1%}")
                                      for name, d in result["domains"].items()]
    total = result["total"]
    rows.append(("**total**", total["tasks"], total["converted"], f"{total['rate']:.1%}"))
    reasons: list[tuple[object, ...]] = [(why, n["tasks"], n["alone"]) for why, n in result["reasons"].items()]
    return "\n\n".join([
        f"### OSWorld tasks cud converts ({result['index']})",
        table(("domain", "tasks", "converted", "rate"), rows),
        f"Why the others are refused ({NOTE}):",
        table(("blocker", "tasks", "alone"), reasons),
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
