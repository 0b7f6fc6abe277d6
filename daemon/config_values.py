"""Checks of single config values; each error names the key and the value (shared by the config modules)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cud.errors import ConfigError
from cud.seat_needs import MAX_SEAT_TAGS, TAG_RULE, is_tag
from cud.suggest import closest, did_you_mean

__all__ = ("bad", "int_in_range", "positive_int", "positive_number", "read_secret_file", "seconds_in_range", "string",
           "table", "tags", "unknown_key")


def bad(key: str, value: object, wanted: str) -> ConfigError:
    return ConfigError(f"config key {key!r} must be {wanted}, got {value!r}", key=key, value=repr(value))


def unknown_key(path: str, name: str, known: Iterable[str], why: str = "") -> ConfigError:
    """The error for the unknown key ``name`` (at ``path``): the closest known key first, then every one.

    ``why`` says more after the path (``": not a Responses parameter ..."``).
    """
    known = sorted(known)
    near = closest(name, known)
    return ConfigError(f"unknown config key {path!r}{why}; {did_you_mean(name, known)}known: {', '.join(known)}",
                       key=path, **({"suggestion": near} if near else {}))


def table(key: str, value: object, allowed: set[str] | frozenset[str]) -> dict[str, Any]:
    """``value`` as a config table whose keys are all in ``allowed``; ``key`` "" is the file's top level."""
    if not isinstance(value, dict):
        raise bad(key, value, "a table")
    for name in value:
        if name not in allowed:
            raise unknown_key(f"{key}.{name}" if key else name, name, allowed)
    return value


def tags(key: str, value: object) -> tuple[str, ...]:
    """A list of tags (``[[seats]] tags``, ``[fleet] tags``), by the one tag rule; each once, in order."""
    if not isinstance(value, list) or len(value) > MAX_SEAT_TAGS:
        raise bad(key, value, f"a list of at most {MAX_SEAT_TAGS} tags")
    for index, tag in enumerate(value):
        if not is_tag(tag):
            raise bad(f"{key}[{index}]", tag, TAG_RULE)
    return tuple(dict.fromkeys(value))


def string(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise bad(key, value, "a non-empty string")
    return value


def positive_number(key: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise bad(key, value, "a number")
    if value < 0 or (value == 0 and not allow_zero) or value == float("inf"):
        raise bad(key, value, "a positive finite number" if not allow_zero else "a finite number >= 0")
    return float(value)


def seconds_in_range(key: str, value: object, low: float, high: float) -> float:
    seconds = positive_number(key, value)
    if not low <= seconds <= high:
        raise bad(key, value, f"a number of seconds from {low:g} to {high:g}")
    return seconds


def positive_int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(key, value, "a positive integer")
    return value


def int_in_range(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad(key, value, f"an integer from {low} to {high}")
    return value


def read_secret_file(path: Path, key: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise ConfigError(f"cannot read {key} {str(path)!r}: {reason}", key=key, path=str(path)) from None
    if not text:
        raise ConfigError(f"{key} {str(path)!r} is empty", key=key, path=str(path))
    return text
