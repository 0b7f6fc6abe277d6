"""Give the heap's freed memory back to the system (glibc's ``malloc_trim``; nothing elsewhere).

A task's frames and requests make the heap peak at the task's end, and glibc keeps such freed
memory in each thread's arena unless asked (the seats bench measured ~15 MiB a seat kept that way).
So a seat's process trims once its task is over: the daemon's, and the seat's driver process.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

__all__ = ("trim",)


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def trim() -> None:
    if _TRIM is not None:
        _TRIM(0)
