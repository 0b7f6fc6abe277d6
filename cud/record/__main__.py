"""``python -m cud.record``: work with an export offline, without the daemon.

    python -m cud.record replay EXPORT > scenario.json    a scenario for the scripted model
    python -m cud.record report EXPORT [-o FILE]          the HTML report of an exported run
"""

from __future__ import annotations

import argparse
import json
import sys

from cud.errors import CudError
from cud.record.export import load_export
from cud.record.html import render
from cud.record.replay import scenario_from_record

__all__ = ()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cud.record", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    replay = sub.add_parser("replay", help="print a scripted-model scenario that replays the export")
    replay.add_argument("export", metavar="EXPORT", help="an export directory or archive")
    replay.add_argument("--no-safety-checks", action="store_true", help="leave the recorded safety checks out")
    report = sub.add_parser("report", help="write the HTML report of an export")
    report.add_argument("export", metavar="EXPORT", help="an export directory or archive")
    report.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        record = load_export(args.export)
        if args.command == "replay":
            scenario = scenario_from_record(record, safety_checks=not args.no_safety_checks)
            print(json.dumps(scenario, ensure_ascii=False, indent=2))
            return 0
        page = render(record)
    except (CudError, ValueError) as exc:
        print(f"python -m cud.record: {exc}", file=sys.stderr)
        return 2
    if args.output:
        from cud.cuctl.report import write_private

        write_private(args.output, page.encode())
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
