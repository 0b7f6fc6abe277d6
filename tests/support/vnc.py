"""Start and stop VNC servers for tests: x11vnc on a test's Xvfb, and TigerVNC's Xvnc.

Both listen on 127.0.0.1 only, with VNC password authentication; both are stopped
by pid. Xvnc picks its own display number (-displayfd), like the test Xvfb. Neither
can pick its own port, so the port is one that was free a moment ago: a server is
ready only once the listener on its port is its own (the socket's inode among the
server's file descriptors), and another process that took the port meanwhile sends
the server to another port, never the test to that process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

from .listeners import socket_inodes, tcp_listeners
from .xserver import read_display_number, stop_process

__all__ = ("PortTaken", "VncServer", "free_port", "start_x11vnc", "start_xvnc", "write_vnc_passwd")

# The fixed key every VNC implementation obfuscates ~/.vnc/passwd with (d3des bit order).
_PASSWD_KEY = bytes((23, 82, 107, 6, 35, 78, 88, 7))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel chose it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_vnc_passwd(path: Path, password: str) -> Path:
    """Write a TigerVNC ``-rfbauth`` password file (what ``vncpasswd -f`` writes)."""
    # d3des numbers key bits from the least significant end; standard DES from the most.
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in _PASSWD_KEY)
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    path.write_bytes(encryptor.update(password.encode()[:8].ljust(8, b"\0")) + encryptor.finalize())
    path.chmod(0o600)
    return path


@dataclass
class VncServer:
    """A running VNC server; ``server`` is what ``VNCDriver`` takes, ``display`` its X display."""

    kind: str
    display: str
    port: int
    password: str
    proc: subprocess.Popen[bytes]
    argv: list[str]
    log: Path

    @property
    def server(self) -> str:
        return f"127.0.0.1::{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc)


class PortTaken(RuntimeError):
    """Another process listens on the port the server was started on."""


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    """Wait until ``proc`` itself listens on ``port``, by reading /proc, without connecting to it.

    A probe connection would count as a failed client to the server (TigerVNC
    blacklists hosts after a few). Someone else's listener there is not the server:
    both servers exit when their port is taken, and then this raises PortTaken.
    """
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        listening = tcp_listeners(port)
        if listening & socket_inodes(proc.pid):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            if listening:
                raise PortTaken(f"another process listens on port {port}; log: {log.read_text(errors='replace')}")
            raise RuntimeError(f"VNC server did not listen on {port}; log: {log.read_text(errors='replace')}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)


def _on_a_free_port(start: Callable[[int], VncServer], port: int | None) -> VncServer:
    """``start(port)``, on ``port`` if given, else on a free one, and another if someone takes it first."""
    for _ in range(5):
        try:
            return start(port or free_port())
        except PortTaken:
            if port:
                raise
    raise RuntimeError("every port the kernel offered was taken before the VNC server could listen (5 tries)")


def start_x11vnc(display: str, workdir: Path, password: str = "s3cret", port: int | None = None,
                 speeds: str | None = "0,100000,1") -> VncServer:
    """x11vnc sharing ``display`` on 127.0.0.1 with a password (read from a file, not argv).

    ``speeds`` None starts it as users do, measuring each client's link itself.
    """
    passwd = workdir / "x11vnc.passwd"
    passwd.write_text(password + "\n")
    passwd.chmod(0o600)
    return _on_a_free_port(lambda chosen: _start_x11vnc(display, workdir, passwd, password, chosen, speeds), port)


def _start_x11vnc(display: str, workdir: Path, passwd: Path, password: str, port: int, speeds: str | None) -> VncServer:
    log = workdir / f"x11vnc-{port}.log"
    # -defer/-wait 5: poll the screen and send updates every 5 ms instead of 20, so
    # tests spend less time waiting; the driver does not depend on it.
    # -speeds 0,100000,1: loopback's bandwidth (KB/s) and latency (ms) given, the read
    # rate (0) still measured. Otherwise x11vnc measures the link once per client, after
    # it first sends it 10 KB or more in one turn of its loop (rates.c,
    # measure_send_rates), holding the client's pointer events back from the X server
    # until the client has answered four rounds; the driver answers them (x11vnc_rating's
    # docstring), and the tests that show it start x11vnc with ``speeds=None``. Given,
    # the link is rated alike in every run (LAN, not "dialup" with longer wireframe
    # timeouts after a slow answer), and the driver's probe finds no measurement.
    argv = ["x11vnc", "-display", display, "-rfbport", str(port), "-localhost", "-no6", "-passwdfile",
            str(passwd), "-forever", "-shared", "-defer", "5", "-wait", "5",
            *(("-speeds", speeds) if speeds is not None else ()), "-norc", "-nocmds", "-noxrecord", "-o", str(log)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(port, proc, log)
    return VncServer("x11vnc", display, port, password, proc, argv, log)


def start_xvnc(workdir: Path, password: str = "s3cret", port: int | None = None, width: int = 1280,
               height: int = 800, security_types: str | None = None, auth: Path | None = None) -> VncServer:
    """TigerVNC's Xvnc on a display it picks, serving RFB on 127.0.0.1 with VncAuth.

    ``security_types`` None keeps Xvnc's default (TLSVnc,VncAuth): the driver must
    pick VncAuth itself. With ``auth``, only holders of a cookie in that file are X clients.
    """
    passwd = write_vnc_passwd(workdir / "xvnc.passwd", password)
    return _on_a_free_port(
        lambda chosen: _start_xvnc(workdir, passwd, password, chosen, width, height, security_types, auth), port)


def _start_xvnc(workdir: Path, passwd: Path, password: str, port: int, width: int, height: int,
                security_types: str | None, auth: Path | None = None) -> VncServer:
    log = workdir / f"xvnc-{port}.log"
    read_fd, write_fd = os.pipe()
    argv = ["Xvnc", "-displayfd", str(write_fd), "-geometry", f"{width}x{height}", "-depth", "24",
            "-rfbport", str(port), "-interface", "127.0.0.1", "-localhost", "-rfbauth", str(passwd),
            "-nolisten", "tcp", "-AlwaysShared"]
    if security_types is not None:
        argv += ["-SecurityTypes", security_types]
    if auth is not None:
        argv += ["-auth", str(auth)]
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(argv, pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log_file,
                                stderr=subprocess.STDOUT)
    os.close(write_fd)
    try:
        display = read_display_number(read_fd, proc, log)
    finally:
        os.close(read_fd)
    _wait_listening(port, proc, log)
    return VncServer("xvnc", display, port, password, proc, argv, log)

