"""cuctl seats: the daemon's displays, what each is doing, and which answer."""

from __future__ import annotations

import argparse

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json, printable, short, table

__all__ = ()


def list_seats(client: Client, args: argparse.Namespace) -> int:
    seats = client.call("seats")
    if args.json:
        emit_json(seats)
        return 0
    table(
        ["SEAT", "DISPLAY", "STATE", "TASK", "SIZE", "TAGS", "NETWORK", "ERROR"],
        [[s["name"], s.get("display") or f"vnc {s.get('vnc')}", s["state"],
          "-" if s["task"] is None else str(s["task"]),
          "-" if s["size"] is None else f"{s['size'][0]}x{s['size'][1]}",
          ",".join(s.get("tags") or ()) or "-",
          short(",".join(s.get("allowed") or ()), 40) if s.get("network") == "allow" else s.get("network", "host"),
          short(printable(s["error"]), 60) if s.get("error") else "-"] for s in seats],
    )
    return 0
