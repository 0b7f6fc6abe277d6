"""Who listens where, read from /proc without connecting: so a test server counts as started only once
the listener is its own, not another process's that took its port or display number first."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("socket_inodes", "tcp_listeners", "unix_listeners")


def tcp_listeners(port: int) -> set[int]:
    """Inodes of the TCP sockets listening on ``port``, on any address."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for fields in (line.split() for line in lines):
            # Field 1 is the local address:port (hex), 3 the state (0A: LISTEN), 9 the inode.
            if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(int(fields[9]))
    return inodes


def unix_listeners(path: str) -> set[int]:
    """Inodes of the Unix stream sockets listening on ``path`` ("@name" for an abstract one)."""
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        # Num RefCount Protocol Flags Type St Inode Path; flag 00010000 is a listening socket.
        if len(fields) == 8 and fields[7] == path and int(fields[3], 16) & 0x10000:
            inodes.add(int(fields[6]))
    return inodes


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds open (none once it is gone)."""
    found = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found.add(int(target[len("socket:["):-1]))
    return found
