"""Room on the state directory's disk kept for finishing what was started.

On a full disk the daemon refuses new work but must still record how running
tasks end, what approvers decided and who cancelled what: a few SQLite pages
each. So it keeps a file of ``RESERVE_BYTES`` allocated beside the database and
gives it up the first time a write that finishes or decides accepted work fails
for lack of space (``Store`` retries it once). Screenshots never use that room:
``Trajectories`` writes one only if the disk keeps ``RESERVE_BYTES`` free after
it, so a task fails with ``storage_full`` instead. New submissions need the
reserve in place; it is re-made as soon as the disk has room for it again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

__all__ = ("RESERVE_BYTES", "SpaceReserve", "free_bytes", "is_out_of_space")

log = logging.getLogger("cud.reserve")

#: Enough for thousands of the small writes that end tasks and decide approvals.
RESERVE_BYTES = 2 * 1024 * 1024


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``path``."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def is_out_of_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class SpaceReserve:
    def __init__(self, directory: Path, size: int = RESERVE_BYTES) -> None:
        self.path = directory / ".space-reserve"
        self.size = size

    def ensure(self) -> bool:
        """Whether the reserve is in place, making it first if the disk has room for it twice over."""
        if self.path.exists():
            return True
        try:
            if free_bytes(self.path.parent) < 2 * self.size:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return True
        except OSError as exc:
            if is_out_of_space(exc):
                return False
            raise
        try:
            # Allocated, not sparse: the blocks must really be ours to give back.
            os.posix_fallocate(fd, 0, self.size)
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            if is_out_of_space(exc):
                return False
            raise
        os.close(fd)
        log.info("space reserve of %d bytes in place at %s", self.size, self.path)
        return True

    def has_room(self) -> bool:
        """Whether new work may start: the reserve is in place and as much again is free besides."""
        return self.ensure() and free_bytes(self.path.parent) >= self.size

    def release(self) -> bool:
        """Give the reserved room back to the filesystem; False if there was none to give."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
            log.warning("the disk of %s is full: gave up the %d-byte space reserve to finish running work; "
                        "new tasks are refused until there is room again", self.path.parent, self.size)
            return True
        return False
