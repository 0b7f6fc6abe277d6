"""The tests' own servers are the ones they say they are: a VNC server counts as started only on a port it
listens on itself, and a display a test stops to start again is nobody else's meanwhile (#27)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.support import vnc
from tests.support.listeners import socket_inodes, tcp_listeners, unix_listeners
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, restart_xvfb, start_xvfb, stop_process


def _squat(port: int = 0) -> socket.socket:
    """Another process's listener on 127.0.0.1 (``port`` 0: one the kernel picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_vnc_server_never_takes_another_listener_on_its_port_for_its_own(xvfb: XServer, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with _squat() as squatter:
        taken = squatter.getsockname()[1]
        # Asked for that port: refused (x11vnc cannot bind it and exits), not handed someone else's listener.
        with pytest.raises(vnc.PortTaken, match=f"port {taken}"):
            vnc.start_x11vnc(xvfb.display, tmp_path, port=taken)
        # A port the kernel offered, taken before the server bound it: the server moves to another.
        offered = iter([taken])
        free_port = vnc.free_port
        monkeypatch.setattr(vnc, "free_port", lambda: next(offered, None) or free_port())
        server = vnc.start_x11vnc(xvfb.display, tmp_path)
        try:
            assert server.port != taken and tcp_listeners(server.port) & socket_inodes(server.pid)
        finally:
            server.stop()


def _display_socket(display: str) -> str:
    return f"@/tmp/.X11-unix/X{display.lstrip(':')}"


def _another_xvfb(display: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(["Xvfb", display, "-nolisten", "tcp"], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def test_a_display_stopped_to_start_again_is_nobody_elses_meanwhile(tmp_path: Path) -> None:
    server = start_xvfb(tmp_path)
    back = other = None
    try:
        server.stop(keep_number=True)
        # Another X server on the number (as a -displayfd server picking the lowest free one would) cannot start.
        other = _another_xvfb(server.display, tmp_path / "other.log")
        try:
            other.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"another X server started on {server.display} while the test kept it")
        assert other.returncode != 0
        back = restart_xvfb(server)
        assert unix_listeners(_display_socket(back.display)) & socket_inodes(back.pid)
    finally:
        for proc in (other, back and back.proc):
            if proc is not None:
                stop_process(proc)
        server.stop()


def test_a_display_restarted_after_another_server_took_it_is_an_error_not_that_server(tmp_path: Path) -> None:
    server = start_xvfb(tmp_path)
    server.stop()  # released: another X server takes the number
    other = _another_xvfb(server.display, tmp_path / "other.log")
    try:
        wait_until(lambda: unix_listeners(_display_socket(server.display)) & socket_inodes(other.pid), 30,
                   f"the other X server on {server.display}")
        with pytest.raises(RuntimeError, match=f"Xvfb {server.display} did not come back"):
            restart_xvfb(server)
        assert other.poll() is None  # untouched
    finally:
        stop_process(other)
