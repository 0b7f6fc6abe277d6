"""Text for people: shortened to a width, and without control characters."""

from __future__ import annotations

import re

__all__ = ("cut", "printable")

#: A cut word is dropped only while what is left keeps this share of the width: one long word
#: (a URL, a path) is cut inside instead of leaving almost nothing.
_KEEP = 0.5
_LAST_WORD = re.compile(r"\s\S*\Z")
#: Left off the end of a cut text, before the "…": a comma or colon there would read as the text's own.
_TRAILING = " \t\n\r\f\v,;:"


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole if it fits, else cut after a whole word, with "…".

    The one shortening of text for people (cuctl's columns and lines, the phrases of
    :mod:`cud.phrases`, the report); whitespace is kept as it is.
    """
    if len(text) <= width:
        return text
    head = text[: max(width - 1, 0)]
    if head and not text[len(head)].isspace():  # the cut falls inside a word: leave that word out
        last = _LAST_WORD.search(head)
        if last is not None and last.start() >= width * _KEEP:
            head = head[: last.start()]
    return head.rstrip(_TRAILING) + "…"


# C0 and C1 controls and DEL; a tab or newline in model text would break the line layout too.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters shown as U+FFFD: model text must not drive the terminal."""
    return _CONTROLS.sub("\ufffd", text)
