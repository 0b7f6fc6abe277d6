"""``cuctl --host ssh://[USER@]HOST[:PORT][/socket]``: reach a daemon on another machine through ssh.

Each connection runs ``ssh -T [-l USER] [-p PORT] -o ConnectTimeout=10 -- HOST
cuctl dial-stdio [--socket PATH]`` with its stdin and stdout on one end of a
socketpair. ssh is the user's own (``$CUD_SSH_COMMAND`` replaces it, split
like a shell would, as ``$GIT_SSH_COMMAND`` does for git), so their
``~/.ssh/config``, agent and ProxyJump all apply. ssh joins the remote
command's words with spaces for the remote shell, so every word is quoted
here: a socket path with spaces or quotes arrives as one argument.
``$CUD_REMOTE_CUCTL`` names the remote cuctl when it is not on the remote
PATH (``/opt/cud/.venv/bin/cuctl``).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from typing import IO
from urllib.parse import unquote, urlsplit

from cud.cuctl.output import printable
from cud.errors import ConfigError, ConnectionFailed

__all__ = ("CONNECT_TIMEOUT", "SshDialer", "SshTarget")

#: Seconds ssh may take to open the TCP connection (ssh's ConnectTimeout).
CONNECT_TIMEOUT = 10
#: Seconds a closed connection's ssh gets to finish by itself before it is stopped.
CLOSE_GRACE = 2.0
#: What the URL may look like, for error messages.
FORM = "ssh://[USER@]HOST[:PORT][/path/to/socket]"
#: ssh's note on a first connection, not a reason for anything.
_NOISE = ("Warning: Permanently added",)


@dataclass
class SshTarget:
    """A parsed ``--host`` URL; ``socket`` is the remote socket's path, if it names one."""

    url: str
    host: str
    user: str | None
    port: int | None
    socket: str | None

    @classmethod
    def parse(cls, url: str) -> SshTarget:
        def bad(why: str) -> ConfigError:
            return ConfigError(f"--host/CUD_HOST must be {FORM}: {why}, got {url!r}", host=url)

        parts = urlsplit(url)
        if parts.scheme != "ssh":
            raise bad("the only scheme is ssh://")
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise bad("no ?query or #fragment")
        if parts.password is not None:
            raise bad("no password in the URL (ssh asks for one, or use a key)")
        host = parts.hostname
        if not host:
            raise bad("no host")
        if host.startswith("-"):
            raise bad("a host cannot start with '-'")
        try:
            port = parts.port
        except ValueError:
            raise bad("the port must be a number from 1 to 65535") from None
        if port == 0:
            raise bad("the port must be a number from 1 to 65535")
        user = unquote(parts.username) if parts.username else None
        path = unquote(parts.path)
        return cls(url, host, user, port, path if path not in ("", "/") else None)

    def argv(self, ssh_command: list[str], remote_cuctl: list[str]) -> list[str]:
        remote = [*remote_cuctl, "dial-stdio", *(("--socket", self.socket) if self.socket else ())]
        return [*ssh_command, "-T", *(("-l", self.user) if self.user else ()),
                *(("-p", str(self.port)) if self.port else ()), "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                "--", self.host, *(shlex.quote(word) for word in remote)]


def _words(variable: str, default: str) -> list[str]:
    text = os.environ.get(variable) or default
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"${variable} is not a command line ({exc}): {text!r}", variable=variable) from None
    if not words:
        raise ConfigError(f"${variable} names no command: {text!r}", variable=variable)
    return words


class SshConnection:
    def __init__(self, argv: list[str], where: str, remote_cuctl: str) -> None:
        self._where, self._remote_cuctl = where, remote_cuctl
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (the connection's; close() closes it)
        self.sock, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(argv, stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=self._stderr)
        except OSError as exc:
            self.sock.close()
            self._stderr.close()
            raise ConnectionFailed(f"cannot run {argv[0]!r} to reach {where}: {exc.strerror or exc} "
                                   "(set CUD_SSH_COMMAND to the ssh to use)", command=argv[0]) from None
        finally:
            theirs.close()

    def lost(self, what: str) -> ConnectionFailed:
        """What ssh, the remote shell or the remote cuctl said before the connection ended."""
        try:
            code = self._proc.wait(CONNECT_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read(65536).decode(errors="replace").splitlines()]
        # The far side's words go to our terminal: no control characters from there either.
        said = printable(next((line for line in reversed(lines) if line and not line.startswith(_NOISE)), ""))
        if code == 255:
            return ConnectionFailed(f"cannot reach the daemon at {self._where}: {said or 'ssh failed'}",
                                    exit_code=code)
        if code == 127:
            return ConnectionFailed(f"{self._where}: no {self._remote_cuctl!r} on the remote PATH ({said}); "
                                    "install cud there or set CUD_REMOTE_CUCTL", exit_code=code)
        if code and said:
            return ConnectionFailed(f"{self._where}: {said.removeprefix('cuctl: ')}", exit_code=code)
        return ConnectionFailed(f"the daemon at {self._where} {what}")

    def close(self) -> None:
        self.sock.close()  # ssh sees the end of its stdin and closes the session
        try:
            self._proc.wait(CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            try:
                self._proc.wait(CLOSE_GRACE)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()


class SshDialer:
    def __init__(self, target: SshTarget, where: str | None = None) -> None:
        self.target = target
        self.where = where or target.url
        self._ssh = _words("CUD_SSH_COMMAND", "ssh")
        self._remote_cuctl = _words("CUD_REMOTE_CUCTL", "cuctl")

    @classmethod
    def from_url(cls, url: str, socket_arg: str | None) -> SshDialer:
        target = SshTarget.parse(url)
        if socket_arg is not None:
            if target.socket is not None:
                raise ConfigError(f"the socket is given twice: in --host {url!r} and as --socket {socket_arg!r}",
                                  host=url, socket=socket_arg)
            target.socket = socket_arg
            return cls(target, f"{url} (socket {socket_arg!r})")
        return cls(target)

    def dial(self) -> SshConnection:
        return SshConnection(self.target.argv(self._ssh, self._remote_cuctl), self.where,
                             shlex.join(self._remote_cuctl))
