"""The sandbox's secrets: the X authority cookie every display shares, and the VNC password.

Both are written mode 0600 and never pass through argv.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import string
import struct
import subprocess
from pathlib import Path

from parts import Settings
from procs import SandboxError

__all__ = ("ensure_vnc_password", "write_xauthority")


def write_xauthority(path: Path) -> None:
    """A fresh MIT cookie valid for any display number (the number is not known before -displayfd).

    One FamilyLocal entry for this host (python-xlib matches only that kind)
    and one FamilyWild entry; both with an empty display number, which every
    client library takes to match any display.
    """

    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    cookie = secrets.token_bytes(16)

    def entry(family: int, address: bytes) -> bytes:
        number = b""  # any display
        return struct.pack(">H", family) + b"".join(
            counted(field) for field in (address, number, b"MIT-MAGIC-COOKIE-1", cookie)
        )

    data = entry(256, socket.gethostname().encode()) + entry(0xFFFF, b"")
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


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
