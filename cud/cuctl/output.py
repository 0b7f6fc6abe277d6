"""Printing for humans and for --json, shared by the command modules."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

# The shared shortening and control-character filter; cuctl's modules import them from here too.
from cud.phrases.text import cut as cut
from cud.phrases.text import printable as printable

__all__ = ()


def emit_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=None, separators=(",", ": ")))


def short(text: str | None, width: int = 60) -> str:
    """``text`` on one line (runs of whitespace as one space), :func:`cut` to ``width``; "-" for None."""
    if text is None:
        return "-"
    return cut(" ".join(text.split()), width)


#: The narrowest a table's last column is cut to on a narrow terminal (its lines then wrap).
_LAST_COLUMN_MIN = 20


def terminal_columns(stream: TextIO | None = None) -> int | None:
    """How wide the terminal ``stream`` (default stdout) writes to is; None when it is no terminal."""
    stream = sys.stdout if stream is None else stream
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, OSError, ValueError):  # no file descriptor (a test's capture), or closed
        return None


def table(headers: list[str], rows: list[list[str]]) -> None:
    """Columns two spaces apart; on a terminal the last column (the free text) is cut to fit each line."""
    columns = terminal_columns()
    if columns is not None and rows:
        fixed = sum(max(len(h), *(len(r[i]) for r in rows)) + 2 for i, h in enumerate(headers[:-1]))
        room = max(columns - fixed, _LAST_COLUMN_MIN)
        rows = [[*row[:-1], cut(row[-1], room)] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def warn(text: str) -> None:
    print(text, file=sys.stderr)


