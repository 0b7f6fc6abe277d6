"""Checks of single spec values: each error is a SpecError naming the key path and the value.

A key path is written as in the docs: ``setup[2].wait_for.timeout``,
``checks[0].output.include[1]``. The limits are here, once, for cuctl and the daemon.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from typing import Any

from cud.errors import SpecError
from cud.spec.matching import Match
from cud.suggest import closest, did_you_mean

__all__ = ()

#: Longest text a spec holds in one value (a clipboard's text, an expected string).
MAX_TEXT = 64 * 1024
#: Longest path (in the home, or a file on the submitter's side).
MAX_PATH = 1024
#: Most arguments of one command, and the longest argument.
MAX_ARGS = 256
MAX_ARG = 4096
#: Longest check name.
MAX_NAME = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bad(path: str, value: object, wanted: str) -> SpecError:
    return SpecError(f"spec key {path!r} must be {wanted}, got {shown(value)}", key=path, value=shown(value))


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def table(path: str, value: object, allowed: Collection[str]) -> dict[str, Any]:
    """``value`` as a table whose keys are all in ``allowed``; an unknown one gets "did you mean"."""
    if not isinstance(value, dict):
        raise bad(path or "(the spec)", value, "a table")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            where = join(path, str(key))
            near = closest(str(key), allowed)
            raise SpecError(f"unknown spec key {where!r}; {did_you_mean(str(key), allowed)}known here: "
                            f"{', '.join(sorted(allowed))}", key=where, value=shown(key),
                            **({"suggestion": near} if near else {}))
    return value


def one_of_keys(path: str, value: dict[str, Any], kinds: Collection[str], what: str) -> str:
    """The one key of ``kinds`` present in ``value`` (a setup step's or a check's kind)."""
    present = [k for k in kinds if k in value]
    if len(present) != 1:
        where = path
        got = ", ".join(present) if present else "none"
        raise SpecError(f"spec key {where!r} must have exactly one of {', '.join(kinds)} ({what}); it has {got}",
                        key=where, value=shown(sorted(value)))
    return present[0]


def text(path: str, value: object, limit: int = MAX_TEXT, *, blank: bool = False) -> str:
    if not isinstance(value, str):
        raise bad(path, value, "a string")
    if not blank and not value.strip():
        raise bad(path, value, "a non-blank string")
    if len(value) > limit:
        raise SpecError(f"spec key {path!r} is {len(value)} characters long; the limit is {limit}",
                        key=path, value=shown(value), limit=limit)
    if "\x00" in value:
        raise bad(path, value, "text without NUL characters")
    return value


def flag(path: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise bad(path, value, "true or false")
    return value


def number(path: str, value: object, low: float, high: float, unit: str = "") -> float:
    """A finite number from ``low`` (exclusive if 0) to ``high``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad(path, value, f"a number{unit}")
    if not (low < value if low == 0 else low <= value) or value > high:
        wanted = f"above 0 and at most {high:g}" if low == 0 else f"from {low:g} to {high:g}"
        raise bad(path, value, f"a number{unit} {wanted}")
    return float(value)


def integer(path: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad(path, value, f"an integer from {low} to {high}")
    return value


def file_mode(path: str, value: object) -> int:
    """A file's permission bits, said in octal as TOML writes them (``0o644``), not in decimal."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        got = oct(value) if isinstance(value, int) and not isinstance(value, bool) else shown(value)
        raise SpecError(f"spec key {path!r} must be a file mode from 0o0 to 0o777 (setuid, setgid and sticky bits are "
                        f"not set), got {got}", key=path, value=shown(value))
    return value


def items(path: str, value: object, limit: int, *, empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise bad(path, value, "a list")
    if not value and not empty:
        raise bad(path, value, "a non-empty list")
    if len(value) > limit:
        raise SpecError(f"spec key {path!r} has {len(value)} items; the limit is {limit}", key=path,
                        value=shown(value), limit=limit)
    return value


def argv(path: str, value: object) -> tuple[str, ...]:
    """A command as a list of arguments (no shell unless the list names one)."""
    return tuple(text(join(path, i), arg, MAX_ARG, blank=i > 0) for i, arg in enumerate(items(path, value, MAX_ARGS)))


def home_path(path: str, value: object) -> str:
    """A path inside the seat's home: relative, without '..' (the daemon confines it again, symlinks too)."""
    written = text(path, value, MAX_PATH)
    parts = written.split("/")
    if written.startswith("~") or any(p in ("", ".", "..") for p in parts) or _CONTROL.search(written):
        raise bad(path, value, "a path inside the seat's home: relative, like 'Desktop/notes.txt' (no '/' first "
                               "or last, no '..', '.', '//' or control characters)")
    return written


def local_path(path: str, value: object) -> str:
    """A file on the submitter's side, relative to the spec's folder (or absolute)."""
    return text(path, value, MAX_PATH)


def match(path: str, value: object) -> Match:
    written = text(path, value, blank=True)
    try:
        return Match.parse(written)
    except re.error as exc:
        raise SpecError(f"spec key {path!r} is {shown(value)}: not a regular expression after 're:' ({exc})",
                        key=path, value=shown(value)) from None
