"""The ways to reach a daemon: its Unix socket here, or over ssh to ``cuctl dial-stdio`` on another machine.

A :class:`Dialer` makes :class:`Connection`\\ s; each connection is a connected
stream socket that :class:`cud.cuctl.client.Client` and the console's
:class:`cud.console.link.Link` use the same way, whatever is behind it. Over
ssh (:mod:`cud.cuctl.ssh`) the socket is one end of a socketpair whose other
end is ssh's stdin and stdout, as docker's ``-H ssh://`` does it: the daemon
then sees the ssh login user as its peer, so ``[access]`` works unchanged, and
no TCP port is opened anywhere.

When a connection ends before the daemon answered, :meth:`Connection.lost`
says why in one line: for ssh, what ssh (or the remote shell, or the remote
cuctl) printed.

Imports go one way: this module picks :mod:`cud.cuctl.ssh` for a ``--host``;
ssh needs nothing from here (its connection meets :class:`Connection` by shape,
and :class:`~cud.errors.ConnectionFailed` is in :mod:`cud.errors`).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Protocol

from cud.errors import ConnectionFailed

__all__ = ("Connection", "Dialer", "UnixDialer", "dialer_for", "local_dialer")


class Connection(Protocol):
    sock: socket.socket

    def lost(self, what: str) -> ConnectionFailed:
        """The error for a connection that ended early; ``what`` is the fallback ('closed the connection')."""
        ...

    def close(self) -> None: ...


class Dialer(Protocol):
    #: Where the daemon is, as messages name it: ``'/run/cud/cud.sock'`` or ``ssh://vm1``.
    where: str

    def dial(self) -> Connection: ...


def default_socket() -> Path:
    """$CUD_SOCKET, else the daemon's default for this user."""
    if os.environ.get("CUD_SOCKET"):
        return Path(os.environ["CUD_SOCKET"])
    if os.geteuid() == 0:
        return Path("/run/cud/cud.sock")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise ConnectionFailed("no socket: pass --socket PATH or set CUD_SOCKET (XDG_RUNTIME_DIR is unset too)")
    return Path(runtime) / "cud.sock"


class _UnixConnection:
    def __init__(self, sock: socket.socket, where: str) -> None:
        self.sock = sock
        self._where = where

    def lost(self, what: str) -> ConnectionFailed:
        return ConnectionFailed(f"the daemon at {self._where} {what}")

    def close(self) -> None:
        self.sock.close()


class UnixDialer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = repr(str(path))

    def dial(self) -> _UnixConnection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.path))
        except OSError as exc:
            sock.close()
            raise ConnectionFailed(f"cannot connect to the daemon at {self.where}: {exc.strerror or exc}",
                                   path=str(self.path)) from None
        return _UnixConnection(sock, self.where)


def local_dialer(socket_arg: str | None) -> UnixDialer:
    """The socket on this machine: ``--socket``, else :func:`default_socket`."""
    return UnixDialer(Path(socket_arg) if socket_arg else default_socket())


def dialer_for(host: str | None, socket_arg: str | None) -> Dialer:
    """``--host``/$CUD_HOST and ``--socket`` as a dialer: over ssh if a host is given, else the local socket.

    With a host, ``--socket`` (or the URL's path) names the socket on the remote machine.
    """
    host = host if host is not None else os.environ.get("CUD_HOST") or None
    if host is None:
        return local_dialer(socket_arg)
    from cud.cuctl.ssh import SshDialer  # only remote use pays for it

    return SshDialer.from_url(host, socket_arg)
