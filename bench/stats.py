"""Timing helpers shared by the benchmarks: medians of repeated runs and typing rates, in one process."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ("median_ms", "table", "typing_rate")


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def typing_rate(send: Callable[[], object], held: Callable[[], str], text: str,
                timeout: float = 120) -> tuple[float, bool]:
    """Characters per second from ``send()`` until ``held()`` is as long as ``text``; and whether it is ``text``."""
    start = time.perf_counter()
    send()
    deadline = start + timeout
    while len(held()) < len(text) and time.perf_counter() < deadline:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    time.sleep(0.3)  # anything still arriving would make it inexact
    return len(text) / elapsed, held() == text


def table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
