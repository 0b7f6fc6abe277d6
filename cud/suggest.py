""""Did you mean …?": the nearest known name to a mistyped one, for every error about an unknown key.

One helper for the config (``daemon/config.py``, ``daemon/config_values.py``, the
``[request]`` table) and the task spec (``cud/spec``), so a typo reads the same
wherever it is made.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ("closest", "did_you_mean")


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name nearest to ``word`` (difflib's ratio >= 0.6), or None if none is near."""
    found = difflib.get_close_matches(word, sorted(known), n=1)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the nearest known name, or ``""``: to put before a list of the known ones."""
    near = closest(word, known)
    return f"did you mean {near!r}? " if near is not None else ""
