"""Detaching the mounts a seat's user made in its home or runtime directory, before the reset removes them.

``fusermount3`` is setuid root on Debian (``fuse3``, which sshfs and many desktop packages pull in), so the
seat's user can mount a FUSE file system on any directory it owns: a subdirectory of its home, or the home
itself. The reset's sweep ends the FUSE server but not the mount: the mount point then answers "Transport
endpoint is not connected" (or "Permission denied" to root, since a user's FUSE mount admits only its user),
and it cannot be removed ("Device or resource busy"). Without this module every later reset failed there, and
the seat stayed ``unavailable`` until an admin unmounted it by hand. Other mounts are root's to make (a user
namespace cannot change the daemon's mount table), so fusermount is the path a user has.

Which mounts, read from ``/proc/self/mountinfo`` (the daemon's own mount table, which the removal sees):

- A FUSE mount (``fuse``, ``fuse.*``, ``fuseblk``) whose ``user_id=`` is not root's, at or below the home or
  the runtime directory: a user's, made with fusermount. It is detached (``umount2`` with ``MNT_DETACH``),
  the home itself too when the user mounted over it. ``user_id`` is whoever ran fusermount: the seat's user,
  or the user of another seat if this one's user let it write a directory here; either way the reset is
  about to empty that place.
- Any other mount strictly inside the home or the runtime directory is root's (a bind or tmpfs an admin
  put there): the reset neither detaches it (that would undo the admin's set-up) nor empties it (that
  would remove the admin's files). It fails with the mount named, at every reset until whoever mounted it
  unmounts it. A mount *at* the home or the runtime directory itself (a home on its own file system,
  ``/run/user/UID``) is the admin's place for it and stays.

How: the outermost mounts first (``MNT_DETACH`` takes every mount below one with it, so the walk to a mount
never goes through a file system a user serves, which could hang it), then the mount table is read again,
until none is left. Each mount point is reached from ``/`` one component at a time, every one opened
``O_PATH | O_NOFOLLOW`` relative to the one above, and the descriptor's mount (``mnt_id`` in
``/proc/self/fdinfo``) must be the one mountinfo listed; then ``umount2`` is given ``/proc/self/fd/N``. The
only link the kernel follows there is its own link to that descriptor, so no component a user could swap
is ever resolved by path (``UMOUNT_NOFOLLOW`` on the path would guard its last component only).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
from pathlib import Path

from cud.errors import SessionError

__all__ = ("Mount", "detach_user_mounts", "mounts_at_or_below")

MNT_DETACH = 2
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
#: Passes over the mount table: each detaches every outermost user mount, so two suffice unless mounts
#: keep appearing (nothing of the user's runs by now).
_PASSES = 5
_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclasses.dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``: its mount id, where it is, its type, source and owner."""

    mount_id: int
    path: str
    fstype: str
    source: str
    #: ``user_id=`` of a FUSE mount (who ran fusermount); None for other file systems.
    fuse_user: int | None

    @property
    def a_users(self) -> bool:
        """Whether an unprivileged user made it: a FUSE mount of a uid other than root's."""
        return self.fuse_user is not None and self.fuse_user != 0


def _unescape(field: bytes) -> str:
    """A mountinfo path (space, tab, newline and backslash written as octal escapes) as a file name."""
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def read_mounts() -> list[Mount]:
    """The daemon's mount table, in mountinfo's order (a mount stacked on another comes after it)."""
    with open("/proc/self/mountinfo", "rb") as fh:
        lines = fh.read().splitlines()
    mounts = []
    for line in lines:
        fields = line.split(b" ")
        sep = fields.index(b"-", 6)
        fstype = os.fsdecode(fields[sep + 1])
        fuse_user = None
        if fstype in ("fuse", "fuseblk") or fstype.startswith("fuse."):
            options = {key: value for key, _, value in (o.partition(b"=") for o in fields[sep + 3].split(b","))}
            fuse_user = int(options.get(b"user_id", b"0") or 0)
        mounts.append(Mount(int(fields[0]), _unescape(fields[4]), fstype, _unescape(fields[sep + 2]), fuse_user))
    return mounts


def _at_or_below(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def mounts_at_or_below(top: Path) -> list[Mount]:
    """Every mount at ``top`` (its real path) or below it."""
    where = os.path.realpath(top)
    return [m for m in read_mounts() if _at_or_below(m.path, where)]


def detach_user_mounts(tops: list[Path], what: str) -> int:
    """Detach every user's FUSE mount at or below each of ``tops``; how many were detached.

    :class:`SessionError` (``what`` starts its message) names a mount of root's strictly inside one of them,
    or a mount that could not be detached.
    """
    places = [os.path.realpath(top) for top in tops]
    detached = 0
    for _ in range(_PASSES):
        found = [(m, top) for m in read_mounts() for top in places if _at_or_below(m.path, top)]
        _refuse_roots(found, what)
        users = [m for m, _top in found if m.a_users]
        if not users:
            return detached
        for mount in _outermost(users):
            _detach(mount, what)
            detached += 1
    left = [m.path for top in places for m in mounts_at_or_below(Path(top)) if m.a_users]
    raise SessionError(f"{what}: users' mounts kept appearing in the home while the reset detached them: "
                       f"{left[:5]!r}; the home is left as it is", path=left[0] if left else places[0])


def _refuse_roots(found: list[tuple[Mount, str]], what: str) -> None:
    """SessionError for a mount not of a user's making strictly inside a top (see the module's text)."""
    for mount, top in found:
        if not mount.a_users and mount.path != top:
            raise SessionError(
                f"{what}: {mount.path!r} could not be removed: Device or resource busy: it is a mount point "
                f"({mount.fstype} from {mount.source!r}, mounted by root, not a user's FUSE mount); the reset "
                "neither detaches nor empties it: unmount it (the home is left as it is)",
                path=mount.path, fstype=mount.fstype)


def _outermost(mounts: list[Mount]) -> list[Mount]:
    """The mounts no other of ``mounts`` is above (at one path, the one stacked last: the one seen there)."""
    chosen: dict[str, Mount] = {}
    for mount in mounts:  # mountinfo's order: a mount stacked on another comes after it
        chosen[mount.path] = mount
    paths = sorted(chosen, key=len)
    return [chosen[p] for i, p in enumerate(paths) if not any(_at_or_below(p, q) for q in paths[:i])]


def _detach(mount: Mount, what: str) -> None:
    """``umount2(MNT_DETACH)`` on the mount reached from ``/`` without following a link (module's text)."""
    fd = os.open("/", _PATH_FLAGS)
    try:
        for part in [p for p in mount.path.split("/") if p]:
            try:
                sub = os.open(part, _PATH_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise SessionError(f"{what}: the mount point {mount.path!r} ({mount.fstype}) could not be reached "
                                   f"to detach it: {part!r}: {exc.strerror}; the home is left as it is",
                                   path=mount.path) from None
            os.close(fd)
            fd = sub
        reached = _mount_id(fd)
        if reached != mount.mount_id:
            raise SessionError(f"{what}: {mount.path!r} is no longer the mount point of {mount.fstype} (mount "
                               f"{mount.mount_id}, reached {reached}): moved while the reset detached it; the home "
                               "is left as it is", path=mount.path)
        if _libc().umount2(f"/proc/self/fd/{fd}".encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise SessionError(f"{what}: the mount {mount.path!r} ({mount.fstype}, user id {mount.fuse_user}) could "
                               f"not be detached: {os.strerror(err)}; the home is left as it is", path=mount.path)
    finally:
        os.close(fd)


def _mount_id(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as fh:
        for line in fh:
            if line.startswith("mnt_id:"):
                return int(line.split()[1])
    return -1


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
