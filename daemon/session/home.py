"""A seat's home, and every read and write into it confined there.

The home's user runs whatever the model and the setup steps start, so anything in
the home may be a symlink planted a moment ago. The daemon (often root) therefore
never opens a path in the home by name: :class:`SeatHome` walks it one component at
a time from a descriptor of the home (``openat`` with ``O_NOFOLLOW``), reads each
symlink itself and follows it only while it stays inside the home. A path given
with ``..``, an absolute path outside the home, and a symlink that leads out are
refused with :class:`~cud.errors.PathRefused` naming the path as given; a symlink
swapped in between two steps makes the next ``O_NOFOLLOW`` open fail, never lead out.

The home itself is opened by its path, so it is checked each time to be the directory
the session started with (its device and inode, recorded by :meth:`SeatHome.pin`),
still its user's: a directory above it swapped meanwhile (config load refuses a home
below a directory a seat's user can write, so only root could) is a
:class:`~cud.errors.SessionError` naming the home, never a walk somewhere else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cud.errors import CudError, NotFound, PathRefused, SessionError

__all__ = ("MAX_PATH_BYTES", "SeatHome")

#: The longest path accepted (Linux's PATH_MAX).
MAX_PATH_BYTES = 4096
#: Symlinks followed in one path at most (Linux's own limit is 40).
MAX_SYMLINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class _Found:
    """Where a walk ended: the last component ``name`` in the directory ``parent`` (a descriptor)."""

    parent: int
    name: str
    #: The final component's status (not followed), None if it does not exist.
    status: os.stat_result | None
    #: The path reached, relative to the home (symlinks inside the home resolved).
    relative: tuple[str, ...]


class SeatHome:
    """A seat's home directory: ``root`` (its real path), owned by ``uid``/``gid``."""

    def __init__(self, root: Path, uid: int, gid: int) -> None:
        self.root = Path(os.path.realpath(root))
        self.uid = uid
        self.gid = gid
        #: (st_dev, st_ino) of the home the session uses; None until the home was first seen (pin, or a walk).
        self._identity: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"SeatHome({str(self.root)!r})"

    # -- the API -------------------------------------------------------------------------
    def pin(self, *, mode: int | None = None) -> None:
        """Record the home as it is now (at session start, after each reset: it may have been made meanwhile) as
        the one every later walk must find; with ``mode``, give it that mode (0700 at session start: the home
        keeps other seats' users out, the modes inside stay as made). SessionError if it is not a directory of
        the user's."""
        self._identity = None
        fd = self._open_root()
        try:
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)

    @property
    def identity(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the home as last pinned or walked; None before."""
        return self._identity

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The real path ``path`` names in the home (symlinks inside it resolved); refused if it leads out.

        ``for_write``: the path may not exist yet (its parents may not either); without
        it a missing path is :class:`~cud.errors.NotFound`. To read or write, use
        :meth:`read_bytes` and :meth:`write_bytes`: a path resolved now may be a
        symlink a moment later.
        """
        with self._walk(path, create_parents=False, missing_ok=for_write) as found:
            return self.root.joinpath(*found.relative)

    def read_bytes(self, path: str, *, max_bytes: int) -> bytes:
        """The regular file ``path`` names, at most ``max_bytes`` long (longer: refused, naming both sizes)."""
        with self.open_read(path) as (fd, size):
            if size > max_bytes:
                raise CudError(f"{path!r} in the seat's home is {size} bytes; the limit is {max_bytes}",
                               path=path, size=size, limit=max_bytes)
            chunks, total = [], 0
            while total <= max_bytes:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            if total > max_bytes:  # it grew while read
                raise CudError(f"{path!r} in the seat's home is over {max_bytes} bytes, the limit", path=path,
                               limit=max_bytes)
            return b"".join(chunks)

    @contextlib.contextmanager
    def open_read(self, path: str) -> Iterator[tuple[int, int]]:
        """An open descriptor of the regular file ``path`` names, and its size then."""
        with self._walk(path, create_parents=False, missing_ok=False) as found:
            try:
                fd = os.open(found.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=found.parent)
            except OSError as exc:
                raise self._os_error(path, exc, "read") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PathRefused(f"path {path!r} in the seat's home is {_kind(info.st_mode)}, not a regular file",
                                  path=path)
            yield fd, info.st_size
        finally:
            os.close(fd)

    def open_directory(self, path: str | None) -> tuple[int, Path]:
        """A descriptor of the directory ``path`` names (None: the home itself), and its real path.

        The caller closes the descriptor. A command's working directory is entered through it
        (cud.daemon.session.processes), never by a name the user could swap for a link meanwhile.
        """
        if path is None:
            try:
                return os.open(self.root, _DIR_FLAGS), self.root
            except OSError as exc:
                raise CudError(f"the seat's home {str(self.root)!r} cannot be opened: {exc.strerror}",
                               home=str(self.root)) from None
        with self._walk(path, create_parents=False, missing_ok=False) as found:
            if found.status is None or not stat.S_ISDIR(found.status.st_mode):
                raise PathRefused(f"working directory {path!r} in the seat's home is not a directory", path=path)
            try:
                fd = os.open(found.name, _DIR_FLAGS, dir_fd=found.parent)
            except OSError as exc:
                raise self._os_error(path, exc, "open") from None
            return fd, self.root.joinpath(*found.relative)

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Replace (or create) the file ``path`` names with ``data``, at once: parents made, owned by the user."""
        with self.open_write(path, mode=mode) as fd:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

    @contextlib.contextmanager
    def open_write(self, path: str, *, mode: int | None = None) -> Iterator[int]:
        """A descriptor to write the new content of ``path`` to; it replaces the old one only if the block ends well.

        The content goes to a temporary file beside the target, which is renamed over it
        at the end (a reader sees the old file or the new one, never half of it). Without
        ``mode`` an existing file keeps its mode and a new one gets 0644.
        """
        if mode is not None and not 0 <= mode <= 0o7777:
            raise PathRefused(f"mode {mode:o} for {path!r} is not a file mode (0 to 7777 octal)", path=path)
        with self._walk(path, create_parents=True, missing_ok=True) as found:
            if found.status is not None and stat.S_ISDIR(found.status.st_mode):
                raise PathRefused(f"path {path!r} in the seat's home is a directory", path=path)
            keep = stat.S_IMODE(found.status.st_mode) if found.status is not None else 0o644
            temp = f".cud-{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=found.parent)
            except OSError as exc:
                raise self._os_error(path, exc, "write") from None
            done = False
            try:
                self._own(fd)
                yield fd
                os.fchmod(fd, keep if mode is None else mode)
                os.rename(temp, found.name, src_dir_fd=found.parent, dst_dir_fd=found.parent)
                done = True
            except OSError as exc:
                raise self._os_error(path, exc, "write") from None
            finally:
                os.close(fd)
                if not done:
                    with contextlib.suppress(OSError):
                        os.unlink(temp, dir_fd=found.parent)

    # -- the walk -----------------------------------------------------------------------
    def _parts(self, path: str) -> list[str]:
        """``path`` as components relative to the home; what can be refused without looking is refused here."""
        if not isinstance(path, str) or "\x00" in path:
            raise PathRefused(f"path {path!r} is not a path (text without NUL characters)", path=repr(path))
        try:
            size = len(os.fsencode(path))
        except UnicodeError:
            raise PathRefused(f"path {path!r} cannot be a file name here (not encodable)", path=path) from None
        if size > MAX_PATH_BYTES:
            raise PathRefused(f"path {path[:60]!r}... is {size} bytes long; the limit is {MAX_PATH_BYTES}",
                              path=path[:200], size=size)
        if ".." in path.split("/"):
            raise PathRefused(f"path {path!r} has a '..' component: paths stay inside the seat's home", path=path)
        if not path.startswith("/"):
            return [p for p in path.split("/") if p not in ("", ".")]
        inside = _inside(self.root, path)
        if inside is None:
            raise PathRefused(f"path {path!r} is outside the seat's home {str(self.root)!r}", path=path)
        return inside

    @contextlib.contextmanager
    def _walk(self, path: str, *, create_parents: bool, missing_ok: bool) -> Iterator[_Found]:
        pending = self._parts(path)
        if not pending:
            if not missing_ok:  # resolve("") is the home itself
                raise PathRefused(f"path {path!r} names the seat's home itself, not a file in it", path=path)
        stack = [self._open_root()]  # the directories walked, each open: _find appends, this closes them all
        try:
            try:
                found = self._find(path, pending, stack, create_parents=create_parents, missing_ok=missing_ok)
            except OSError as exc:
                # The user may change the home under the walk at any moment (a symlink swapped for a
                # file between its lstat and its readlink gives EINVAL, removed gives ENOENT): every
                # call's failure is cud's error naming the path, never a raw OSError for the caller.
                raise self._os_error(path, exc, "reach") from None
            yield found
        finally:
            for fd in stack:
                os.close(fd)

    def _open_root(self) -> int:
        """A descriptor of the home, checked to be the directory recorded (see the module's text) and its user's."""
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise SessionError(f"the seat's home {str(self.root)!r} cannot be opened: {exc.strerror}",
                               home=str(self.root)) from None
        info = os.fstat(fd)
        seen = (info.st_dev, info.st_ino)
        why = None
        if info.st_uid != self.uid:
            why = f"belongs to uid {info.st_uid}, not to its user (uid {self.uid})"
        elif self._identity is not None and seen != self._identity:
            why = (f"is no longer the directory the session started with (device {self._identity[0]}, inode "
                   f"{self._identity[1]}; now {seen[0]}, {seen[1]}): a directory above it was replaced")
        if why is not None:
            os.close(fd)
            raise SessionError(f"the seat's home {str(self.root)!r} {why}; not touching it", home=str(self.root))
        self._identity = seen
        return fd

    def _find(self, path: str, pending: list[str], stack: list[int], *, create_parents: bool,
              missing_ok: bool) -> _Found:
        """Walk ``pending`` from the home (``stack[0]``), one component at a time, never through a symlink.

        Each directory is opened with ``O_NOFOLLOW`` from the one before it: a directory swapped
        for a symlink after its ``lstat`` fails to open (ELOOP) instead of leading out.
        """
        names: list[str] = []
        hops = 0
        if not pending:
            return _Found(stack[0], ".", os.fstat(stack[0]), ())
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":  # only from a symlink's target: it may climb back as far as the home
                if len(stack) == 1:
                    raise PathRefused(f"path {path!r} leads out of the seat's home through a symlink", path=path)
                os.close(stack.pop())
                names.pop()
                continue
            try:
                info = os.lstat(name, dir_fd=stack[-1])
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise PathRefused(f"path {path!r} goes through more than {MAX_SYMLINKS} symlinks",
                                      path=path)
                try:
                    target = os.readlink(name, dir_fd=stack[-1])
                except OSError as exc:
                    if exc.errno != errno.EINVAL:
                        raise
                    raise CudError(f"path {path!r} in the seat's home changed while it was followed: "
                                   f"{'/'.join([*names, name])!r} was a symlink, then no longer",
                                   path=path) from None
                if target.startswith("/"):
                    inside = _inside(self.root, target)
                    if inside is None:
                        raise PathRefused(f"path {path!r} leads out of the seat's home: a symlink points to "
                                          f"{target!r}", path=path, target=target)
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:], names[:]
                    pending[:0] = inside
                else:
                    pending[:0] = target.split("/")
                continue
            if not pending:  # the last component: the caller opens it
                if info is None and not missing_ok:
                    raise NotFound(f"no {path!r} in the seat's home", path=path)
                return _Found(stack[-1], name, info, (*names, name))
            if info is None and not create_parents:
                if not missing_ok:
                    raise NotFound(f"no {path!r} in the seat's home (no directory {'/'.join([*names, name])!r})",
                                   path=path)
                # Only named, not made (resolve for a write to come): what follows cannot be a symlink.
                reached = [*names, name]
                for rest in pending:
                    if rest == "..":
                        if not reached:
                            raise PathRefused(f"path {path!r} leads out of the seat's home through a symlink",
                                              path=path)
                        reached.pop()
                    elif rest not in ("", "."):
                        reached.append(rest)
                return _Found(stack[-1], name, None, tuple(reached))
            if info is None:
                try:
                    os.mkdir(name, 0o755, dir_fd=stack[-1])
                except FileExistsError:
                    pass  # made meanwhile: opened below like any directory
                except OSError as exc:
                    raise self._os_error(path, exc, "make a directory for") from None
            elif not stat.S_ISDIR(info.st_mode):
                raise PathRefused(f"path {path!r}: {'/'.join([*names, name])!r} in the seat's home is "
                                  f"{_kind(info.st_mode)}, not a directory", path=path)
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=stack[-1])
            except (NotADirectoryError, FileNotFoundError):
                # Swapped since its lstat: O_NOFOLLOW with O_DIRECTORY gives ENOTDIR for a symlink
                # (to a directory outside, say), which is refused here, never followed.
                raise PathRefused(f"path {path!r}: {'/'.join([*names, name])!r} in the seat's home changed while "
                                  "it was opened (no longer a directory)", path=path) from None
            stack.append(fd)
            names.append(name)
            if info is None:
                self._own(fd)
        # Every component was '.' or a symlink's '..' back to a directory: a directory itself.
        return _Found(stack[-1], ".", os.fstat(stack[-1]), tuple(names))

    def _own(self, fd: int) -> None:
        """Give what the daemon made in the home to the home's user (a daemon running as that user has)."""
        if os.geteuid() == 0:
            os.fchown(fd, self.uid, self.gid)

    def _os_error(self, path: str, exc: OSError, what: str) -> CudError:
        if exc.errno == errno.ELOOP:
            return PathRefused(f"path {path!r} in the seat's home turned into a symlink while it was opened",
                               path=path)
        if exc.errno == errno.ENAMETOOLONG:
            return PathRefused(f"path {path!r} has a name too long for the file system", path=path)
        if exc.errno == errno.ENOENT:
            return NotFound(f"no {path!r} in the seat's home", path=path)
        return CudError(f"cannot {what} {path!r} in the seat's home: {exc.strerror}", path=path,
                        errno=exc.errno)


def _inside(root: Path, absolute: str) -> list[str] | None:
    """The components of ``absolute`` below ``root``, or None if it does not start with ``root``.

    What follows the root may hold '..' (a symlink's target): the walk climbs it, and
    refuses a climb above the home.
    """
    parts = [p for p in absolute.split("/") if p not in ("", ".")]
    top = [p for p in str(root).split("/") if p]
    if parts[: len(top)] != top:
        return None
    return parts[len(top):]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a fifo"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "of an unknown type"
