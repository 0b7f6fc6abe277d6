"""What the benchmarks read about a process from /proc: resident memory and CPU time.

Read by pid, never by name, so only processes the benchmark started are looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ("Memory", "cpu_seconds", "memory")

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Memory:
    """Resident set of a process, in KiB, as /proc/PID/status splits it."""

    rss: int  # VmRSS: everything resident
    anon: int  # RssAnon: the heap, numpy buffers, thread stacks
    shmem: int  # RssShmem: shared memory, e.g. MIT-SHM segments of screenshots
    threads: int


def memory(pid: int) -> Memory:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else ""
    return Memory(int(fields["VmRSS"]), int(fields["RssAnon"]), int(fields["RssShmem"]), int(fields["Threads"]))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far (all its threads; not its children)."""
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)
