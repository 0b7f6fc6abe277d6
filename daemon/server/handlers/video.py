"""``video``: a task's recording (docs/video.md), streamed as ``chunk`` messages for ``cuctl video``.

Anyone who may read a task's record may read its video (the same screens, moving).
A running task's video is sent as far as it is on disk when asked: whole
one-second fragments, so it plays. The reply says whether the recording had
finished (``complete``) or was cut short (the daemon died, or ffmpeg did).
"""

from __future__ import annotations

import base64
import errno
import os
import stat
from typing import Any

from cud.daemon.server.handlers.base import Context
from cud.errors import CudError, NotFound
from cud.protocol import CHUNK_BYTES, VideoRequest, chunk_message

__all__ = ()

_NAMES = ("video.mp4", "video.webm")
_ENDED = ("video_finished", "video_failed")


async def video(ctx: Context, request: VideoRequest) -> dict[str, Any]:
    store, task_id = ctx.daemon.store, request["id"]
    task = store.task(task_id)  # NotFound for an unknown id
    folder = ctx.daemon.trajectories.task_dir(task_id)
    for name in _NAMES:
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):  # none of this kind; never follow a planted link
                continue
            raise CudError(f"cannot read the video of task {task_id}: {exc.strerror}", id=task_id) from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                continue
            size = info.st_size  # a growing file: what is there now, whole fragments and a partial one
            sent = 0
            while sent < size:
                chunk = fh.read(min(CHUNK_BYTES, size - sent))
                if not chunk:
                    break
                await ctx.send(dict(chunk_message(base64.b64encode(chunk).decode())))
                sent += len(chunk)
        ended = [e for e in store.events(task_id) if e["kind"] in _ENDED]
        complete = bool(ended) and ended[-1]["kind"] == "video_finished"
        return {"name": name, "bytes": sent, "format": name.rsplit(".", 1)[1], "complete": complete,
                "state": task["state"]}
    raise NotFound(f"task {task_id} has no video (video is off, the seat is VNC, or it was pruned)", id=task_id)
