"""Each seat's session in the sandbox: a user of its own, a home, and the template the home resets to.

A seat's reset ends every process of its user (docs/sessions.md), so that user must
be the seat's alone. Run as root, the sandbox makes one: ``cud-XXXXXX-N`` for the
N-th seat, XXXXXX from the sandbox directory's path (two sandboxes on one machine
never share a user), with ``useradd --system`` (no login shell, no home made by
useradd), and writes down that it made it (``seat-users.json``): ``sandbox-down``
stops what still runs as such a user and removes the user and its home again, with its files
and directories at the top of /tmp, /var/tmp and /dev/shm (leftovers.py),
and never a user it did not make. A user of that name that the sandbox did not
make is refused by name. Run as anyone else, the seats' user is the
invoking user (a daemon that is not root can only run sessions as itself), and
nothing is made or removed.

The homes are ``homes/<seat>/`` and the template is ``home-template/`` (made once,
then yours to change) under the sandbox directory, which then must be reachable
by the seats' users: it is made traversable (0711, not listable), and a parent
that is not is refused by name before anything starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from leftovers import remove_files_of
from parts import Seat, Settings
from procs import SandboxError

__all__ = ("SeatSession", "remove_seat_users", "seat_session", "seat_user_name")

#: What the sandbox made, to be removed by ``sandbox-down``: users and their homes.
RECORD = "seat-users.json"
_TEMPLATE_README = """This is the seat's home after every reset: the sandbox copies home-template/ here.
Change .sandbox/home-template/ to change what every seat starts from.
"""


@dataclasses.dataclass(frozen=True)
class SeatSession:
    user: str
    uid: int
    gid: int
    home: Path
    template: Path


def _made(settings: Settings) -> dict[str, str]:
    """The users the sandbox made, each with the home it made for it."""
    try:
        return dict(json.loads(settings.path(RECORD).read_text()))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise SandboxError(f"{settings.path(RECORD)} is not the sandbox's record of its users ({exc})") from None


def _remember(settings: Settings, made: dict[str, str]) -> None:
    path = settings.path(RECORD)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(made, indent=1) + "\n")
    os.replace(temporary, path)


def _reachable(settings: Settings) -> None:
    """Let the seats' users reach their homes and buses under the sandbox directory, or say why they cannot."""
    for parent in settings.dir.parents:
        if not os.stat(parent).st_mode & 0o001:
            raise SandboxError(f"the seats' users cannot reach SANDBOX_DIR {str(settings.dir)!r}: {str(parent)!r} "
                               "is not traversable by others (o+x); choose a directory under one that is, or "
                               f"chmod o+x {parent}")
    os.chmod(settings.dir, os.stat(settings.dir).st_mode & 0o7777 | 0o011)


def _template(settings: Settings) -> Path:
    template = settings.path("home-template")
    if not template.exists():
        (template / "Desktop").mkdir(parents=True)
        (template / "Desktop" / "README.txt").write_text(_TEMPLATE_README)
        template.chmod(0o755)
    return template


def seat_user_name(settings: Settings, seat: Seat) -> str:
    """``cud-XXXXXX-N``: the N-th seat of the sandbox whose directory's path hashes to XXXXXX."""
    tag = hashlib.sha256(os.fsencode(settings.dir)).hexdigest()[:6]
    return f"cud-{tag}-{settings.seat_list.index(seat) + 1}"


def seat_session(settings: Settings, seat: Seat) -> SeatSession:
    """The seat's user, home and template: made now if they are missing (see the module's text)."""
    template = _template(settings)
    homes = settings.path("homes")
    homes.mkdir(mode=0o711, exist_ok=True)
    home = homes / seat.name
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
    else:
        _reachable(settings)
        name = seat_user_name(settings, seat)
        made = _made(settings)
        try:
            entry = pwd.getpwnam(name)
            if name not in made:
                raise SandboxError(f"a user {name!r} exists that this sandbox did not make; a seat's reset ends "
                                   "every process of its user, so the sandbox will not lend it: remove it "
                                   f"(userdel {name}) or choose another SANDBOX_DIR")
        except KeyError:
            done = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell",
                                   "/usr/sbin/nologin", "--comment", "cud sandbox seat", name],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SandboxError(f"cannot make the seat user {name!r}: {done.stderr.strip()}") from None
            made[name] = str(home)
            _remember(settings, made)
            entry = pwd.getpwnam(name)
        if entry.pw_uid == 0:
            raise SandboxError(f"the seat user {name!r} is root; a seat's session needs a user of its own")
    if not home.exists():
        home.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return SeatSession(entry.pw_name, entry.pw_uid, entry.pw_gid, home, template)


def remove_seat_users(settings: Settings, say: object) -> None:
    """``sandbox-down``: end what still runs as each user the sandbox made, then remove the user and its home."""
    made = _made(settings)
    homes = settings.path("homes")
    for name, home in made.items():
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_gecos != "cud sandbox seat" or not Path(home).parent == homes:
            say(f"seat user {name}: left alone (not as the sandbox made it)")  # type: ignore[operator]
            continue
        # Whatever the session left (the daemon's reset would have ended it): userdel refuses a user that runs.
        subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                        "kill", "-KILL", "-1"], capture_output=True)
        # Its uid goes to the next user made: what it left where anyone may write would be that user's. Removed
        # while the uid is still its own (nothing of it runs any more).
        left = remove_files_of(entry.pw_uid)
        done = subprocess.run(["userdel", name], capture_output=True, text=True)
        if done.returncode != 0:
            say(f"seat user {name}: not removed: {done.stderr.strip()}")  # type: ignore[operator]
            continue
        shutil.rmtree(home, ignore_errors=True)
        also = f", and what it left in /tmp, /var/tmp, /dev/shm ({len(left)})" if left else ""
        say(f"seat user {name}: removed, with its home {home}{also}")  # type: ignore[operator]
    settings.path(RECORD).unlink(missing_ok=True)
