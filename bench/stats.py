"""Timing helpers shared by the benchmarks: medians of repeated runs, in one process."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ("median_ms", "table")


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
