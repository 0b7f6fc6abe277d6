"""What the benchmarks read about a process from /proc: resident memory and CPU time.

Read by pid, never by name, so only processes the benchmark started are looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ("Memory", "children", "cpu_seconds", "descendants", "memory", "summed_memory")

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Memory:
    """Resident set of a process, in KiB, as /proc/PID/status splits it."""

    rss: int  # VmRSS: everything resident
    anon: int  # RssAnon: the heap, numpy buffers, thread stacks
    shmem: int  # RssShmem: shared memory, e.g. MIT-SHM segments of screenshots
    threads: int
    #: Proportional set size (smaps_rollup's Pss): each shared page split among the processes sharing it, so
    #: the Pss of processes that share pages (a fork server and its children) adds up to what they take.
    pss: int = 0
    processes: int = 1


def memory(pid: int) -> Memory:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else ""
    pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            pss = int(line.split()[1])
    return Memory(int(fields["VmRSS"]), int(fields["RssAnon"]), int(fields["RssShmem"]), int(fields["Threads"]), pss)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (any of its threads), as they are now."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """The processes started by ``pid``, and by them, and so on (e.g. the daemon's fork server and
    driver processes), as they are now."""
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children(todo.pop())
        found.extend(below)
        todo.extend(below)
    return found


def summed_memory(pids: list[int]) -> Memory:
    """``memory`` of the processes ``pids``, summed (compare their ``pss``: ``rss`` counts a page shared by
    several of them once for each)."""
    parts = [memory(p) for p in pids]
    return Memory(*(sum(getattr(m, f) for m in parts) for f in ("rss", "anon", "shmem", "threads", "pss")),
                  processes=len(parts))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far (all its threads; not its children)."""
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)
