"""``[fleet]``: how ``cud fleet join`` joins a Ray fleet (docs/config.md); checked with the rest of the file."""

from __future__ import annotations

import dataclasses
import re
import socket

from cud.daemon.config_values import bad, positive_number, string, tags
from cud.daemon.config_values import table as checked_table

__all__ = ("FLEET_KEYS", "FleetConfig", "load_fleet")

FLEET_KEYS = frozenset({"address", "tags", "name", "ray_args", "check_seconds"})
ADDRESS = re.compile(r"[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


@dataclasses.dataclass(frozen=True)
class FleetConfig:
    #: The head's GCS address, HOST:PORT (``--address``).
    address: str | None = None
    #: Labels of every seat here that a spec can select (``seat_tags``; ``cud_tag:TAG`` in the fleet), added
    #: to each seat's own ``[[seats]] tags``.
    tags: tuple[str, ...] = ()
    #: This node's name in the fleet (default: the hostname): ``cuctl fleet approve NAME:ID``, results' seats.
    name: str = dataclasses.field(default_factory=socket.gethostname)
    #: More arguments for ``ray start`` (ports, object store size), as a list of strings.
    ray_args: tuple[str, ...] = ()
    #: How often the seats are looked at (withdrawn or returned) and superseded attempts retired.
    check_seconds: float = 1.0


def check_address(key: str, value: object) -> str:
    text = string(key, value)
    if not ADDRESS.fullmatch(text):
        raise bad(key, value, "HOST:PORT (the head's Ray address)")
    return text


def check_name(key: str, value: object) -> str:
    text = string(key, value)
    if not NAME.fullmatch(text):
        raise bad(key, value, "a node name (letters, digits, _ . -; up to 63)")
    return text


def load_fleet(value: object) -> FleetConfig:
    table = checked_table("fleet", value, FLEET_KEYS)
    values: dict[str, object] = {}
    if "address" in table:
        values["address"] = check_address("fleet.address", table["address"])
    if "tags" in table:
        values["tags"] = tags("fleet.tags", table["tags"])
    if "name" in table:
        values["name"] = check_name("fleet.name", table["name"])
    if "ray_args" in table:
        args = table["ray_args"]
        if not isinstance(args, list) or not all(isinstance(a, str) and "\x00" not in a for a in args):
            raise bad("fleet.ray_args", args, "a list of strings")
        values["ray_args"] = tuple(args)
    if "check_seconds" in table:
        values["check_seconds"] = positive_number("fleet.check_seconds", table["check_seconds"])
    return FleetConfig(**values)  # type: ignore[arg-type]  # each value checked above
