"""cuctl approvals / approve / deny."""

from __future__ import annotations

import argparse
from typing import Any

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json, short, table
from cud.phrases.actions import describe_approval

__all__ = ("approval_rows",)


def list_approvals(client: Client, args: argparse.Namespace) -> int:
    pending = client.call("approvals")
    if args.json:
        emit_json(pending)
        return 0
    table(["ID", "TASK", "SEAT", "KIND", "CREATED", "WHAT"], approval_rows(pending))
    return 0


def approval_rows(pending: list[dict[str, Any]]) -> list[list[str]]:
    """A table row for each pending approval (also ``cuctl fleet approvals``')."""
    rows = []
    for a in pending:
        # What it touches is what the approver decides on: shown whole, up to a long line (on a
        # terminal, up to its width: `cuctl show` and --json have it all).
        what = describe_approval(a["checks"], a["actions"], a.get("targets"), 200)
        rows.append([str(a["id"]), str(a["task_id"]), a.get("seat") or "-", a["kind"], a["created_at"],
                     short(what, 240)])
    return rows


def approve(client: Client, args: argparse.Namespace) -> int:
    approval = client.call("approve", id=args.id)
    emit_json(approval) if args.json else print(f"approval {args.id} approved (task {approval['task_id']})")
    return 0


def deny(client: Client, args: argparse.Namespace) -> int:
    approval = client.call("deny", id=args.id, reason=args.reason)
    emit_json(approval) if args.json else print(f"approval {args.id} denied (task {approval['task_id']})")
    return 0
