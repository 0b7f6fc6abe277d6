"""What a test can see of another process's Unix sockets, by pid (``ss``, from iproute2)."""

from __future__ import annotations

import subprocess

__all__ = ("unread_messages",)


def unread_messages(pid: int) -> int:
    """Messages waiting unread on the Unix sockets of process ``pid`` (ss's Recv-Q): a request it has
    been sent and not read yet, e.g. while it is stopped."""
    lines = subprocess.run(["ss", "-H", "-x", "-p"], capture_output=True, text=True, check=True).stdout.splitlines()
    return sum(int(line.split()[2]) for line in lines if f"pid={pid}," in line)
