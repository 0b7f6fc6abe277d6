"""The fleet's registry: a named, detached Ray actor on the head that numbers the attempts of each spec-run.

Needs Ray. A fleet task asks it for its attempt number before it submits (``begin``): Ray
retrying a task whose node died runs the same function again, and the registry is what tells
that run it is attempt 2, so its idempotency key (``RUN/SPEC/REPEAT/a2``) differs from the
lost one's. It keeps where each attempt ran (node, daemon task), so a node's agent that comes back
(daemon/fleet/watch.py) learns which of its attempts were retried elsewhere and interrupts them, naming
the retry. It also keeps each detached suite's results (``cuctl fleet status|results JOB``). What it
keeps, and when it forgets, is cud.fleet.book's.

It lives on the head (``node:__internal_head__``): workers come and go, the head is the cluster.
"""

from __future__ import annotations

from typing import Any

from cud.fleet import NAMESPACE, need_ray
from cud.fleet.book import Book

__all__ = ("REGISTRY", "registry")

REGISTRY = "cud_fleet_registry"
ray = need_ray("the fleet registry")


# Not restarted if its process dies: a registry that came back empty would number attempts from 1 again.
@ray.remote(num_cpus=0)
class Registry(Book):
    """The fleet's :class:`~cud.fleet.book.Book`, as one named actor on the head."""


def registry() -> Any:
    """The registry's handle (made on the head the first time a driver asks)."""
    return Registry.options(  # type: ignore[attr-defined]  # @ray.remote made it an ActorClass
        name=REGISTRY, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        resources={"node:__internal_head__": 0.001}).remote()
