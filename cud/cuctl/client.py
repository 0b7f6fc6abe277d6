"""A blocking connection to the daemon: send a request, collect streamed messages, return the result."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import cud
from cud.cuctl.dial import Dialer, UnixDialer
from cud.errors import AccessDenied, ConnectionFailed, CudError, ProtocolError
from cud.protocol import (
    MAX_LIST_PAGE,
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    DaemonMessage,
    TaskView,
    VersionMismatch,
    chunk_message,
    decode,
    encode,
    parse_message,
    request,
)

__all__ = ("Client", "RemoteError", "all_tasks", "check_own_task", "parse_reply", "result_of")


class RemoteError(CudError):
    """An error the daemon replied with; ``kind`` is the daemon's."""

    def __init__(self, kind: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message, **details)
        self.kind = kind


class Client:
    """One connection, for one request after another; ``where`` is a socket path or a :class:`Dialer`."""

    def __init__(self, where: Path | Dialer, timeout: float = 30.0) -> None:
        self.dialer: Dialer = UnixDialer(where) if isinstance(where, Path) else where
        self.where = self.dialer.where
        self.timeout = timeout
        self._conn = self.dialer.dial()
        self._sock = self._conn.sock
        self._sock.settimeout(timeout)
        self._file = self._sock.makefile("rb")
        self._uid: int | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self._conn.close()

    @property
    def uid(self) -> int:
        """The uid the daemon sees at this end (``ping``'s ``peer``): over ssh the login user's, not this process's."""
        if self._uid is None:
            self._uid = int(self.call("ping")["peer"]["uid"])
        return self._uid

    def call(
        self,
        kind: str,
        on_stream: Callable[[DaemonMessage], None] | None = None,
        *,
        wait_forever: bool = False,
        **fields: Any,
    ) -> Any:
        """Send one request; feed streamed messages to ``on_stream``; return the result or raise RemoteError."""
        return self._exchange(kind, on_stream, None, wait_forever=wait_forever, **fields)

    def upload(self, kind: str, pieces: Iterable[bytes], **fields: Any) -> Any:
        """Send a request that takes the client's bytes (``put``): once the daemon says ``ready``, ``pieces``
        go as ``chunk`` messages; return the result or raise RemoteError (a refusal comes before any byte)."""
        return self._exchange(kind, None, pieces, wait_forever=False, **fields)

    def _exchange(self, kind: str, on_stream: Callable[[DaemonMessage], None] | None,
                  pieces: Iterable[bytes] | None, *, wait_forever: bool, **fields: Any) -> Any:
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
                    raise self._conn.lost("closed the connection")
                if not line.endswith(b"\n"):
                    raise ProtocolError("the daemon sent an oversized or truncated message")
                reply = parse_reply(line, self.where, "cuctl")
                if "ok" in reply:
                    return result_of(reply)
                if reply.get("type") == "ready" and pieces is not None:
                    for piece in pieces:
                        self._sock.sendall(encode(dict(chunk_message(base64.b64encode(piece).decode()))))
                    pieces = None  # sent once
                    continue
                if on_stream is None:
                    raise ProtocolError(f"unexpected {reply.get('type')!r} message for a {kind!r} request")
                on_stream(reply)
        except TimeoutError:
            raise ConnectionFailed(f"the daemon at {self.where} did not answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise self._conn.lost(f"dropped the connection: {exc.strerror or exc}") from None


def all_tasks(client: Client, last: int | None = None, *, page: int = MAX_LIST_PAGE,
              **filters: Any) -> list[TaskView]:
    """The tasks ``list`` matches with ``filters`` (key, key_prefix), oldest first: every one, or the newest
    ``last``. ``list`` answers a page at a time, so this walks back a page (up to ``page`` tasks) at a
    time, each ``before`` the oldest seen, until an empty one (a page may hold fewer than asked when
    its tasks' views would not fit one message). A task submitted meanwhile is newer than the first
    page and is not met; none is met twice.

    A daemon from before pages refuses the field ``limit``: its one answer, every task, is taken whole.
    """
    pages: list[list[TaskView]] = []
    before: int | None = None
    wanted = last
    while wanted is None or wanted > 0:
        size = page if wanted is None else min(page, wanted)
        try:
            got: list[TaskView] = client.call("list", limit=size, before=before, **filters)
        except RemoteError as exc:
            if pages or exc.kind != "protocol" or exc.details.get("field") != "limit":
                raise
            every: list[TaskView] = client.call("list", **filters)
            return every if last is None else every[-last:]
        if not got:
            break
        pages.append(got)
        before = got[0]["id"]
        wanted = None if wanted is None else wanted - len(got)
    return [task for got in reversed(pages) for task in got]


def check_own_task(reply: Mapping[str, Any], key: str, uid: int) -> TaskView:
    """The task of a keyed ``submit``'s reply, once it is shown to be the caller's: submitted by ``uid`` under ``key``.

    A key names a task only for the uid that submitted it (docs/protocol.md, ``submit``), but a daemon
    from before that rule (cud 0.2) answers a key with whatever task has it: another user who claimed an
    eval's or a fleet attempt's next key first would have their task judged as the suite's. So what comes
    back is checked here, by ``cuctl eval`` and the fleet's attempt alike, and refused (AccessDenied,
    naming the task, its submitter and the key) unless it is ours.
    """
    task: TaskView = reply["task"]
    submitter = task["submitter"]
    if submitter["uid"] != uid or task["key"] != key:
        raise AccessDenied(f"the daemon answered the submit under key {key!r} with task {task['id']} of "
                           f"{submitter['name']!r} (uid {submitter['uid']}, key {task['key']!r}), not a task of "
                           f"uid {uid} under that key: it is not taken as this submit's", key=key, id=task["id"],
                           uid=uid, submitter=dict(submitter))
    return task


def parse_reply(line: bytes, where: str, client: str) -> DaemonMessage:
    """One line from the daemon at ``where``, checked; another protocol version says which side to upgrade."""
    try:
        return parse_message(decode(line))
    except VersionMismatch as exc:
        upgrade = "the daemon, or use the cuctl that came with it" if exc.version < PROTOCOL_VERSION else "cud"
        raise ProtocolError(
            f"the daemon at {where} speaks protocol version {exc.version} and this {client} "
            f"(cud {cud.__version__}) speaks {PROTOCOL_VERSION}: upgrade {upgrade}", **exc.details) from None


def result_of(reply: DaemonMessage) -> Any:
    """The result of a final reply, or the daemon's error as RemoteError."""
    if reply["ok"]:  # type: ignore[typeddict-item]  # a final reply: ok or error
        return reply["result"]  # type: ignore[typeddict-item]  # ok: an OkReply
    error = reply["error"]  # type: ignore[typeddict-item]  # not ok: an ErrorReply
    raise RemoteError(error["kind"], error["message"], error.get("details", {}))
