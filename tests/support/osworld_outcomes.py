"""What a metric function did with some arguments, in a form two implementations can be compared by.

A differential test calls cud's port and OSWorld's own function (:mod:`tests.support.osworld_reference`)
on the same files and asserts equal :func:`outcome`\\ s: the same score, or the same exception class.
Warnings are ignored here as in the judge's process (pytest makes them errors, which would make
both sides raise alike and hide the comparison).
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ("collect", "outcome")


def outcome(function: Callable[..., Any], *args: Any, **options: Any) -> tuple[str, object]:
    """``("score", float)`` or ``("raised", ExceptionClassName)``; NaN scores as the string "nan"."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            score = function(*args, **options)
        except Exception as exc:
            return "raised", type(exc).__name__
    value = float(score)
    return "score", "nan" if math.isnan(value) else value


def collect() -> None:
    """Collect what the calls left: OSWorld's compare_table leaves its pandas ExcelFiles open, and their
    ResourceWarnings are dropped here rather than raised at some later test's collection, which pytest fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()
