"""The Unix socket: accept, identify the peer, read framed requests, hand each to its handler, reply.

Defences, each against a named failure:

* the socket is bound under umask 0117, so it is never more open than 0660,
  not even for an instant between bind() and chmod();
* every peer is identified with SO_PEERCRED and refused unless its access
  rights let it submit or approve, whatever the file mode says;
* reads and writes have deadlines, so a slow or half-open client only ties up
  its own connection; a line over the size cap closes that connection;
* every connection runs in its own task and every error in it is contained,
  so hostile bytes end at most their own connection, never the daemon;
* connection slots are shared fairly (see ``_admit``): a client that has not
  sent a complete request within ``FIRST_REQUEST_TIMEOUT`` is dropped, one uid
  may hold at most ``PER_UID_SHARE`` of the slots, and when the slots are full
  the longest-idle connection that is not in the middle of a request makes
  room for the newcomer, so idle or half-open clients, however many, never
  lock out a person who wants an answer now.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cud.daemon.server.access import AccessRights, Peer, peer_of
from cud.errors import AccessDenied, ConfigError, CudError, InternalError, ProtocolError, TooManyConnections
from cud.protocol import (
    MAX_MESSAGE_BYTES,
    VersionMismatch,
    decode,
    encode,
    encode_ok,
    error_reply,
    parse_request,
    parse_upload_chunk,
    version_mismatch_reply,
)

__all__ = ()

log = logging.getLogger("cud.server")

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[bytes]]
RequestHandler = Callable[[Peer, dict[str, Any], Send, Receive], Awaitable[Any]]

#: Seconds a new connection has to send its first complete request. cuctl sends it at
#: once; a client that has not by then is idle or half-open and only holds a slot.
FIRST_REQUEST_TIMEOUT = 5.0
#: The fraction of the slots one uid may hold, so that another user (an administrator
#: behind a leaking script, say) always finds room.
PER_UID_SHARE = 0.75
#: Connections the kernel queues for accept(); a burst of clients waits there, not in connect().
LISTEN_BACKLOG = 1024


@dataclass(eq=False)
class _Conn:
    uid: int
    task: asyncio.Task[None]
    #: When the connection last finished something (opened, or answered a request).
    idle_since: float = field(default_factory=time.monotonic)
    served: bool = False
    #: A request is being handled (a ``follow`` may stream for hours): never evicted.
    busy: bool = False


class Server:
    def __init__(
        self,
        path: Path,
        access_rights: AccessRights,
        handle_request: RequestHandler,
        *,
        read_timeout: float = 30.0,
        write_timeout: float = 10.0,
        max_connections: int = 1024,
    ) -> None:
        self.path = path
        self.access_rights = access_rights
        self.handle_request = handle_request
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_connections = max_connections
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task[None], _Conn] = {}

    async def start(self) -> None:
        _clear_stale_socket(self.path)
        self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        old = os.umask(0o117)
        try:
            self._server = await asyncio.start_unix_server(self._accept, path=str(self.path), limit=MAX_MESSAGE_BYTES,
                                                           backlog=LISTEN_BACKLOG)
        finally:
            os.umask(old)
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        if mode & 0o007:  # belt and braces: never serve on a world-accessible socket
            raise ConfigError(f"socket {str(self.path)!r} came out with mode {mode:o}", path=str(self.path))

    async def close(self) -> None:
        """Stop accepting, end every connection, remove the socket file."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- one connection ------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            await self._serve(reader, writer, task)
        except (asyncio.CancelledError, ConnectionError, TimeoutError):
            pass
        except Exception:  # a bug must cost one connection, not the daemon
            log.exception("connection handler failed")
        finally:
            self._connections.pop(task, None)
            writer.transport.abort()

    def _share(self) -> int:
        """How many connections one uid may hold at once."""
        return max(1, int(self.max_connections * PER_UID_SHARE))

    def _admit(self, conn: _Conn) -> bool:
        """Give ``conn`` a slot, dropping an idle connection to make room; False if none can go.

        Only connections waiting for their next request may go: first those that never
        completed one (half-open or idle since connecting), then those idle the longest.
        When the newcomer's uid holds its full share, the one dropped is its own.
        """
        share = self._share()
        own = [c for c in self._connections.values() if c.uid == conn.uid]
        if len(own) >= share:
            pool = own
        elif len(self._connections) >= self.max_connections:
            pool = list(self._connections.values())
        else:
            self._connections[conn.task] = conn
            return True
        idle = [c for c in pool if not c.busy]
        if not idle:
            return False
        victim = min(idle, key=lambda c: (c.served, c.idle_since))
        log.info("connection slots full: dropping an idle connection of uid %d (%s) for uid %d", victim.uid,
                 "served" if victim.served else "no complete request yet", conn.uid)
        del self._connections[victim.task]
        victim.task.cancel()
        self._connections[conn.task] = conn
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     task: asyncio.Task[None]) -> None:
        async def send(message: dict[str, Any]) -> None:
            writer.write(encode(message))
            await asyncio.wait_for(writer.drain(), self.write_timeout)

        # A request that takes the client's chunks (``put``, a spec's ``submit``) and fails part-way leaves the rest of
        # them on the line, where they would be read as requests: its connection ends after the reply.
        receiving = False

        async def receive() -> bytes:
            nonlocal receiving
            receiving = True
            try:
                line = await asyncio.wait_for(reader.readline(), self.read_timeout)
            except TimeoutError:
                raise ProtocolError(f"no 'chunk' message within {self.read_timeout:g} s") from None
            except ValueError:
                raise ProtocolError(f"a 'chunk' message exceeds the {MAX_MESSAGE_BYTES}-byte limit") from None
            if not line.endswith(b"\n"):
                raise ConnectionResetError("the client left in the middle of its chunks")
            return parse_upload_chunk(decode(line))

        try:
            peer = peer_of(writer.get_extra_info("socket"))
        except OSError as exc:
            log.warning("cannot read peer credentials: %s", exc)
            return
        if not self.access_rights.may_connect(peer):
            # Logged, not written to the database: a refused peer must not be able to fill the disk.
            log.warning("refused connection from %s (uid %d, pid %d): not in [access]", peer.name, peer.uid, peer.pid)
            await send(dict(error_reply(AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not use this daemon: not in [access]", uid=peer.uid,
            ).to_dict())))
            return
        conn = _Conn(peer.uid, task)
        if not self._admit(conn):
            await send(dict(error_reply(TooManyConnections(
                f"too many connections in progress (a user may hold {self._share()} of the daemon's "
                f"{self.max_connections}: its config key 'max_connections', within its file-descriptor limit); "
                "try again",
                limit=self.max_connections, config_key="max_connections",
            ).to_dict())))
            return
        while True:
            conn.busy = False
            conn.idle_since = time.monotonic()
            deadline = self.read_timeout if conn.served else min(self.read_timeout, FIRST_REQUEST_TIMEOUT)
            try:
                line = await asyncio.wait_for(reader.readline(), deadline)
            except ValueError:  # the line outgrew the stream limit
                await send(dict(error_reply(ProtocolError(
                    f"message exceeds the {MAX_MESSAGE_BYTES}-byte limit; closing the connection",
                    limit=MAX_MESSAGE_BYTES,
                ).to_dict())))
                return
            if not line:
                return  # clean EOF
            if not line.endswith(b"\n"):
                return  # EOF in the middle of a message: nobody to answer
            conn.busy = conn.served = True
            try:
                request = parse_request(decode(line))
            except VersionMismatch as exc:
                await send(version_mismatch_reply(exc.version) or dict(error_reply(exc.to_dict())))
                continue
            except ProtocolError as exc:
                await send(dict(error_reply(exc.to_dict())))
                continue
            receiving = False
            failed = True
            try:
                result = await self.handle_request(peer, dict(request), send, receive)
                reply = encode_ok(result)
                failed = False
            except CudError as exc:
                reply = encode(dict(error_reply(exc.to_dict())))
            except (asyncio.CancelledError, ConnectionError, TimeoutError):
                raise
            except Exception as exc:
                log.exception("request %r failed", request.get("type"))
                reply = encode(dict(error_reply(InternalError(f"internal error: {type(exc).__name__}").to_dict())))
            writer.write(reply)
            await asyncio.wait_for(writer.drain(), self.write_timeout)
            if failed and receiving:
                return


#: File descriptors kept for everything but client connections: the database, the
#: display, the model's HTTP connections, logs, trajectory files.
RESERVED_FDS = 64


def connection_slots(wanted: int) -> int:
    """How many client connections fit in this process's file-descriptor limit, at most ``wanted``.

    The soft limit is raised to the hard one first (systemd's ``LimitNOFILE=`` sets
    both; a shell's default soft limit is often 1024).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + RESERVED_FDS)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    slots = min(wanted, soft - RESERVED_FDS)
    if slots < wanted:
        log.warning("max_connections %d does not fit the file-descriptor limit %d: serving %d connections",
                    wanted, soft, max(slots, 1))
    return max(slots, 1)


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket left by a dead daemon; refuse to touch a live one or a non-socket."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ConfigError(f"{str(path)!r} exists and is not a socket; refusing to replace it", path=str(path))
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise ConfigError(f"cannot probe existing socket {str(path)!r}: {exc.strerror}", path=str(path)) from None
        path.unlink(missing_ok=True)
    else:
        raise ConfigError(f"another daemon is already listening on {str(path)!r}", path=str(path))
    finally:
        probe.close()
