"""cuctl video: a task's recording as a file (docs/video.md)."""

from __future__ import annotations

import argparse
import os
import sys

from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client
from cud.cuctl.output import emit_json
from cud.errors import ConfigError, ProtocolError

__all__ = ()


def video(client: Client, args: argparse.Namespace) -> int:
    to_stdout = args.output == "-"
    if to_stdout and sys.stdout.isatty():
        raise ProtocolError("refusing to write a video to a terminal; use -o FILE or redirect stdout")
    chunks = Chunks("video")
    result = client.call("video", chunks, id=args.id)
    data = chunks.join(result)
    if to_stdout:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    target = args.output or f"task-{args.id}.{result['format']}"
    if os.path.lexists(target):
        raise ConfigError(f"{target!r} already exists; refusing to overwrite it", path=target)
    # Screens can show anything: 0600, as the daemon keeps it; written beside and renamed in.
    tmp = f"{target}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, target)
    if args.json:
        emit_json({"path": os.path.abspath(target), **result})
    else:
        note = "" if result["complete"] else (
            " (still recording)" if result["state"] in ("running", "awaiting_approval", "paused")
            else " (cut short: it plays up to its last whole second)")
        print(f"{target}: task {args.id} video, {result['format']}, {result['bytes']} bytes{note}")
    return 0
