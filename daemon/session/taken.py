"""The seats' homes cud made or took, recorded in the daemon's state directory, and the existing homes it refuses.

A reset empties the home. An existing home with files in it that cud neither made nor took may hold someone's
data (a directory of the seat's user holding a thesis), so config load refuses it, naming the home, a few of its
entries and the key that lets the reset empty it (``empty_existing_home``). An empty existing home is taken as it
is. What cud made (the first reset makes a missing home) or took (at the session's start) is recorded in the
daemon's state directory, never in the home: the home is the seat's user's, who could forge any mark there. The
record is the home's real path with its device and inode, so a directory made again in its place is a stranger
until it is taken again.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from cud.errors import ConfigError

__all__ = ("RECORD_NAME", "Identity", "home_contents", "stranger_reason", "take_home", "taken_homes")

#: The record's file in the daemon's state directory: ``{"/real/path/of/home": [st_dev, st_ino], ...}``.
RECORD_NAME = "seat-homes.json"
#: Entries of a refused home named in the refusal.
SHOWN_ENTRIES = 3
#: Entries counted at most (a refusal says "at least" beyond).
_COUNTED = 1000

Identity = tuple[int, int]

#: Seats' sessions record from threads of their own (asyncio.to_thread); one writer at a time.
_LOCK = threading.Lock()


def taken_homes(state_dir: Path) -> dict[str, Identity]:
    """The homes the daemon of ``state_dir`` made or took, by real path; none if it never recorded one."""
    path = state_dir / RECORD_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the record of the seats' homes {str(path)!r} cannot be read: {exc}; remove it to have "
                          "every existing home with files in it checked again", key="state_dir",
                          value=repr(str(state_dir))) from None
    if not isinstance(data, dict):
        return {}
    return {home: (int(ids[0]), int(ids[1])) for home, ids in data.items()
            if isinstance(home, str) and isinstance(ids, list) and len(ids) == 2
            and all(isinstance(i, int) for i in ids)}


def take_home(state_dir: Path, home: str, identity: Identity) -> None:
    """Record ``home`` (its real path) as the directory ``identity`` that cud made or took: its reset may empty it."""
    with _LOCK:
        homes = taken_homes(state_dir)
        if homes.get(home) == identity:
            return
        homes[home] = identity
        path = state_dir / RECORD_NAME
        staged = state_dir / f".{RECORD_NAME}.{os.getpid()}"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump({k: list(v) for k, v in sorted(homes.items())}, out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(staged, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)


def home_contents(home: str) -> tuple[list[str], int] | None:
    """A few of the entries in the existing directory ``home`` (sorted) and how many there are (at most
    ``_COUNTED``); None if it is empty."""
    names: list[str] = []
    count = 0
    with os.scandir(home) as entries:
        for entry in entries:
            count += 1
            names.append(entry.name)
            if count >= _COUNTED:
                break
    if not names:
        return None
    return sorted(names)[:SHOWN_ENTRIES], count


def stranger_reason(home: str, identity: Identity, taken: Mapping[str, Identity]) -> str | None:
    """Why the existing directory ``home`` (real path, ``identity``) must not be emptied: it holds entries and
    cud neither made nor took it. None if it may be."""
    if taken.get(home) == identity:
        return None
    contents = home_contents(home)
    if contents is None:
        return None
    shown, count = contents
    more = f"at least {count}" if count >= _COUNTED else str(count)
    listed = ", ".join(repr(name) for name in shown) + (", …" if count > len(shown) else "")
    return (f"it already holds {more} entr{'y' if count == 1 else 'ies'} ({listed}) and cud did not make it, "
            "while the reset empties the home")
