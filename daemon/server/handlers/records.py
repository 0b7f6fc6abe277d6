"""``record``: a task's whole record (its events, then its files), streamed for report and export.

The state dir is the daemon's own (0700, files 0600), so the socket is the only
way a record reaches ``cuctl``. Nothing is sent in one piece that could outgrow
the message cap: every event is one ``event`` message and every screenshot is
cut into ``file`` messages of at most ``CHUNK_BYTES`` bytes.

A task's collected files, and what its checks saw in the seat's session, reach only
whoever may read them (``AccessRights.may_read_collected``); the reply names the files withheld.

Files are read on the event loop's thread on purpose: the runner writes them on
that thread too, so a record never holds half a screenshot.
"""

from __future__ import annotations

import base64
import errno
import os
import stat
from typing import Any

from cud.daemon.server.handlers.base import Context
from cud.errors import CudError, NotFound
from cud.protocol import (
    CHUNK_BYTES,
    RECORD_FILE_NAME,
    ArtifactRequest,
    ImageRequest,
    RecordFile,
    RecordRequest,
    RecordResult,
    event_message,
    file_message,
)

__all__ = ()


async def record(ctx: Context, request: RecordRequest) -> RecordResult:
    store, task_id = ctx.daemon.store, request["id"]
    task = store.task(task_id)  # NotFound for an unknown id, before anything streams
    events = store.events(task_id)
    rights = ctx.daemon.access_rights
    for event in events:
        await ctx.send(dict(event_message(rights.event_for(ctx.peer, task, event))))
    folder = ctx.daemon.trajectories.task_dir(task_id)
    try:
        names = sorted(name for name in os.listdir(folder) if RECORD_FILE_NAME.fullmatch(name))
    except FileNotFoundError:  # a task that never reached a screenshot
        names = []
    # The files a spec collected (the task row lists them; each was written by the daemon itself), to
    # whom may read them; the others get the rest of the record and the names of what was withheld.
    collected = [f"artifacts/{a['path']}" for a in task["artifacts"] if a["error"] is None]
    readable = rights.may_read_collected(ctx.peer, task)
    names += collected if readable else []
    files: list[RecordFile] = []
    for name in names:
        data = _read(folder / name)
        if data is None:
            continue
        for offset in range(0, len(data), CHUNK_BYTES):
            chunk = base64.b64encode(data[offset : offset + CHUNK_BYTES]).decode()
            await ctx.send(dict(file_message(name, offset, chunk)))
        if not data:
            await ctx.send(dict(file_message(name, 0, "")))
        files.append({"name": name, "bytes": len(data)})
    # The task as it is now: a running task may have moved on while its files streamed.
    return {"task": rights.task_for(ctx.peer, store.task(task_id)), "events": len(events), "files": files,
            "withheld": [] if readable else collected}


async def image(ctx: Context, request: ImageRequest) -> dict[str, Any]:
    """One screenshot of a task's trajectory (an approval's picture, say), as ``chunk`` messages."""
    task_id, name = request["id"], request["name"]
    ctx.daemon.store.task(task_id)  # NotFound for an unknown task
    data = _read(ctx.daemon.trajectories.task_dir(task_id) / name)
    if data is None:
        raise NotFound(f"task {task_id} has no screenshot {name!r}", id=task_id, name=name)
    await ctx.send_chunks(data)
    return {"bytes": len(data), "format": name.rsplit(".", 1)[1]}


async def artifact(ctx: Context, request: ArtifactRequest) -> dict[str, Any]:
    """One file a spec collected, as ``chunk`` messages: only what the task's ``artifacts`` list names."""
    task_id, path = request["id"], request["path"]
    task = ctx.daemon.store.task(task_id)  # NotFound for an unknown task
    ctx.daemon.access_rights.require_read_collected(ctx.peer, task)
    kept = [a["path"] for a in task["artifacts"] if a["error"] is None]
    data = _read(ctx.daemon.trajectories.task_dir(task_id) / "artifacts" / path) if path in kept else None
    if data is None:
        listed = ", ".join(repr(p) for p in kept) or "none"
        raise NotFound(f"task {task_id} kept no file {path!r} (it collected: {listed})", id=task_id, path=path)
    await ctx.send_chunks(data)
    return {"id": task_id, "path": path, "bytes": len(data)}


def _read(path: os.PathLike[str]) -> bytes | None:
    """The file's bytes, or None if it is not a regular file of ours (never follow a planted link).

    Only the last component is opened without following a link: the folders above it are the
    daemon's own (0700), made by it, in its state directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT):  # a symlink; pruned meanwhile
            return None
        raise CudError(f"cannot read trajectory file {os.fspath(path)!r}: {exc.strerror}",
                       path=os.fspath(path)) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read()
