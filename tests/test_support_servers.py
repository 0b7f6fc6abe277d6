"""The tests' own servers are the ones they say they are: a VNC server counts as started only on a port it
listens on itself, and a display a test stops to start again is nobody else's meanwhile (#27)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import vnc
from tests.support.listeners import socket_inodes, tcp_listeners
from tests.support.xserver import XServer


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
