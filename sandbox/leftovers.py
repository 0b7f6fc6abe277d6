"""What earlier runs left: the sandbox's own directories, cleared at each start, and a removed seat user's files.

A directory a part uses at run time (a seat's ``session/``, ``a11y/``, ``a11y-conf/``) is made
afresh, owned by the sandbox's user, every time that part starts (:func:`fresh_dir`): whatever an
earlier run left in it, and whichever uid owns that now (a seat user removed by ``sandbox-down``
leaves its uid to the next system user made), nothing of it is in the way. ``sandbox-down``
removes them (:func:`remove_run_dirs`), and, for every seat user it removes, that user's files
and directories at the top of ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (:func:`remove_files_of`).

Run as root, so nothing here follows a link: an entry is looked at with ``lstat``, a link is
removed as a link, and a directory is removed with ``shutil.rmtree``, which on Linux walks by
descriptors opened ``O_NOFOLLOW`` and never leaves the directory it was given.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from parts import Settings
from procs import SandboxError

__all__ = ("RUN_DIR", "SHARED_TMP", "fresh_dir", "remove_files_of", "remove_run_dirs")

#: The directories a seat's parts use at run time, with the seat's prefix (``seat2.a11y``).
RUN_DIR = re.compile(r"(?:seat[1-9][0-9]*\.)?(?:session|a11y|a11y-conf)")
#: Where any user may leave files, which a removed seat user's uid would go on owning.
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _remove(path: Path) -> None:
    """Remove ``path`` without following a link: a directory with all in it, anything else itself."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def fresh_dir(settings: Settings, name: str, mode: int = 0o755) -> Path:
    """The sandbox directory's run-time directory ``name``, empty and the sandbox's user's own, made now."""
    if not RUN_DIR.fullmatch(name):
        raise AssertionError(name)
    path = settings.path(name)
    try:
        _remove(path)
    except OSError as exc:
        raise SandboxError(f"cannot clear {str(path)!r}, left by an earlier run: {exc}; remove it by hand") from None
    path.mkdir(mode=mode)
    path.chmod(mode)  # whatever the umask
    return path


def remove_run_dirs(settings: Settings, say: object) -> None:
    """``sandbox-down``: the seats' run-time directories (RUN_DIR), every seat's, whatever SEATS says now."""
    if not settings.dir.is_dir():
        return
    for entry in sorted(settings.dir.iterdir()):
        if RUN_DIR.fullmatch(entry.name):
            try:
                _remove(entry)
            except OSError as exc:
                say(f"{entry}: not removed: {exc}")  # type: ignore[operator]


def remove_files_of(uid: int) -> list[str]:
    """A removed user's files and directories at the top of /tmp, /var/tmp and /dev/shm; what was removed.

    Only regular files and directories whose owner is ``uid``: never a link, socket or device.
    """
    if uid in (0, os.geteuid()):
        raise AssertionError(f"uid {uid} is not a removed seat user's")
    removed = []
    for top in SHARED_TMP:
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            path = top / name
            try:
                info = path.lstat()
                if info.st_uid != uid or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    continue
                _remove(path)
            except OSError:
                continue
            removed.append(str(path))
    return removed
