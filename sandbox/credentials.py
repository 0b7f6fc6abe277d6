"""The sandbox's secrets: each X server's own cookie, the file of them all the daemon reads, and the VNC password.

Each X server has a cookie of its own, so a holder of one display's cookie (a seat's user, who gets
only its display's entries from the daemon) cannot open another's. All are written mode 0600 and
never pass through argv.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import string
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path

from parts import Settings
from procs import SandboxError

__all__ = ("ensure_vnc_password", "share_xauthorities", "write_xauthority")


def _entries(cookie: bytes, number: bytes) -> bytes:
    """One FamilyLocal entry for this host (python-xlib matches only that kind) and one FamilyWild
    entry, both for display ``number`` (b"": any display)."""

    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    def entry(family: int, address: bytes) -> bytes:
        return struct.pack(">H", family) + b"".join(
            counted(field) for field in (address, number, b"MIT-MAGIC-COOKIE-1", cookie)
        )

    return entry(256, socket.gethostname().encode()) + entry(0xFFFF, b"")


def _replace(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def write_xauthority(path: Path) -> None:
    """A fresh MIT cookie for one X server (its ``-auth`` file), for any display number: the number
    is not known before -displayfd, and the server itself ignores it. Only this server takes it."""
    _replace(path, _entries(secrets.token_bytes(16), b""))


def share_xauthorities(path: Path, servers: Mapping[str, Path]) -> None:
    """The file of every X server's cookie (display -> its ``-auth`` file), each entry for its display's
    number: what the daemon, the probes and the sandbox's owner read. The daemon hands each seat's
    user only its own display's entries (cud.daemon.session.xauth)."""
    from cud.daemon.session.xauth import display_number, parse  # the venv's: the sandbox's `check` needs none

    data = b""
    for display, own in servers.items():
        cookie = parse(own.read_bytes(), source=str(own))[0].data
        data += _entries(cookie, display_number(display))
    _replace(path, data)


def ensure_vnc_password(settings: Settings) -> None:
    """A generated password (kept across restarts, so a watcher's viewer keeps working)."""
    plain, obfuscated = settings.path("vnc-password"), settings.path("vnc-passwd")
    if plain.exists() and obfuscated.exists():
        return
    tool = shutil.which("tigervncpasswd") or shutil.which("vncpasswd")
    if tool is None:
        raise SandboxError("vncpasswd not found: install tigervnc-tools (sandbox/deps.sh)")
    # VNC authentication uses 8 characters at most.
    password = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(8))
    fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    fd = os.open(obfuscated, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        # The password goes through stdin, never argv.
        subprocess.run([tool, "-f"], input=(password + "\n").encode(), stdout=out, check=True)
