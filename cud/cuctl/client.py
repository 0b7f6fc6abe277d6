"""A blocking connection to the daemon: send a request, collect streamed messages, return the result."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cud
from cud.errors import CudError, ProtocolError
from cud.protocol import (MAX_MESSAGE_BYTES, PROTOCOL_VERSION, DaemonMessage, VersionMismatch, decode, encode,
                          parse_message, request)

__all__ = ("Client", "ConnectionFailed", "RemoteError", "parse_reply", "result_of", "socket_path")


class RemoteError(CudError):
    """An error the daemon replied with; ``kind`` is the daemon's."""

    def __init__(self, kind: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message, **details)
        self.kind = kind


class ConnectionFailed(CudError):
    kind = "connection"


def socket_path(given: str | None) -> Path:
    """--socket, else $CUD_SOCKET, else the daemon's default for this user."""
    if given:
        return Path(given)
    if os.environ.get("CUD_SOCKET"):
        return Path(os.environ["CUD_SOCKET"])
    if os.geteuid() == 0:
        return Path("/run/cud/cud.sock")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise ConnectionFailed("no socket: pass --socket PATH or set CUD_SOCKET (XDG_RUNTIME_DIR is unset too)")
    return Path(runtime) / "cud.sock"


class Client:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except OSError as exc:
            self._sock.close()
            raise ConnectionFailed(
                f"cannot connect to the daemon at {str(path)!r}: {exc.strerror or exc}", path=str(path)
            ) from None
        self._file = self._sock.makefile("rb")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def call(
        self,
        kind: str,
        on_stream: Callable[[DaemonMessage], None] | None = None,
        *,
        wait_forever: bool = False,
        **fields: Any,
    ) -> Any:
        """Send one request; feed streamed messages to ``on_stream``; return the result or raise RemoteError."""
        message = request(kind, **fields)
        # follow and --wait may sit for hours awaiting a human: no read deadline then.
        self._sock.settimeout(None if wait_forever else self.timeout)
        try:
            try:
                self._sock.sendall(encode(message))
            except (BrokenPipeError, ConnectionResetError):
                # The daemon may answer and close before reading (a refused peer, a full
                # house): its reason is already in our receive buffer.
                pass
            while True:
                line = self._file.readline(MAX_MESSAGE_BYTES + 1)
                if not line:
                    raise ConnectionFailed(f"the daemon at {str(self.path)!r} closed the connection")
                if not line.endswith(b"\n"):
                    raise ProtocolError("the daemon sent an oversized or truncated message")
                reply = parse_reply(line, self.path, "cuctl")
                if "ok" in reply:
                    return result_of(reply)
                if on_stream is None:
                    raise ProtocolError(f"unexpected {reply.get('type')!r} message for a {kind!r} request")
                on_stream(reply)
        except TimeoutError:
            raise ConnectionFailed(f"the daemon at {str(self.path)!r} did not answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise ConnectionFailed(f"lost the connection to {str(self.path)!r}: {exc.strerror or exc}") from None


def parse_reply(line: bytes, path: Path, client: str) -> DaemonMessage:
    """One line from the daemon at ``path``, checked; another protocol version says which side to upgrade."""
    try:
        return parse_message(decode(line))
    except VersionMismatch as exc:
        upgrade = "the daemon, or use the cuctl that came with it" if exc.version < PROTOCOL_VERSION else "cud"
        raise ProtocolError(
            f"the daemon at {str(path)!r} speaks protocol version {exc.version} and this {client} "
            f"(cud {cud.__version__}) speaks {PROTOCOL_VERSION}: upgrade {upgrade}", **exc.details) from None


def result_of(reply: DaemonMessage) -> Any:
    """The result of a final reply, or the daemon's error as RemoteError."""
    if reply["ok"]:  # type: ignore[typeddict-item]
        return reply["result"]  # type: ignore[typeddict-item]
    error = reply["error"]  # type: ignore[typeddict-item]
    raise RemoteError(error["kind"], error["message"], error.get("details", {}))
