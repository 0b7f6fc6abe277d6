"""CPU hogs beside a test: the busy 2-core machine CI runs on, made on purpose."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

__all__ = ("cpu_hogs",)


@contextlib.contextmanager
def cpu_hogs(count: int) -> Iterator[list[int]]:
    """``count`` busy-loop processes, stopped by pid at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
