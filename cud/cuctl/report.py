"""cuctl report: a task's record as one self-contained HTML page."""

from __future__ import annotations

import argparse
import os
import sys

from cud.cuctl.client import Client
from cud.cuctl.export import fetch_record
from cud.cuctl.output import emit_json
from cud.errors import CudError
from cud.record.html import render

__all__ = ()


def report(client: Client, args: argparse.Namespace) -> int:
    record = fetch_record(client, args.id)
    page = render(record).encode()
    if args.output == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.buffer.flush()
        return 0
    path = args.output or f"task-{args.id}.html"
    write_private(path, page)
    if args.json:
        emit_json({"path": os.path.abspath(path), "bytes": len(page), "steps": record.task["steps"]})
    else:
        verdict = record.task.get("verdict")
        judged = f", verdict {verdict['verdict']}" if verdict else ""
        print(f"{path}: report of task {args.id} ({record.task['state']}{judged}, {len(record.files)} files, "
              f"{len(page)} bytes)")
    return 0


def write_private(path: str, data: bytes) -> None:
    """Write via a temp file and rename; 0600, as the screenshots inside are kept by the daemon."""
    tmp = f"{path}.part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise CudError(f"cannot write the report to {path!r}: {exc.strerror or exc}", path=path) from None
