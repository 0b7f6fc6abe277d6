"""Removing a directory's contents as root without following a link, at any depth, within a deadline.

``shutil.rmtree`` recurses in Python (3.11): a tree a few thousand levels deep, which a
model can build from a plain prompt, raises ``RecursionError`` and leaves the seat
dirty for good. Here the walk is a loop over an explicit
stack of names: every step is relative to the descriptor of the directory it is in
(``dir_fd``), every directory is opened ``O_NOFOLLOW`` and checked to be the one that
was listed (device and inode), so a link swapped in is removed as a link, never
followed. One descriptor is open at a time (the way back up is ``..``, checked to be
the directory come down from), so no depth runs out of descriptors. An entry that
will not go, a directory replaced meanwhile, or a removal that takes longer than the
deadline fails with :class:`~cud.errors.SessionError` naming the path and why.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
import time
import typing

from cud.errors import SessionError

__all__ = ("remove_contents",)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclasses.dataclass
class _Level:
    """A directory on the way down: its name in the one above, its identity, the names still to look at."""

    name: str
    dev: int
    ino: int
    names: list[str]


def remove_contents(top_fd: int, shown: str, *, deadline: float, what: str) -> int:
    """Remove everything inside the directory open at ``top_fd`` (``shown`` names it in errors); how many entries.

    ``deadline`` is a :func:`time.monotonic` time; ``what`` starts each error's message (the seat). ``top_fd``
    stays open and is the caller's.
    """
    top = os.fstat(top_fd)
    stack = [_Level("", top.st_dev, top.st_ino, os.listdir(top_fd))]
    fd = top_fd  # the directory of stack[-1]; one more descriptor than top_fd at most

    def here(name: str = "") -> str:
        parts = [shown, *(level.name for level in stack[1:]), *([name] if name else [])]
        text = "/".join(parts)
        return text if len(text) <= 300 else f"{text[:150]}...{text[-150:]}"

    removed = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise SessionError(f"{what}: removing {here()!r} ({len(stack) - 1} levels down) did not finish in "
                                   f"time, {removed} entries removed; the home is left as it is", path=here())
            level = stack[-1]
            if not level.names:
                if len(stack) == 1:
                    return removed
                # Up one level, through "..", checked to be the directory we came down from.
                parent = stack[-2]
                up = _open_checked(fd, "..", parent, here, what)
                os.close(fd)
                fd = up
                stack.pop()
                _remove(functools.partial(os.rmdir, level.name, dir_fd=fd), functools.partial(here, level.name), what)
                removed += 1
                continue
            name = level.names.pop()
            try:
                info = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:  # a dead FUSE mount root cannot enter (EACCES, ENOTCONN): named, never raw
                raise SessionError(f"{what}: {here(name)!r} could not be looked at: {exc.strerror}",
                                   path=here(name)) from None
            if not stat.S_ISDIR(info.st_mode):
                _remove(functools.partial(os.unlink, name, dir_fd=fd), functools.partial(here, name), what)
                removed += 1
                continue
            down = _Level(name, info.st_dev, info.st_ino, [])
            sub = _open_checked(fd, name, down, here, what)
            try:
                down.names = os.listdir(sub)
            except OSError as exc:
                os.close(sub)
                raise SessionError(f"{what}: the directory {here(name)!r} could not be read: {exc.strerror}",
                                   path=here(name)) from None
            if fd != top_fd:
                os.close(fd)
            fd = sub
            stack.append(down)
    finally:
        if fd != top_fd:
            os.close(fd)


def _open_checked(fd: int, name: str, expected: _Level, here: typing.Callable[[str], str], what: str) -> int:
    """``name`` in ``fd`` opened as a directory, never through a link, and the very one ``expected`` names."""
    try:
        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        shown = here(expected.name if name != ".." else "")
        raise SessionError(f"{what}: the directory {shown!r} could not be opened: {exc.strerror}",
                           path=shown) from None
    opened = os.fstat(sub)
    if (opened.st_dev, opened.st_ino) != (expected.dev, expected.ino):
        os.close(sub)
        shown = here(expected.name if name != ".." else "")
        raise SessionError(f"{what}: the directory {shown!r} was replaced or moved while it was removed; the home "
                           "is left as it is", path=shown)
    return sub


def _remove(step: typing.Callable[[], None], where: typing.Callable[[], str], what: str) -> None:
    try:
        step()
    except FileNotFoundError:
        pass
    except OSError as exc:
        path = where()
        raise SessionError(f"{what}: {path!r} could not be removed: {exc.strerror}", path=path) from None
