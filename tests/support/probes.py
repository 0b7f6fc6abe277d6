"""Ask a display or a VNC port what it allows, as an outside client would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ("x_connects", "rfb_security_types")


def x_connects(display: str, xauthority: Path | str) -> bool:
    """Whether a client holding ``xauthority`` may open ``display`` (in a child process)."""
    code = "import sys, Xlib.display; Xlib.display.Display(sys.argv[1]).close()"
    env = {**os.environ, "XAUTHORITY": str(xauthority)}
    result = subprocess.run([sys.executable, "-c", code, display], env=env, capture_output=True, timeout=30)
    return result.returncode == 0


def rfb_security_types(port: int) -> list[int]:
    """The RFB security types the server on 127.0.0.1:``port`` offers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        assert conn.recv(12).startswith(b"RFB 003.")
        conn.sendall(b"RFB 003.008\n")
        count = conn.recv(1)[0]
        return list(conn.recv(count))
