"""The Ray resources a node advertises for its seats and a spec asks for (no Ray needed here).

Every healthy seat adds 1 to ``cud_seat`` and to one resource per label: its name
(``cud_seat_name:NAME``), its screen (``cud_screen:WxH``) and each of its tags (``cud_tag:TAG``:
the seat's ``[[seats]] tags`` and the node's ``[fleet] tags``, as the daemon's ``seats`` shows
them). A fleet task asks for ``cud_seat`` and one of each label its spec needs (cud.seat_needs):
so a spec pinned to ``s2`` runs only where a seat ``s2`` is free, one with ``screen = "1280x800"``
only where such a seat is free. The labels are summed per node, so Ray picks a node with a free
seat of each label; the daemon there then picks the one seat that meets all of them
(``SeatNeeds.met_by``). A withdrawn seat's resources are taken by a holder actor
(cud.daemon.fleet.watch): the same dict, so the sums stay whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cud.seat_needs import SeatNeeds, screen_of

__all__ = ("NODE_ENV", "SOCKET_ENV", "SEAT", "node_resources", "seat_resources", "spec_resources",
           "node_marker")

SEAT = "cud_seat"
#: What ``cud fleet join`` gives its Ray node's workers: the daemon's socket, and the node's name.
SOCKET_ENV = "CUD_FLEET_SOCKET"
NODE_ENV = "CUD_FLEET_NODE"
#: A node's own marker resource, so the agent and ``cuctl fleet approvals`` find its Ray node by name.
NODE = "cud_node:"


def node_marker(name: str) -> str:
    return NODE + name


def seat_resources(seat: Mapping[str, Any], tags: Iterable[str] = (), size: list[int] | None = None
                   ) -> dict[str, float]:
    """What one seat (as ``seats`` shows it) adds to its node: its own tags and ``tags`` (the node's, for a
    daemon from before seats had tags); ``size`` is the screen remembered when the seat is unavailable now."""
    resources = {SEAT: 1.0, f"cud_seat_name:{seat['name']}": 1.0}
    screen = seat.get("size") or size
    if screen:
        resources[f"cud_screen:{screen_of(screen)}"] = 1.0
    for tag in (*seat.get("tags", ()), *tags):
        resources[f"cud_tag:{tag}"] = 1.0
    return resources


def node_resources(per_seat: Iterable[Mapping[str, float]], name: str) -> dict[str, float]:
    """The sum of the seats' resources, plus the node's marker."""
    total: dict[str, float] = {node_marker(name): 1.0}
    for resources in per_seat:
        for key, amount in resources.items():
            total[key] = total.get(key, 0.0) + amount
    return total


def spec_resources(needs: SeatNeeds) -> dict[str, float]:
    """What a fleet task needs: one seat, with one of each label its spec asks for (name, screen, tags)."""
    wanted = {SEAT: 1.0}
    if needs.seat is not None and needs.seat != "any":
        wanted[f"cud_seat_name:{needs.seat}"] = 1.0
    if needs.screen is not None:
        wanted[f"cud_screen:{needs.screen}"] = 1.0
    for tag in dict.fromkeys(needs.tags):  # a tag asked twice is still one seat's label
        wanted[f"cud_tag:{tag}"] = 1.0
    return wanted
