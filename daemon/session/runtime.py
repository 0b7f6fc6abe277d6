"""A session's runtime directory (XDG_RUNTIME_DIR): the user's, inside a directory of root's the user cannot change.

The daemon (often root) writes two files there: the launched programs' log and the
copy of the display's X cookie. A directory the user owns in ``/tmp`` is not safe for
that: ``/tmp``'s sticky bit lets its owner rename it and leave a symlink at its name,
and root then creates (and hands to the user) a file in any directory, or blocks for
ever opening a FIFO. So each seat's directory (0700, the user's) lives in a base
directory that root owns and nobody else may write (0711: the users pass through it,
cannot list or change it): ``/run/cud-sessions`` when the daemon is root and ``/run``
is root's (visible to a systemd unit's commands too, unlike a daemon's private
``/tmp``), else a directory of the daemon's own made in the temporary directory.
The user can neither rename its directory nor put anything at its name.

Every use opens the directory by name from the base's descriptor with ``O_NOFOLLOW``
and checks it is the one made (device, inode, owner); files in it are opened relative
to that descriptor with ``O_NOFOLLOW | O_NONBLOCK`` and refused unless they are regular
files with one link (a FIFO or a hard link the user planted is never written). Removal
is :func:`~cud.daemon.session.remove.remove_contents`: iterative, at any depth, never
through a link, bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cud.daemon.session.remove import remove_contents
from cud.errors import SessionError

__all__ = ("ROOT_BASE", "RuntimeDir")

#: Where root's daemons keep their sessions' runtime directories.
ROOT_BASE = Path("/run/cud-sessions")
#: Seconds the removal of a runtime directory may take.
CLEAR_TIMEOUT = 60.0
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RuntimeDir:
    """One seat's runtime directory, made on first use for the user ``uid``/``gid``, made again after :meth:`clear`."""

    def __init__(self, seat: str, uid: int, gid: int) -> None:
        self.seat = seat
        self.uid = uid
        self.gid = gid
        self._base: Path | None = None
        #: Whether the base is this session's own (the temporary directory's): removed by :meth:`close`.
        self._own_base = False
        #: The directory's name in the base, and the device and inode it was made with.
        self._made: tuple[str, int, int] | None = None

    @property
    def path(self) -> Path | None:
        """The directory's path, None until it is made."""
        return None if self._made is None or self._base is None else self._base / self._made[0]

    @property
    def base(self) -> Path | None:
        """The directory the seat's runtime directory is made in (root's, 0711), once chosen."""
        return self._base

    def ensure(self) -> tuple[Path, bool]:
        """The directory's path, and whether it was made just now (there was none, or it went)."""
        if self._made is not None:
            try:
                with self.opened():
                    return self.path, False  # type: ignore[return-value]  # _made is set only with a base
            except SessionError:
                if self.path is not None and os.path.lexists(self.path):
                    raise  # there, but not the one made: never replaced silently
        base = self._base_dir()
        path = Path(tempfile.mkdtemp(prefix=f"{self.seat}-", dir=base))
        with _open_dir(str(base), path.name) as fd:
            if os.geteuid() == 0:
                os.fchown(fd, self.uid, self.gid)
            info = os.fstat(fd)
        self._made = (path.name, info.st_dev, info.st_ino)
        return path, True

    @contextlib.contextmanager
    def opened(self) -> Iterator[int]:
        """A descriptor of the directory, checked to be the one made and the user's (SessionError if not)."""
        if self._made is None or self._base is None:
            raise SessionError(f"seat {self.seat!r}: its runtime directory is not made yet", seat=self.seat)
        name, dev, ino = self._made
        shown = str(self._base / name)
        try:
            fd = _open_dir_fd(str(self._base), name)
        except OSError as exc:
            raise SessionError(f"seat {self.seat!r}: its runtime directory {shown!r} cannot be opened: "
                               f"{exc.strerror}", seat=self.seat, path=shown) from None
        try:
            info = os.fstat(fd)
            owner = self.uid if os.geteuid() == 0 else os.geteuid()
            if (info.st_dev, info.st_ino, info.st_uid) != (dev, ino, owner):
                raise SessionError(f"seat {self.seat!r}: its runtime directory {shown!r} is no longer the one "
                                   "the daemon made", seat=self.seat, path=shown)
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def open_file(self, name: str, flags: int, mode: int = 0o600) -> Iterator[int]:
        """``name`` in the directory, opened with ``flags`` (never through a link, never blocking), the user's.

        Refused (SessionError naming it) unless it is a regular file with one link, owned by the user or made
        just now: a FIFO, a device, or a hard link to another file the user planted there is never written.
        """
        with self.opened() as dir_fd:
            shown = f"{self.path}/{name}"
            try:
                fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
            except OSError as exc:
                raise SessionError(f"seat {self.seat!r}: {shown!r} in its runtime directory cannot be opened: "
                                   f"{exc.strerror}", seat=self.seat, path=shown) from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or \
                        info.st_uid not in (self.uid, os.geteuid()):
                    raise SessionError(f"seat {self.seat!r}: {shown!r} in its runtime directory is not a regular "
                                       "file of the user's with one link; it is not used", seat=self.seat,
                                       path=shown)
                if os.geteuid() == 0 and info.st_uid != self.uid:
                    os.fchown(fd, self.uid, self.gid)
                yield fd
            finally:
                os.close(fd)

    def unlink(self, name: str) -> None:
        """``name`` in the directory removed (a link as a link), if there."""
        with self.opened() as dir_fd, contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)

    def clear(self) -> None:
        """The directory and all in it removed, at any depth (SessionError naming what stays and why)."""
        if self._made is None or self._base is None:
            return
        name = self._made[0]
        shown = str(self._base / name)
        try:
            with self.opened() as fd:
                remove_contents(fd, shown, deadline=time.monotonic() + CLEAR_TIMEOUT,
                                what=f"seat {self.seat!r}: the runtime directory")
        except SessionError:
            if os.path.lexists(shown):
                raise
        else:
            try:
                base_fd = os.open(self._base, _DIR_FLAGS)
                try:
                    os.rmdir(name, dir_fd=base_fd)
                finally:
                    os.close(base_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise SessionError(f"seat {self.seat!r}: its runtime directory {shown!r} could not be removed: "
                                   f"{exc.strerror}", seat=self.seat, path=shown) from None
        self._made = None

    def close(self) -> None:
        """The directory removed, and the base too if it is this session's own."""
        self.clear()
        if self._own_base and self._base is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._base)
            self._base, self._own_base = None, False

    def _base_dir(self) -> Path:
        if self._base is not None:
            return self._base
        if os.geteuid() == 0 and _only_root_writes(Path("/run")):
            with contextlib.suppress(FileExistsError):
                os.mkdir(ROOT_BASE, 0o711)
            info = os.lstat(ROOT_BASE)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
                raise SessionError(f"{str(ROOT_BASE)!r} is not a directory only root may write; the sessions' "
                                   "runtime directories are not made there", path=str(ROOT_BASE))
            os.chmod(ROOT_BASE, 0o711, follow_symlinks=False)
            self._base = ROOT_BASE
        else:  # the daemon's own, in the temporary directory: nobody else may rename it (the sticky bit)
            self._base = Path(tempfile.mkdtemp(prefix="cud-sessions-"))
            os.chmod(self._base, 0o711)
            self._own_base = True
        return self._base


def _only_root_writes(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o022


def _open_dir_fd(parent: str, name: str) -> int:
    """``name`` in the directory ``parent`` (root's, or the daemon's), opened as a directory, never through a link."""
    parent_fd = os.open(parent, _DIR_FLAGS)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)


@contextlib.contextmanager
def _open_dir(parent: str, name: str) -> Iterator[int]:
    fd = _open_dir_fd(parent, name)
    try:
        yield fd
    finally:
        os.close(fd)
