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
import stat
from pathlib import Path
from typing import Protocol

from cud.errors import ConnectionFailed

__all__ = ("Connection", "Dialer", "UnixDialer", "dialer_for", "local_dialer", "sandbox_socket")


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


#: The file a sandbox's daemon (``make sandbox-up``) listens on, in the sandbox's directory.
SANDBOX_SOCKET = "cud.sock"
#: The record the sandbox keeps of its running daemon (sandbox/procs.py), removed by ``make sandbox-down``.
SANDBOX_DAEMON_RECORD = "run/daemon.json"


def default_socket() -> tuple[Path, str]:
    """$CUD_SOCKET, else the daemon's default for this user; and where the path came from, for errors."""
    if os.environ.get("CUD_SOCKET"):
        return Path(os.environ["CUD_SOCKET"]), "$CUD_SOCKET names it"
    if os.geteuid() == 0:
        return Path("/run/cud/cud.sock"), "the default as root"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise ConnectionFailed("no socket: pass --socket PATH or set CUD_SOCKET (XDG_RUNTIME_DIR is unset too)"
                               + _sandbox_hint(None))
    return Path(runtime) / "cud.sock", "the default: $XDG_RUNTIME_DIR/cud.sock"


def _mode(path: Path) -> int | None:
    """``path``'s file type and mode, or None where it is absent or out of reach."""
    try:
        return path.stat().st_mode
    except OSError:
        return None


def sandbox_socket() -> Path | None:
    """The socket of a sandbox that is up, or None.

    A sandbox lives in $SANDBOX_DIR, else ``.sandbox/`` of the clone it was started from: the
    current directory, or the source tree this cuctl runs from (a ``make setup`` venv's
    editable install). It is up while its record of the daemon and the daemon's socket exist.
    """
    places = [Path(os.environ["SANDBOX_DIR"])] if os.environ.get("SANDBOX_DIR") else []
    places += [Path.cwd() / ".sandbox", Path(__file__).resolve().parents[2] / ".sandbox"]
    for place in places:
        record, sock = _mode(place / SANDBOX_DAEMON_RECORD), _mode(place / SANDBOX_SOCKET)
        if record is not None and stat.S_ISREG(record) and sock is not None and stat.S_ISSOCK(sock):
            return place / SANDBOX_SOCKET
    return None


def _shown(path: Path) -> str:
    """``path`` as a person would type it here: relative below the current directory, else absolute."""
    absolute = Path(os.path.abspath(path))
    return str(absolute.relative_to(Path.cwd())) if absolute.is_relative_to(Path.cwd()) else str(absolute)


def _sandbox_hint(tried: Path | None) -> str:
    found = sandbox_socket()
    if found is None or (tried is not None and os.path.abspath(found) == os.path.abspath(tried)):
        return ""
    return f" (a sandbox's daemon listens on {_shown(found)!r})"


def _why_not(path: Path, exc: OSError) -> str:
    """Why connecting to ``path`` failed, in words: a path that is no socket says what it is instead."""
    mode = _mode(path)
    if mode is None:
        return exc.strerror or str(exc)
    if stat.S_ISSOCK(mode):
        if isinstance(exc, ConnectionRefusedError):
            return "nothing listens on that socket (a daemon that stopped may have left it)"
        return exc.strerror or str(exc)
    what = "a directory" if stat.S_ISDIR(mode) else "a regular file" if stat.S_ISREG(mode) else "a special file"
    return f"it is {what}, not a socket"


class _UnixConnection:
    def __init__(self, sock: socket.socket, where: str) -> None:
        self.sock = sock
        self._where = where

    def lost(self, what: str) -> ConnectionFailed:
        return ConnectionFailed(f"the daemon at {self._where} {what}")

    def close(self) -> None:
        self.sock.close()


class UnixDialer:
    """The daemon's socket at ``path``; ``origin`` says where the path came from, if not from --socket."""

    def __init__(self, path: Path, origin: str = "") -> None:
        self.path = path
        self.origin = origin
        self.where = repr(str(path))

    def dial(self) -> _UnixConnection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.path))
        except OSError as exc:
            sock.close()
            origin = f" ({self.origin})" if self.origin else ""
            raise ConnectionFailed(
                f"cannot connect to the daemon at {self.where}: {_why_not(self.path, exc)}{origin}; name the "
                "daemon's socket with --socket PATH or CUD_SOCKET=PATH" + _sandbox_hint(self.path),
                path=str(self.path)) from None
        return _UnixConnection(sock, self.where)


def local_dialer(socket_arg: str | None) -> UnixDialer:
    """The socket on this machine: ``--socket``, else :func:`default_socket`."""
    if socket_arg:
        return UnixDialer(Path(socket_arg))
    return UnixDialer(*default_socket())


def dialer_for(host: str | None, socket_arg: str | None) -> Dialer:
    """``--host``/$CUD_HOST and ``--socket`` as a dialer: over ssh if a host is given, else the local socket.

    With a host, ``--socket`` (or the URL's path) names the socket on the remote machine.
    """
    host = host if host is not None else os.environ.get("CUD_HOST") or None
    if host is None:
        return local_dialer(socket_arg)
    from cud.cuctl.ssh import SshDialer  # only remote use pays for it

    return SshDialer.from_url(host, socket_arg)
