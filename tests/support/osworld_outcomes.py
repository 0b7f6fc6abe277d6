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

__all__ = ("outcome",)


def outcome(function: Callable[..., Any], *args: Any, **options: Any) -> tuple[str, object]:
    """``("score", float)`` or ``("raised", ExceptionClassName)``; NaN scores as the string "nan"."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            score = function(*args, **options)
        except Exception as exc:
            return "raised", type(exc).__name__
        finally:
            # OSWorld's compare_table leaves its pandas ExcelFiles open; they are collected (and their
            # ResourceWarnings dropped) here, not at some later test's collection, where pytest fails them.
            gc.collect()
    value = float(score)
    return "score", "nan" if math.isnan(value) else value
