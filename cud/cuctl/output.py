"""Printing for humans and for --json, shared by the command modules."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ()


def emit_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=None, separators=(",", ": ")))


def short(text: str | None, width: int = 60) -> str:
    if text is None:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


# C0 and C1 controls and DEL; a tab or newline in model text would break the line layout too.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters shown as U+FFFD: model text must not drive the terminal."""
    return _CONTROLS.sub("\ufffd", text)


def warn(text: str) -> None:
    print(text, file=sys.stderr)


