"""``exec``, ``put``, ``get``, ``clipboard`` and ``reset``: a seat's session from outside (docs/sessions.md).

Each runs code or moves files on the seat, so each needs the operate right
(``[access] operate_users/operate_groups``), checked before anything else; the
refusal names it. Sizes are bounded by ``[sessions]``; paths are confined to the
seat's home by :class:`~cud.daemon.session.home.SeatHome`.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import stat
from typing import Any

from cud.daemon.server.handlers.base import Context
from cud.daemon.session.processes import SeatSession
from cud.errors import CudError, SessionError
from cud.protocol import (
    CHUNK_BYTES,
    ClipboardRequest,
    ExecRequest,
    GetRequest,
    PutRequest,
    ResetRequest,
    chunk_message,
    ready_message,
)

__all__ = ()

log = logging.getLogger("cud.session")


def _session(ctx: Context, seat_name: str, what: str) -> SeatSession:
    ctx.daemon.access_rights.require_operate(ctx.peer, what)
    seat = ctx.daemon.seats.get(seat_name)
    if seat.session is None:
        raise SessionError(f"seat {seat_name!r} has no session: give it 'user' and 'home' in its [[seats]] table",
                           seat=seat_name)
    return seat.session


def _who(ctx: Context) -> str:
    return f"{ctx.peer.name} (uid {ctx.peer.uid})"


async def exec_command(ctx: Context, request: ExecRequest) -> dict[str, Any]:
    session = _session(ctx, request["seat"], "run commands on a seat")
    limits = ctx.daemon.config.sessions
    timeout = request.get("timeout", limits.max_exec_seconds)
    if timeout > limits.max_exec_seconds:
        raise CudError(f"a timeout of {timeout} s is over [sessions] max_exec_seconds ({limits.max_exec_seconds})",
                       timeout=timeout, limit=limits.max_exec_seconds)
    log.info("exec on seat %s by %s: %r", request["seat"], _who(ctx), request["argv"][:8])
    done = await session.run(request["argv"], timeout=timeout, cwd=request.get("cwd"),
                             max_output=limits.max_output_bytes)
    return {"seat": request["seat"], "argv": list(done.argv), "exit_code": done.exit_code, "timed_out": done.timed_out,
            "truncated": done.truncated, "stdout": base64.b64encode(done.stdout).decode(),
            "stderr": base64.b64encode(done.stderr).decode()}


async def put(ctx: Context, request: PutRequest) -> dict[str, Any]:
    session = _session(ctx, request["seat"], "copy files into a seat's home")
    size, path, limit = request["size"], request["path"], ctx.daemon.config.sessions.max_file_bytes
    if size > limit:
        raise CudError(f"{path!r} is {size} bytes; [sessions] max_file_bytes is {limit}", path=path, size=size,
                       limit=limit)
    with session.home.open_write(path, mode=request.get("mode")) as fd:
        await ctx.send(dict(ready_message()))
        await ctx.receive_exactly(size, lambda chunk: asyncio.to_thread(_write_all, fd, chunk), repr(path))
    log.info("put %r (%d bytes) into seat %s by %s", path, size, request["seat"], _who(ctx))
    return {"seat": request["seat"], "path": _shown(session, path), "bytes": size}


async def get(ctx: Context, request: GetRequest) -> dict[str, Any]:
    session = _session(ctx, request["seat"], "copy files out of a seat's home")
    path, limit = request["path"], ctx.daemon.config.sessions.max_file_bytes
    with session.home.open_read(path) as (fd, size):
        if size > limit:
            raise CudError(f"{path!r} in seat {request['seat']!r} is {size} bytes; [sessions] max_file_bytes is "
                           f"{limit}", path=path, size=size, limit=limit)
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        sent = 0
        while sent < size:  # what it held when opened: a file growing meanwhile is cut there
            chunk = await asyncio.to_thread(os.read, fd, min(CHUNK_BYTES, size - sent))
            if not chunk:
                break
            await ctx.send(dict(chunk_message(base64.b64encode(chunk).decode())))
            sent += len(chunk)
    return {"seat": request["seat"], "path": _shown(session, path), "bytes": sent, "mode": mode}


async def clipboard(ctx: Context, request: ClipboardRequest) -> dict[str, Any]:
    limit = ctx.daemon.config.sessions.max_clipboard_bytes
    if "text" in request:
        session = _session(ctx, request["seat"], "set a seat's clipboard")
        size = len(request["text"].encode("utf-8", "surrogatepass"))
        if size > limit:
            raise CudError(f"the clipboard text is {size} bytes; [sessions] max_clipboard_bytes is {limit}",
                           size=size, limit=limit)
        await session.clipboard_set(request["text"])
        return {"seat": request["seat"], "text": request["text"]}
    session = _session(ctx, request["seat"], "read a seat's clipboard")
    return {"seat": request["seat"], "text": await session.clipboard_get(max_bytes=limit)}


async def reset(ctx: Context, request: ResetRequest) -> dict[str, Any]:
    ctx.daemon.access_rights.require_operate(ctx.peer, "reset a seat")
    seat = ctx.daemon.seats.get(request["seat"])
    log.info("reset of seat %s asked by %s", request["seat"], _who(ctx))
    report = await seat.reset_now()
    return {"seat": request["seat"], **dataclasses.asdict(report)}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _shown(session: SeatSession, path: str) -> str:
    """The path as reached in the home (symlinks inside resolved), relative to it."""
    try:
        return str(session.home.resolve(path).relative_to(session.home.root))
    except CudError:
        return path
