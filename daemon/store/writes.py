"""What every write of the store shares: the timestamps it records, and the full-disk retry of the
writes that finish accepted work."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import ParamSpec, TypeVar

from cud.errors import StorageFull

__all__ = ("finishing", "iso_to_epoch", "now_iso")

_P = ParamSpec("_P")
_R = TypeVar("_R")


def finishing(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A write that records the end or a decision of accepted work: on a full disk it may use the reserve
    (the store's ``on_full``, which frees it), then the write is made once more."""

    @functools.wraps(method)
    def write(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except StorageFull:
            on_full = getattr(args[0], "on_full", None)
            if on_full is None or not on_full():
                raise
            return method(*args, **kwargs)  # the failed transaction was rolled back whole

    return write


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_to_epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
