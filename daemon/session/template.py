"""What a home's template may be: a tree no seat's user can change, holding only files, directories and symlinks.

The reset copies the template into the home as root and gives every copy to the
seat's user, so whatever the template holds becomes the user's: a device node
there would be a device of the user's (``/dev`` as a template hands over every
disk), and a template a seat's user can write lets that user choose what the
next reset writes as root (the whole class of item 1 of issue 41). So, for the
template's real path (symlinks resolved):

* it and everything in it belongs to root or to the daemon's own user (a daemon
  that is not root runs its one seat as itself), and nothing in it is writable by
  its group or by others;
* no directory above it is a seat's user's, or writable by one through its group
  or as anyone (unless sticky, as ``/tmp``: nobody but the owner renames what is
  in it): that user could put another tree in the template's place;
* it holds only directories, regular files and symlinks: no device node, socket
  or FIFO.

Checked at config load (:mod:`cud.daemon.session.places`, with the places a
template may not be) and again at each reset, before the reset touches anything
(:meth:`cud.daemon.session.processes.SeatSession.reset`): the tree can change
while the daemon runs. The walk is iterative (a deep tree cannot exhaust Python's
stack) and never follows a symlink.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ("SeatWriter", "seat_reader", "seat_writer", "template_flaw")

#: What a template may hold; anything else would become the seat user's own device, socket or FIFO.
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFREG: "a file", stat.S_IFLNK: "a symlink"}
_OTHER_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket",
                stat.S_IFIFO: "a FIFO"}


def _owners() -> frozenset[int]:
    """Who may own a template's files: root, and the daemon's own user."""
    return frozenset({0, os.geteuid()})


def _foreign(info: os.stat_result) -> str | None:
    """Why an entry of the template could be changed by someone but root and the daemon (None: it cannot)."""
    if info.st_uid not in _owners():
        return f"belongs to uid {info.st_uid}"
    if stat.S_ISLNK(info.st_mode):
        return None  # a symlink's own mode means nothing
    if info.st_mode & 0o022:
        whom = "its group and others" if info.st_mode & 0o022 == 0o022 else (
            "its group" if info.st_mode & 0o020 else "others")
        return f"is writable by {whom} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


@dataclass(frozen=True)
class SeatWriter:
    """A seat's user, as far as who may write or read a file goes."""

    seat: str
    uid: int
    #: Its groups, the primary one included.
    groups: tuple[int, ...]


def seat_writer(info: os.stat_result, writers: Sequence[SeatWriter], *, sticky_ok: bool) -> str | None:
    """Which of ``writers`` can write what ``info`` describes, in words (None: none can).

    ``sticky_ok``: ``info`` is a directory above the file, where the sticky bit keeps others from renaming it.
    """
    for writer in writers:
        if info.st_uid == writer.uid:
            return f"seat {writer.seat!r}'s user, who owns it"
    if sticky_ok and info.st_mode & stat.S_ISVTX:
        return None
    if info.st_mode & 0o002:
        return f"everyone (mode {stat.S_IMODE(info.st_mode):04o}), seats' users too"
    if info.st_mode & 0o020:
        for writer in writers:
            if info.st_gid in writer.groups:
                return f"seat {writer.seat!r}'s user, through its group (gid {info.st_gid})"
    return None


def seat_reader(path: str | os.PathLike[str], readers: Sequence[SeatWriter]) -> str | None:
    """Which of ``readers`` can read the file at ``path`` (a secret of the daemon's), in words with the fix; None
    if none can. The kernel's rule, for the file's real path:

    * its owner can always read it (it may chmod it); a member of its group (primary or supplementary) gets
      the group's bits and only those, anyone else the others' bits;
    * and it must reach it: each directory above is searchable by that user, by the same rule with ``x``. A
      file it may read by mode but not reach is safe (0644 in a root 0700 directory), unless it has another
      name (a hard link) the walk does not see;
    * a POSIX ACL on the file can grant what its mode does not show, so a file with one counts as readable; one
      on a directory above counts as letting everyone through.
    """
    real = PurePosixPath(os.path.realpath(path))
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return None  # nothing to read yet; reading it fails at start
    acl = _has_acl(real)
    above = []
    for parent in real.parents:
        try:
            above.append((os.stat(parent), _has_acl(parent)))
        except OSError as exc:
            return f"the directory {str(parent)!r} above it cannot be looked at: {exc.strerror}"
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    for reader in readers:
        if info.st_uid == reader.uid:
            return f"seat {reader.seat!r}'s user, who owns it; give it to root (chown root: it, chmod 600)"
        if not acl and not _may(info, reader, 0o4):
            continue
        if info.st_nlink < 2 and not all(dir_acl or _may(dir_info, reader, 0o1) for dir_info, dir_acl in above):
            continue  # a directory above keeps this user out
        if acl:
            return f"seat {reader.seat!r}'s user, as its POSIX ACL may allow; remove the ACL (setfacl -b) and chmod 600"
        if info.st_gid in reader.groups:
            return (f"seat {reader.seat!r}'s user, through its group (gid {info.st_gid}, {mode}); chmod 600, or "
                    "give it a group that user is not in")
        return f"every user ({mode}), seat {reader.seat!r}'s too; chmod 600"
    return None


def _may(info: os.stat_result, reader: SeatWriter, bits: int) -> bool:
    """Whether the mode of ``info`` gives ``reader``, not its owner, ``bits`` (as others' bits: 4 read, 1 search)."""
    if info.st_uid == reader.uid:
        return True  # its owner may chmod it
    shift = 3 if info.st_gid in reader.groups else 0  # a group member gets the group's bits, never the others'
    return (info.st_mode >> shift) & bits == bits


def _has_acl(path: PurePosixPath) -> bool:
    """Whether ``path`` has a POSIX access ACL (a file system without them has none)."""
    try:
        os.getxattr(path, "system.posix_acl_access")
    except OSError:
        return False
    return True


def template_flaw(path: str | os.PathLike[str], writers: Sequence[SeatWriter]) -> str | None:
    """Why the tree at ``path`` may not be a template of seats whose users are ``writers`` (see the module's
    text), in words; None if it may."""
    real = PurePosixPath(os.path.realpath(path))
    owners = " or ".join(f"uid {uid}" for uid in sorted(_owners()))
    for parent in reversed(real.parents):
        try:
            info = os.lstat(parent)
        except OSError as exc:
            return f"the directory {str(parent)!r} above it cannot be looked at: {exc.strerror}"
        who = seat_writer(info, writers, sticky_ok=True)
        if who is not None:
            return (f"the directory {str(parent)!r} above it can be written by {who}, who could put another tree "
                    "in its place")
    stack = [real]
    while stack:
        here = stack.pop()
        shown = "it" if here == real else repr(str(here.relative_to(real)))
        try:
            info = os.lstat(here)
        except OSError as exc:
            return f"{shown} cannot be looked at: {exc.strerror}"
        kind = stat.S_IFMT(info.st_mode)
        if kind not in _KINDS:
            what = _OTHER_KINDS.get(kind, f"of file type {kind:o}")
            return (f"{'it is' if here == real else f'it holds {shown},'} {what}: the reset would hand it to the "
                    "seat's user; a template holds only directories, files and symlinks")
        if here == real and kind != stat.S_IFDIR:
            return "it is not a directory"
        why = _foreign(info)
        if why is not None:
            return (f"{'it' if here == real else f'{shown} in it'} {why}: only {owners} may own or write a "
                    "template's files, or a seat's user could change what the reset writes as root")
        if kind == stat.S_IFDIR:
            try:
                with os.scandir(here) as entries:
                    stack.extend(here / entry.name for entry in entries)
            except OSError as exc:
                return f"{shown} cannot be read: {exc.strerror}"
    return None
