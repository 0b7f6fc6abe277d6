"""cuctl approvals / approve / deny."""

from __future__ import annotations

import argparse

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json, short, table
from cud.record.model import describe_approval

__all__ = ()


def list_approvals(client: Client, args: argparse.Namespace) -> int:
    pending = client.call("approvals")
    if args.json:
        emit_json(pending)
        return 0
    rows = []
    for a in pending:
        # What it touches is what the approver decides on: shown whole, up to a long line (on a
        # terminal, up to its width: `cuctl show` and --json have it all).
        what = describe_approval(a["checks"], a["actions"], a.get("targets"), 200)
        rows.append([str(a["id"]), str(a["task_id"]), a.get("seat") or "-", a["kind"], a["created_at"],
                     short(what, 240)])
    table(["ID", "TASK", "SEAT", "KIND", "CREATED", "WHAT"], rows)
    return 0


def approve(client: Client, args: argparse.Namespace) -> int:
    approval = client.call("approve", id=args.id)
    emit_json(approval) if args.json else print(f"approval {args.id} approved (task {approval['task_id']})")
    return 0


def deny(client: Client, args: argparse.Namespace) -> int:
    approval = client.call("deny", id=args.id, reason=args.reason)
    emit_json(approval) if args.json else print(f"approval {args.id} denied (task {approval['task_id']})")
    return 0
