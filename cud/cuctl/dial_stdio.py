"""cuctl dial-stdio: join stdin and stdout to the daemon's socket, for ``cuctl --host`` on the far side of ssh.

Bytes go both ways untouched. The end of stdin half-closes the socket (the
daemon still finishes its answer, and then closes); the end of the socket, or
a stdout nobody reads any more, ends the relay. Its peer, as the daemon sees
it, is whoever runs it: the ssh login user.
"""

from __future__ import annotations

import errno
import os
import select
import socket

from cud.cuctl.dial import local_dialer
from cud.errors import ConfigError

__all__ = ("relay", "run")

CHUNK = 1 << 16
#: poll() reports these for an fd whether asked for or not.
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def run(host: str | None, socket_arg: str | None) -> int:
    if host is not None:
        raise ConfigError(f"dial-stdio relays to a socket on this machine; drop --host {host!r}", host=host)
    # $CUD_HOST is not read here: it is meant for the machine that runs ssh, not this one.
    conn = local_dialer(socket_arg).dial()
    try:
        relay(0, 1, conn.sock)
    finally:
        conn.close()
    return 0


def relay(in_fd: int, out_fd: int, sock: socket.socket) -> None:
    """Copy ``in_fd`` to ``sock`` and ``sock`` to ``out_fd`` until the socket ends or ``out_fd`` goes away."""
    for fd in (in_fd, out_fd):
        os.set_blocking(fd, True)  # ssh and sshd may hand over non-blocking descriptors
    sock.setblocking(True)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(in_fd, select.POLLIN)
    if out_fd != in_fd:
        poller.register(out_fd, 0)  # errors only: the reader of our output has gone
    reading = True
    while True:
        for fd, events in poller.poll():
            if fd == sock.fileno():
                data = sock.recv(CHUNK)
                if not data or not _write_all(out_fd, data):
                    return
            elif fd == in_fd and reading:
                data = os.read(in_fd, CHUNK) if events & (select.POLLIN | select.POLLHUP) else b""
                if data:
                    sock.sendall(data)
                else:  # the far side sent all it will: pass the half-close on, keep relaying answers
                    reading = False
                    poller.unregister(in_fd)
                    sock.shutdown(socket.SHUT_WR)
                    if in_fd == out_fd:
                        poller.register(out_fd, 0)
            elif fd == out_fd and events & _GONE:
                return


def _write_all(fd: int, data: bytes) -> bool:
    """Write ``data``; False if the reader has gone."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        if exc.errno in (errno.EPIPE, errno.ECONNRESET):
            return False
        raise
    return True
