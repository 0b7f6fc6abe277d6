"""cuctl pause / resume / act: stop a task at a boundary, act on its seat, hand it back."""

from __future__ import annotations

import argparse
import json

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json
from cud.errors import ProtocolError
from cud.phrases.actions import describe

__all__ = ()


def pause(client: Client, args: argparse.Namespace) -> int:
    task = client.call("pause", id=args.id)
    if args.json:
        emit_json(task)
    elif task["state"] == "paused":
        print(f"task {args.id} is paused")
    else:
        print(f"task {args.id} pauses after the actions it is running (before its next screenshot)")
    return 0


def resume(client: Client, args: argparse.Namespace) -> int:
    task = client.call("resume", id=args.id)
    emit_json(task) if args.json else print(f"task {args.id} resumed ({task['state']})")
    return 0


def act(client: Client, args: argparse.Namespace) -> int:
    try:
        action = json.loads(args.action)
    except ValueError as exc:
        raise ProtocolError(f"ACTION-JSON is not valid JSON ({exc}): {args.action[:80]!r}") from None
    result = client.call("act", id=args.id, action=action)
    if args.json:
        emit_json(result)
    else:
        print(f"{describe(result['action'])} on seat {result['seat']} ({result['ms']:.0f} ms)")
    return 0
