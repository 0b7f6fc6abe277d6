"""Which places a seat's session may use: never a home whose reset wipes what is not the seat's, a template a
seat's user can change, or a secret a seat's user can reach.

A reset empties the home and fills it from the template, as root, and ends every
process of the seat's user. Refused, naming the seat, the key and the path:

* as a home: ``/`` and the system's directories (:data:`SYSTEM_DIRS`), and anything
  inside the ones that hold the system itself (:data:`SYSTEM_TREES`: ``/etc/x`` is as
  bad as ``/etc``); the daemon's own home, and a directory that holds it; the daemon's
  state directory: equal to, inside, or holding it; a home holding the daemon's socket;
  another seat's home: equal to, inside, or holding it; an existing home of another
  owner than the seat's user; an existing home with entries in it that cud neither made nor
  took (:mod:`~cud.daemon.session.taken`), unless ``empty_existing_home`` lets the reset
  empty it; a home below a directory a seat's user (any seat's) can write: its own
  directory, sticky or not (the home is its user's, who may rename it even out of a
  sticky ``/tmp``), or one above that (sticky there is safe: the entry is not that
  user's). Whoever can write there could put a symlink or another directory in
  the home's place and move where root's reset and file access go;
* as a template, where a home is refused (the system's places, the daemon's home, what
  the daemon keeps; and inside what the daemon keeps as well): ``/etc`` or ``/dev`` would
  hand the system's files, devices included, to the seat's user; a template inside a
  seat's home (that seat's user could rewrite what a seat resets to) or holding one;
  ``/``; one that is not a directory; and a tree :func:`~cud.daemon.session.template.template_flaw`
  refuses (a device node, a socket or a FIFO in it; a file a seat's user could change);
* one user for two seats: one seat's reset would end the other's task;
* a secret the daemon reads (``api_key_file``, ``vnc_password_file``, a hook's
  ``secret_file``) or a file it writes (``metrics.textfile``) inside a seat's home or
  template, or where a seat's user can write: the file, its directory, or a directory
  above that (which may be sticky, as ``/tmp``, but not the file's own directory).
* a secret the daemon reads (not the metrics' textfile, written for others to read)
  that a seat's user can read: by its mode for that user (owner, group, others), and
  reachable through directories that user may search. The seat's user runs the
  model's commands (``cuctl exec``, a spec's ``run``), which could send the key anywhere.

Paths are compared after resolving symlinks (``realpath``), so a symlink to ``/etc``
is ``/etc``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeGuard

from cud.daemon.session.taken import Identity, stranger_reason
from cud.daemon.session.template import SeatWriter, seat_reader, seat_writer, template_flaw
from cud.errors import ConfigError

__all__ = ("SYSTEM_DIRS", "SYSTEM_TREES", "Place", "check_existing_homes", "check_places", "check_secrets")

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
    #: The user's name, and its groups (the primary one included), as configured.
    user: str = ""
    groups: tuple[int, ...] = ()
    #: ``empty_existing_home``: the reset may empty an existing home with entries cud did not put there.
    empty_existing: bool = False


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
    """Refuse the first home, template or user in ``places`` that a reset must not touch (see the module's text).

    ``daemon_dirs``: what the daemon keeps, by what it is ("the daemon's state directory": its path);
    no home may be, be inside, or hold any of them, and no template share anything with them.
    """
    kept = {what: _real(path) for what, path in daemon_dirs.items()}
    own = _real(daemon_home) if daemon_homes_matter(daemon_home) else None
    homes = [(_real(p.home), p) for p in places]
    writers = _writers(places)
    _check_users(places)
    for home, place in homes:
        shown = place.home
        if not PurePosixPath(shown).is_absolute():
            raise _refuse(place, "home", shown, "a home is an absolute path")
        why = _system_place(home, own)
        if why is not None:
            raise _refuse(place, "home", shown, why)
        for what, path in kept.items():
            how = _overlap(home, path)
            if how is not None:
                raise _refuse(place, "home", shown, f"it {how} {what} {str(path)!r}")
        for other_home, other in homes:
            how = _overlap(home, other_home)
            if other is not place and how is not None:
                raise _refuse(place, "home", shown, f"it {how} the home of seat {other.seat!r} ({other.home!r})")
        _check_owner(place, home)
        _check_parents(place, home, writers)
        if place.template is not None:
            _check_template(place, homes, kept, own)


def _system_place(path: PurePosixPath, own: PurePosixPath | None) -> str | None:
    """Why ``path`` is the system's or the daemon's (a home or template there is refused), or None."""
    if str(path) in SYSTEM_DIRS:
        return f"{str(path)!r} is a system directory"
    tree = next((t for t in SYSTEM_TREES if path.is_relative_to(t)), None)
    if tree is not None:
        return f"it is inside the system directory {tree!r}"
    if own is not None and _overlap(path, own) in ("is", "holds"):
        return f"it {_overlap(path, own)} the daemon's own home {str(own)!r}"
    return None


def _check_users(places: Sequence[Place]) -> None:
    """A reset ends every process of the seat's user: two seats of one user would end each other's tasks."""
    first: dict[int, Place] = {}
    for place in places:
        other = first.setdefault(place.uid, place)
        if other is not place:
            name = place.user or f"uid {place.uid}"
            raise ConfigError(f"seats {other.seat!r} and {place.seat!r} both run as user {name!r} (uid {place.uid}): "
                              "a seat's reset ends every process of its user, so one seat's reset would end the "
                              "other's task; give each seat a user of its own",
                              key=f"{place.key}user", value=repr(name), seat=place.seat)


def daemon_homes_matter(daemon_home: str | None) -> TypeGuard[str]:
    """A daemon whose home is '/' or none (a system user's) has no home a seat could wipe."""
    if not daemon_home:
        return False
    return _real(daemon_home) != PurePosixPath("/")


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


def check_existing_homes(places: Sequence[Place], taken: Mapping[str, Identity]) -> None:
    """Refuse an existing home holding entries that cud neither made nor took (``taken``: its record,
    cud.daemon.session.taken), unless its seat's ``empty_existing_home`` lets the reset empty it. Run after
    :func:`check_places` (the home is a directory of the seat's user) and :func:`check_secrets` (a secret in a
    home is the more telling refusal)."""
    for place in places:
        if place.empty_existing:
            continue
        home = str(_real(place.home))
        try:
            info = os.lstat(home)
            why = stranger_reason(home, (info.st_dev, info.st_ino), taken)
        except FileNotFoundError:
            continue  # made, empty, for the user at the first reset
        except OSError as exc:
            raise _refuse(place, "home", place.home, f"it cannot be listed: {exc.strerror}") from None
        if why is not None:
            raise _refuse(place, "home", place.home, f"{why}; move them elsewhere, or set "
                          f"'{place.key}empty_existing_home = true' to let the reset delete them")


def _check_parents(place: Place, home: PurePosixPath, writers: Sequence[SeatWriter]) -> None:
    """Refuse a home below a directory a seat's user can write (see the module's text)."""
    for parent in home.parents:
        try:
            info = os.lstat(parent)
        except FileNotFoundError:
            continue  # the reset cannot make the home there either: it says so
        except OSError as exc:
            raise _refuse(place, "home", place.home, f"the directory {str(parent)!r} above it cannot be looked at: "
                          f"{exc.strerror}") from None
        who = seat_writer(info, writers, sticky_ok=parent != home.parent)
        if who is not None:
            raise _refuse(place, "home", place.home, f"the directory {str(parent)!r} above it can be written by "
                          f"{who}, who could put a symlink or another directory in the home's place; keep homes "
                          "in a directory only root can write (e.g. /var/lib/cud-seats, 0755)")


def _check_template(place: Place, homes: list[tuple[PurePosixPath, Place]], kept: Mapping[str, PurePosixPath],
                    own: PurePosixPath | None) -> None:
    everyone = [p for _home, p in homes]
    assert place.template is not None
    shown = place.template
    template = _real(shown)
    if not PurePosixPath(shown).is_absolute():
        raise _refuse(place, "home_template", shown, "a template is an absolute path")
    if template == PurePosixPath("/"):
        raise _refuse(place, "home_template", shown, "the whole file system is no template")
    why = _system_place(template, own)
    if why is not None:
        raise _refuse(place, "home_template", shown, f"{why}: the reset would hand its files to the seat's user")
    for what, path in kept.items():
        how = _overlap(template, path)
        if how is not None:
            raise _refuse(place, "home_template", shown, f"it {how} {what} {str(path)!r}: the reset would hand "
                          "the daemon's files to the seat's user")
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
    flaw = template_flaw(template, _writers(everyone))
    if flaw is not None:
        raise _refuse(place, "home_template", shown, flaw)


def check_secrets(files: Mapping[str, str], places: Sequence[Place], *, written: Collection[str] = ()) -> None:
    """Refuse a file of the daemon's (a secret it reads, a file it writes), by its key in ``files``, that a seat's
    user could read or replace: inside a seat's home or template, or where one of ``places``' users can write;
    and a secret (every key but those in ``written``, the files the daemon writes for others to read) that one
    of them can read (:func:`~cud.daemon.session.template.seat_reader`)."""
    guarded = _writers(places)
    for key, shown in files.items():
        real = _real(shown)
        for place in places:
            for what, where in (("home", place.home), ("template", place.template)):
                if where is not None and real.is_relative_to(_real(where)):
                    raise _refused(key, shown, f"it is inside the {what} of seat {place.seat!r} ({where!r}), "
                                   "whose user could read or replace it")
        for path in (real, *real.parents):
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue  # a file the daemon makes (the metrics' textfile): its directory is what counts
            except OSError as exc:
                raise _refused(key, shown, f"{str(path)!r} cannot be looked at: {exc.strerror}") from None
            # Sticky (/tmp) keeps others from renaming what is in it, not from making the file before the daemon.
            who = seat_writer(info, guarded, sticky_ok=path not in (real, real.parent))
            if who is not None:
                where = "it" if path == real else f"the directory {str(path)!r} it is in"
                raise _refused(key, shown, f"{where} can be written by {who}, who could replace it")
        who = None if key in written else seat_reader(real, guarded)
        if who is not None:
            raise _refused(key, shown, "a seat's user runs the model's commands, which could send the secret "
                           f"anywhere, and it can be read by {who}")


def _refused(key: str, path: str, why: str) -> ConfigError:
    return ConfigError(f"config key '{key}' = {path!r} is refused: {why}", key=key, value=repr(path))


def _writers(places: Sequence[Place]) -> list[SeatWriter]:
    """The seats' users who could write (or read) a file of the daemon's; a daemon's own seat cannot be kept from
    itself."""
    return [SeatWriter(p.seat, p.uid, p.groups) for p in places if p.uid != os.geteuid()]
