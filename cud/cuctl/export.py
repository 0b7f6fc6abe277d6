"""cuctl export: a task's raw record as files (layout: :mod:`cud.record.export`); also fetches records for report."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, overload

from cud.cuctl.chunks import decode_base64
from cud.cuctl.client import Client
from cud.cuctl.output import emit_json
from cud.errors import ProtocolError
from cud.record.export import write_export
from cud.record.reading import Record

__all__ = ("fetch_record",)


class _Oversized(Exception):
    """The record passed ``max_bytes`` while streaming (fetch_record's own signal, never seen outside)."""


@overload
def fetch_record(client: Client, task_id: int) -> Record: ...
@overload
def fetch_record(client: Client, task_id: int, *, max_bytes: int) -> Record | None: ...
def fetch_record(client: Client, task_id: int, *, max_bytes: int | None = None) -> Record | None:
    """The task's record as the daemon streams it, checked against the totals in its reply.

    With ``max_bytes``: None as soon as its files pass that many bytes, without reading the rest
    (the connection is then of no further use: close it). Without: never None.
    """
    events: list[dict[str, Any]] = []
    parts: dict[str, list[bytes]] = {}
    received = 0

    def on_message(message: Any) -> None:
        nonlocal received
        kind = message.get("type")
        if kind == "event":
            events.append(message["event"])
        elif kind == "file":
            chunks = parts.setdefault(message["name"], [])
            have = sum(len(c) for c in chunks)
            if message["offset"] != have:
                raise ProtocolError(f"file {message['name']!r} arrived out of order: offset {message['offset']}, "
                                    f"expected {have}", name=message["name"])
            chunks.append(decode_base64(message["data"], f"file {message['name']!r}", name=message["name"]))
            received += len(chunks[-1])
            if max_bytes is not None and received > max_bytes:
                raise _Oversized
        else:
            raise ProtocolError(f"unexpected {kind!r} message in a record")

    try:
        result = client.call("record", on_message, id=task_id)
    except _Oversized:
        return None
    files = {name: b"".join(chunks) for name, chunks in parts.items()}
    if len(events) != result["events"]:
        raise ProtocolError(f"record of task {task_id} arrived with {len(events)} events, "
                            f"the daemon sent {result['events']}")
    expected = {f["name"]: f["bytes"] for f in result["files"]}
    got = {name: len(data) for name, data in files.items()}
    if got != expected:
        raise ProtocolError(f"record of task {task_id} arrived with files {got}, the daemon sent {expected}")
    return Record(task=result["task"], events=events, files=files, withheld=tuple(result.get("withheld", ())))


def export(client: Client, args: argparse.Namespace) -> int:
    record = fetch_record(client, args.id)
    target = Path(args.output or f"task-{args.id}")
    write_export(record, target)
    if args.json:
        emit_json({"path": os.path.abspath(target), "events": len(record.events), "files": len(record.files)})
    else:
        print(f"{target}: task {args.id} ({record.task['state']}), {len(record.events)} events, {record.contents()}")
    return 0
