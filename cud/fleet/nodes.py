"""The fleet's nodes by name, and a daemon request run on one of them (needs Ray).

A node joined by ``cud fleet join --name NAME`` carries the resource ``cud_node:NAME``; a request
for its daemon runs as a Ray task pinned to that node, which reaches the daemon through the node's
own Unix socket, as the node's user: the same rights as a person on that machine
(``cuctl fleet approvals|approve|deny``, and every node's seats before a suite: ``fleet_seats``).
Nothing here reaches a daemon over the network.
"""

from __future__ import annotations

from typing import Any

from cud.cuctl.client import Client
from cud.errors import CudError, NotFound
from cud.fleet import need_ray
from cud.fleet.labels import NODE, SOCKET_ENV
from cud.protocol import SeatView

__all__ = ("fleet_nodes", "fleet_seats", "node_call", "node_id")

ray = need_ray("cuctl fleet")

#: How long ``fleet_seats`` waits for every node's daemon to say its seats.
NODE_SECONDS = 60.0


def fleet_nodes() -> dict[str, str]:
    """Every live node that ``cud fleet join`` started: name -> Ray node id."""
    found = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        for resource in node.get("Resources", {}):
            if resource.startswith(NODE):
                found[resource.removeprefix(NODE)] = node["NodeID"]
    return found


def node_id(name: str) -> str:
    nodes = fleet_nodes()
    if name not in nodes:
        raise NotFound(f"no fleet node named {name!r}; the fleet has {', '.join(sorted(nodes)) or 'none'}",
                       node=name)
    return nodes[name]


@ray.remote(num_cpus=0, max_retries=0)
def _call(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    import os
    from pathlib import Path

    try:
        with Client(Path(os.environ[SOCKET_ENV])) as client:
            return {"result": client.call(kind, **fields)}
    except CudError as exc:
        return {"error": exc.to_dict()}


def fleet_seats(timeout: float = NODE_SECONDS) -> tuple[dict[str, list[SeatView]], dict[str, str]]:
    """Every live node's seats as its daemon's ``seats`` shows them (their screens, their tags and the node's), asked
    on every node at once; and, by name, why each node that did not answer within ``timeout`` seconds did not."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    asked = {name: _call.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
             .remote("seats", {}) for name, node in sorted(fleet_nodes().items())}
    ready, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=timeout) if asked else ([], [])
    seats: dict[str, list[SeatView]] = {}
    silent: dict[str, str] = {}
    for name, ref in asked.items():
        if ref not in ready:
            silent[name] = f"no answer within {timeout:.0f} s"
            ray.cancel(ref, force=True)
            continue
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayError as exc:
            silent[name] = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            continue
        if "error" in answer:
            silent[name] = answer["error"]["message"]
        else:
            seats[name] = answer["result"]
    return seats, silent


def node_call(name: str, kind: str, **fields: Any) -> Any:
    """``kind`` on node ``name``'s daemon; its refusal raised as the daemon's error (RemoteError)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from cud.cuctl.client import RemoteError

    pinned = _call.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id(name), soft=False))
    answer = ray.get(pinned.remote(kind, fields))
    if "error" in answer:
        error = answer["error"]
        raise RemoteError(error["kind"], f"{name}: {error['message']}", error.get("details") or {})
    return answer["result"]
