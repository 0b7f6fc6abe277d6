"""Fleets on Ray: one pool of seats across many machines (docs/fleet-reference.md).

Importable without Ray: the modules that need it (``registry``, ``remote``, ``suite``, ``node``,
``job``) say so and import it through :func:`need_ray`, whose error names the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cud.errors import ConfigError

__all__ = ("NAMESPACE", "need_ray")

#: The Ray namespace of the fleet's named actors (the registry, the seat holders, a detached suite's store).
NAMESPACE = "cud"


def need_ray(what: str) -> ModuleType:
    """The ``ray`` module, or a ConfigError naming the extra that brings it (``what`` is the command)."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(f"{what} needs the fleet extra: pip install 'cud[fleet]'", extra="fleet") from None
