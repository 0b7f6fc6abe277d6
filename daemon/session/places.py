"""Which directories may be a seat's home: never one whose reset would wipe what is not the seat's.

A reset empties the home and fills it from the template, so the home must be the
seat's alone. Refused, naming the seat, the key and the path:

* ``/`` and the system's directories (:data:`SYSTEM_DIRS`), and anything inside the
  ones that hold the system itself (:data:`SYSTEM_TREES`: ``/etc/x`` is as bad as ``/etc``);
* the daemon's own home, and a directory that holds it;
* the daemon's state directory: equal to, inside, or holding it; a home holding the daemon's socket;
* another seat's home: equal to, inside, or holding it;
* an existing home of another owner than the seat's user;
* a template inside a seat's home (that seat's user could rewrite what another seat
  resets to), one that holds the home, ``/``, or one that is not a directory.

Paths are compared after resolving symlinks (``realpath``), so a symlink to ``/etc``
is ``/etc``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from cud.errors import ConfigError

__all__ = ("SYSTEM_DIRS", "SYSTEM_TREES", "Place", "check_places")

#: Directories no seat's home may be, because the system or every user keeps things there.
SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/lost+found", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/run/user", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr",
    "/var", "/var/lib", "/var/tmp", "/var/log", "/var/cache",
})
#: Directories nothing inside of which may be a seat's home: the system itself lives there.
SYSTEM_TREES = frozenset({"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
                          "/sbin", "/sys", "/usr"})


@dataclass(frozen=True)
class Place:
    """One seat's places, as configured (``key`` names its table, e.g. ``seats[1].``)."""

    seat: str
    key: str
    home: str
    template: str | None
    uid: int


def _real(path: str) -> PurePosixPath:
    return PurePosixPath(os.path.realpath(path))


def _overlap(a: PurePosixPath, b: PurePosixPath) -> str | None:
    """How ``a`` and ``b`` share files: 'is', 'is inside', 'holds'; None if they do not."""
    if a == b:
        return "is"
    if a.is_relative_to(b):
        return "is inside"
    if b.is_relative_to(a):
        return "holds"
    return None


def _refuse(place: Place, key: str, path: str, why: str) -> ConfigError:
    return ConfigError(f"seat {place.seat!r}: config key '{place.key}{key}' = {path!r} is refused: {why}",
                       key=f"{place.key}{key}", value=repr(path), seat=place.seat)


def check_places(places: Sequence[Place], *, daemon_dirs: Mapping[str, str], daemon_home: str | None) -> None:
    """Refuse the first home or template in ``places`` that a reset must not touch (see the module's text).

    ``daemon_dirs``: what the daemon keeps, by what it is ("the daemon's state directory": its path);
    no home may be, be inside, or hold any of them.
    """
    kept = {what: _real(path) for what, path in daemon_dirs.items()}
    own = _real(daemon_home) if daemon_homes_matter(daemon_home) else None
    homes = [(_real(p.home), p) for p in places]
    for home, place in homes:
        shown = place.home
        if not PurePosixPath(shown).is_absolute():
            raise _refuse(place, "home", shown, "a home is an absolute path")
        if str(home) in SYSTEM_DIRS:
            raise _refuse(place, "home", shown, f"{str(home)!r} is a system directory")
        tree = next((t for t in SYSTEM_TREES if home.is_relative_to(t)), None)
        if tree is not None:
            raise _refuse(place, "home", shown, f"it is inside the system directory {tree!r}")
        if own is not None and _overlap(home, own) in ("is", "holds"):
            raise _refuse(place, "home", shown, f"it {_overlap(home, own)} the daemon's own home {str(own)!r}")
        for what, path in kept.items():
            how = _overlap(home, path)
            if how is not None:
                raise _refuse(place, "home", shown, f"it {how} {what} {str(path)!r}")
        for other_home, other in homes:
            how = _overlap(home, other_home)
            if other is not place and how is not None:
                raise _refuse(place, "home", shown, f"it {how} the home of seat {other.seat!r} ({other.home!r})")
        _check_owner(place, home)
        if place.template is not None:
            _check_template(place, homes)


def daemon_homes_matter(daemon_home: str | None) -> bool:
    """A daemon whose home is '/' or none (a system user's) has no home a seat could wipe."""
    return bool(daemon_home) and _real(daemon_home) != PurePosixPath("/")


def _check_owner(place: Place, home: PurePosixPath) -> None:
    try:
        info = os.lstat(home)
    except FileNotFoundError:
        return  # made, empty, for the user at the first reset
    except OSError as exc:
        raise _refuse(place, "home", place.home, f"it cannot be looked at: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(place, "home", place.home, "it is not a directory")
    if info.st_uid != place.uid:
        raise _refuse(place, "home", place.home, f"it belongs to uid {info.st_uid}, not to the seat's user "
                      f"(uid {place.uid}): a reset would wipe another's files")


def _check_template(place: Place, homes: list[tuple[PurePosixPath, Place]]) -> None:
    assert place.template is not None
    shown = place.template
    template = _real(shown)
    if not PurePosixPath(shown).is_absolute():
        raise _refuse(place, "home_template", shown, "a template is an absolute path")
    if template == PurePosixPath("/"):
        raise _refuse(place, "home_template", shown, "the whole file system is no template")
    for home, other in homes:
        how = _overlap(template, home)
        if how is None:
            continue
        if other is place:
            why = f"it {how} its seat's home ({other.home!r}), which the reset rewrites"
        else:
            why = (f"it {how} the home of seat {other.seat!r} ({other.home!r}), whose user could change what "
                   "this seat resets to")
        raise _refuse(place, "home_template", shown, why)
    if not os.path.isdir(template):
        raise _refuse(place, "home_template", shown, "it is not an existing directory")
