"""The Ray resources a node advertises for its seats and a spec asks for (no Ray needed here).

Every healthy seat adds 1 to ``cud_seat`` and to one resource per label: its name
(``cud_seat_name:NAME``), its screen (``cud_screen:WxH``) and each of the node's tags
(``cud_tag:TAG``). A fleet task asks for ``cud_seat`` and, when its spec names a seat, that
name's resource; so a spec pinned to ``s2`` runs only where a seat ``s2`` is free. A withdrawn
seat's resources are taken by a holder actor (daemon/fleet/watch.py): the same dict, so the sums stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cud.errors import ConfigError

__all__ = ("NODE_ENV", "SOCKET_ENV", "SEAT", "node_resources", "seat_resources", "spec_resources", "check_tag", "node_marker")

SEAT = "cud_seat"
#: What ``cud fleet join`` gives its Ray node's workers: the daemon's socket, and the node's name.
SOCKET_ENV = "CUD_FLEET_SOCKET"
NODE_ENV = "CUD_FLEET_NODE"
#: A node's own marker resource, so the agent and ``cuctl fleet approvals`` find its Ray node by name.
NODE = "cud_node:"
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def check_tag(tag: str) -> str:
    if not isinstance(tag, str) or not TAG.fullmatch(tag):
        raise ConfigError(f"[fleet] tags: {tag!r} is not a tag (letters, digits, _ . : -, up to 64)", key="fleet.tags",
                          value=repr(tag))
    return tag


def node_marker(name: str) -> str:
    return NODE + name


def seat_resources(seat: Mapping[str, Any], tags: Iterable[str], size: list[int] | None = None) -> dict[str, float]:
    """What one seat adds to its node; ``size`` is the screen remembered when the seat is unavailable now."""
    resources = {SEAT: 1.0, f"cud_seat_name:{seat['name']}": 1.0}
    screen = seat.get("size") or size
    if screen:
        resources[f"cud_screen:{screen[0]}x{screen[1]}"] = 1.0
    for tag in tags:
        resources[f"cud_tag:{tag}"] = 1.0
    return resources


def node_resources(per_seat: Iterable[Mapping[str, float]], name: str) -> dict[str, float]:
    """The sum of the seats' resources, plus the node's marker."""
    total: dict[str, float] = {node_marker(name): 1.0}
    for resources in per_seat:
        for key, amount in resources.items():
            total[key] = total.get(key, 0.0) + amount
    return total


def spec_resources(seat: str | None) -> dict[str, float]:
    """What a fleet task needs: one seat, the named one when its spec pins one."""
    wanted = {SEAT: 1.0}
    if seat is not None and seat != "any":
        wanted[f"cud_seat_name:{seat}"] = 1.0
    return wanted
