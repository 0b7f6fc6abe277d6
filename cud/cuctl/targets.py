"""cuctl inspect / tree: what a seat's windows and accessibility bus say is where (read-only)."""

from __future__ import annotations

import argparse
from typing import Any

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json, printable
from cud.phrases.targets import target_phrase

__all__ = ()


def _element_line(element: dict[str, Any]) -> str:
    name = f' "{printable(element["name"])}"' if element.get("name") else ""
    bounds = element.get("bounds")
    where = f" at {bounds[0]},{bounds[1]} {bounds[2]}x{bounds[3]}" if bounds else ""
    states = f" [{', '.join(element.get('states') or [])}]" if element.get("states") else ""
    return f"{printable(element.get('role') or '?')}{name}{where}{states}"


def inspect(client: Client, args: argparse.Namespace) -> int:
    result = client.call("inspect", x=args.x, y=args.y, seat=args.seat)
    if args.json:
        emit_json(result)
        return 0
    target = result["target"]
    print(f"({args.x}, {args.y}) on seat {result['seat']}: {target_phrase(target)}")
    window = target.get("window")
    if window:
        print(f"window 0x{window['id']:x}: class {printable(window['class'])!r} instance "
              f"{printable(window['instance'])!r} title {printable(window['title'])!r} pid {window['pid']} "
              f"process {printable(str(window['process']))!r}")
    for depth, element in enumerate(result["chain"]):
        print("  " * depth + "- " + _element_line(element))
    if target.get("note"):
        print(f"note: {printable(target['note'])}")
    return 0


def tree(client: Client, args: argparse.Namespace) -> int:
    result = client.call("tree", seat=args.seat, app=args.app, depth=args.depth, count=args.count)
    if args.json:
        emit_json(result)
        return 0

    def show(node: dict[str, Any], depth: int) -> None:
        print("  " * depth + "- " + _element_line(node))
        for child in node.get("children", []):
            show(child, depth + 1)

    for app in result["apps"]:
        print(f"{printable(app['application'] or '?')} (pid {app['pid']})")
        for window in app["windows"]:
            show(window, 1)
    if result.get("truncated"):
        print("(cut short: more than --depth/--count; ask for more to see the rest)")
    if result.get("note"):
        print(f"note: {printable(result['note'])}")
    return 0
