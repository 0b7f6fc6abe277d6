"""Printing for humans and for --json, shared by the command modules."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, TextIO

__all__ = ()


def emit_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=None, separators=(",", ": ")))


#: A cut word is dropped only while what is left keeps this share of the width: one long word
#: (a URL, a path) is cut inside instead of leaving almost nothing.
_KEEP = 0.5
_LAST_WORD = re.compile(r"\s\S*\Z")
#: Left off the end of a cut text, before the "…": a comma or colon there would read as the text's own.
_TRAILING = " \t\n\r\f\v,;:"


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole if it fits, else cut after a whole word, with "…".

    The one shortening of text for people (cuctl's columns and lines, the phrases of
    :mod:`cud.target_phrases` and :mod:`cud.record.model`, the report); whitespace is kept as it is.
    """
    if len(text) <= width:
        return text
    head = text[: max(width - 1, 0)]
    if head and not text[len(head)].isspace():  # the cut falls inside a word: leave that word out
        last = _LAST_WORD.search(head)
        if last is not None and last.start() >= width * _KEEP:
            head = head[: last.start()]
    return head.rstrip(_TRAILING) + "…"


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


# C0 and C1 controls and DEL; a tab or newline in model text would break the line layout too.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters shown as U+FFFD: model text must not drive the terminal."""
    return _CONTROLS.sub("\ufffd", text)


def warn(text: str) -> None:
    print(text, file=sys.stderr)


