"""Seat users for the session tests: temporary system users (as root), else the user running the tests.

A seat's user belongs to the seat (its reset ends every process of it), so the
tests never lend one of the machine's users: as root they create ``cud-t<hex>``
users with ``useradd --system`` and remove them (``userdel``) at the end of the
session, whatever happened. Not as root, a daemon can only run a seat of its own
user, and that is what the tests then use.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cud.daemon.session.user import SeatUser

__all__ = ("SeatUsers", "make_home", "reachable_dir", "seat_users", "session_dir", "tree_hash")


@dataclass
class SeatUsers:
    made: list[str] = field(default_factory=list)

    def make(self) -> SeatUser:
        """A user nobody else uses (as root), else the tests' own."""
        if os.geteuid() != 0:
            return SeatUser.lookup("user", pwd.getpwuid(os.geteuid()).pw_name)
        name = f"cud-t{secrets.token_hex(4)}"
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                        "/usr/sbin/nologin", name], check=True, capture_output=True)
        self.made.append(name)
        return SeatUser.lookup("user", name)

    def end_processes(self, name: str) -> None:
        """Every process of ``name``, a user these tests made (never the tests' own), is killed: signalled as that
        user, so nothing of anyone else's is touched."""
        if name not in self.made:
            return
        entry = pwd.getpwnam(name)
        subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                        "kill", "-KILL", "-1"], capture_output=True)

    def remove_all(self) -> None:
        for name in self.made:
            self.end_processes(name)  # whatever a failed test left running goes first (userdel refuses otherwise)
            subprocess.run(["userdel", name], capture_output=True)
        self.made.clear()


@pytest.fixture(scope="session")
def seat_users() -> Iterator[SeatUsers]:
    users = SeatUsers()
    try:
        yield users
    finally:
        users.remove_all()


def make_home(base: Path, user: SeatUser, name: str = "home") -> Path:
    """An empty directory under ``base`` belonging to ``user``: a seat's home."""
    home = base / name
    home.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.chown(home, user.uid, user.gid)
    return home


@contextlib.contextmanager
def reachable_dir(prefix: str = "cud-sess-") -> Iterator[Path]:
    """A directory for homes and templates that every seat user can reach (pytest's tmp_path is root's 0700),
    removed at the end."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def session_dir() -> Iterator[Path]:
    with reachable_dir() as path:
        yield path


def tree_hash(root: Path) -> str:
    """Everything under ``root`` (itself included): each entry's path, type, mode, symlink target or content.

    Owners are left out: a template is root's, its copy in a home the seat user's.
    """
    digest = hashlib.sha256(f"{stat.S_IMODE(root.lstat().st_mode):o}".encode())
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(top, name)
            info = path.lstat()
            digest.update(f"{path.relative_to(root)}\0{stat.S_IFMT(info.st_mode)}\0{info.st_mode:o}\0".encode())
            if stat.S_ISLNK(info.st_mode):
                digest.update(os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                digest.update(path.read_bytes())
    return digest.hexdigest()
