"""One daemon per state directory: an exclusive ``flock`` on ``cud.lock`` there, held for the daemon's life.

A second daemon on a live daemon's state directory would mark its running tasks
interrupted and drop their approvals under it (issue 27), so the daemon takes this
lock before it reads or changes a row, as PostgreSQL's ``postmaster.pid`` and
pueue's lock guard theirs. Why this shape:

* ``flock`` belongs to the open file, and the kernel drops it when the process
  dies, however it dies (``kill -9``, a crash, the OOM killer): there is never a
  stale lock to clear, and the next daemon overwrites the holder recorded in it;
* it is taken on the directory's own file, so every spelling of the path (a
  symlink, ``..``, a relative one) meets the same lock;
* the file is never removed: removing a lock file lets a newcomer lock a fresh
  file while the old holder still holds the removed one;
* the descriptor is close-on-exec, so no child (a hook, ffmpeg) keeps the lock
  after the daemon is gone.

The file's text (pid, host, socket) only names the holder in the refusal; the
lock decides. A state directory on a network or shared filesystem is refused
(:func:`shared_filesystem`): there ``flock`` may hold for this machine only (FUSE
keeps it in the local kernel; NFS mounted ``nolock`` too), so a daemon on another
machine would not see it, and SQLite's WAL, which the store uses, does not work
over a network filesystem either.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket as socket_module
import time
from dataclasses import dataclass
from pathlib import Path

from cud.errors import ConfigError

__all__ = ("LOCK_FILE", "Holder", "StateLock", "filesystem_type", "shared_filesystem")

log = logging.getLogger("cud.state")

#: The lock file, in the state directory beside the database.
LOCK_FILE = "cud.lock"
#: Filesystem types that other machines (or a VM's host) can write to, as /proc/self/mountinfo
#: names them. Every FUSE filesystem ("fuse", "fuse.sshfs", "fuse.rclone", ...) counts too:
#: cud cannot tell a local one from a remote one, and FUSE keeps flock in this kernel.
#: "fuseblk" (ntfs-3g, exfat on a local disk) does not.
SHARED_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "9p", "afs", "coda", "ceph", "glusterfs", "lustre", "gpfs",
    "gfs2", "ocfs2", "orangefs", "beegfs", "virtiofs", "vboxsf", "prl_fs", "davfs", "fuse",
})
#: How long a refused daemon waits for the holder to finish writing its name: it writes
#: right after locking, and the refused one may look in between (a busy machine may
#: hold the holder back for a while there).
HOLDER_READ_WAIT = 2.0


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as the holder wrote it; None where the file does not say."""

    pid: int | None = None
    host: str | None = None
    socket: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return "its pid and socket are not recorded"
        return f"pid {self.pid} on host {self.host!r}, socket {self.socket!r}"


class StateLock:
    """The held lock: an open descriptor of ``LOCK_FILE`` with ``LOCK_EX`` on it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state_dir: Path, socket: Path) -> StateLock:
        """Make ``state_dir`` if need be and lock it for this daemon serving ``socket``, or raise ConfigError.

        Nothing in the directory but the lock file is touched, whatever the outcome.
        """
        # The filesystem is checked before anything is made, on the deepest part of the path that exists.
        existing = next(p for p in (state_dir, *state_dir.parents) if os.path.exists(p))
        fstype = filesystem_type(Path(os.path.realpath(existing)))
        if shared_filesystem(fstype):
            raise ConfigError(
                f"the state directory {str(state_dir)!r} is on a {fstype} filesystem, which other machines can "
                "share: the daemon's lock and SQLite's WAL hold on a local filesystem only; choose a local "
                "directory (--state-dir, state_dir)",
                path=str(state_dir), filesystem=fstype)
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot make the state directory {str(state_dir)!r}: {exc.strerror}",
                              path=str(state_dir)) from None
        real = Path(os.path.realpath(state_dir))
        named = repr(str(state_dir)) if str(state_dir) == str(real) else f"{str(state_dir)!r} ({str(real)!r})"
        path = real / LOCK_FILE
        try:
            # O_NOFOLLOW: a symlink planted as the lock file must not make the daemon lock (or write) elsewhere.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot open the state directory's lock file {str(path)!r}: {exc.strerror}",
                              path=str(path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise ConfigError(
                f"another daemon is already using the state directory {named} ({holder.describe()}); "
                "stop it, or give this one its own --state-dir",
                path=str(state_dir), real_path=str(real), lock_file=str(path),
                pid=holder.pid, host=holder.host, socket=holder.socket) from None
        except OSError as exc:
            os.close(fd)
            raise ConfigError(f"cannot lock the state directory's lock file {str(path)!r}: {exc.strerror}",
                              path=str(path)) from None
        _write_holder(fd, path, Holder(os.getpid(), socket_module.gethostname(), os.path.abspath(socket)))
        return cls(path, fd)

    def release(self) -> None:
        """Give the lock up (closing the descriptor drops it); the file stays for the next daemon."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _write_holder(fd: int, path: Path, holder: Holder) -> None:
    text = json.dumps({"pid": holder.pid, "host": holder.host, "socket": holder.socket}) + "\n"
    try:
        # Over the old text, then cut to length: the old text's block is reused, so even a
        # full disk (which the daemon must start on) seldom refuses this.
        os.pwrite(fd, text.encode(), 0)
        os.ftruncate(fd, len(text.encode()))
    except OSError as exc:  # the lock holds all the same; only a refused daemon's message is poorer
        log.warning("cannot record this daemon in %s: %s", path, exc.strerror)


def _read_holder(fd: int) -> Holder:
    """The holder the lock file names; waits briefly for a holder that has locked but not yet written."""
    deadline = time.monotonic() + HOLDER_READ_WAIT
    while True:
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(os.pread(fd, 4096, 0))
            if isinstance(record, dict) and isinstance(record.get("pid"), int):
                host, sock = record.get("host"), record.get("socket")
                return Holder(record["pid"], host if isinstance(host, str) else None,
                              sock if isinstance(sock, str) else None)
        if time.monotonic() >= deadline:
            return Holder()
        time.sleep(0.01)


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding ``path`` (a real path), as /proc/self/mountinfo names it.

    "ext4", "tmpfs", "nfs4", "fuse.sshfs" (FUSE's subtype is only there, not in statfs).
    The mount is found by the device number (every mount of one filesystem shares its
    type), the deepest mount point over the path deciding between bind mounts; a device
    no mount names (a btrfs subvolume) falls back to the deepest mount point. "" if
    /proc is unreadable.
    """
    device = os.stat(path).st_dev
    wanted = f"{os.major(device)}:{os.minor(device)}"
    by_device: list[tuple[str, str]] = []
    by_path: list[tuple[str, str]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mountinfo:
            lines = mountinfo.read().splitlines()
    except OSError as exc:
        log.warning("cannot read /proc/self/mountinfo (%s): the state directory's filesystem is not checked",
                    exc.strerror)
        return ""
    for line in lines:
        # "36 35 98:0 /root /mount/point opts [optional...] - fstype source super-opts"
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or not tail:
            continue
        point, fstype = _unescape(fields[4]), tail[0]
        if fields[2] == wanted:
            by_device.append((point, fstype))
        if _under(str(path), point):
            by_path.append((point, fstype))
    for mounts in (by_device, by_path):
        over = [m for m in mounts if _under(str(path), m[0])] or mounts
        if over:
            # The deepest mount point; of several on one point the last (the top one) is what is seen.
            return max(reversed(over), key=lambda m: len(m[0]))[1]
    return ""


def shared_filesystem(fstype: str) -> bool:
    """True for a filesystem other machines can write to (see ``SHARED_FILESYSTEMS``)."""
    return fstype in SHARED_FILESYSTEMS or fstype.startswith("fuse.")


def _under(path: str, point: str) -> bool:
    return point == "/" or path == point or path.startswith(point.rstrip("/") + "/")


def _unescape(field: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash in a path as \040, \011, \012, \134."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
