"""The Unix socket a D-Bus address names: the reset asks who listens there, a session's namespaces bind it in."""

from __future__ import annotations

import urllib.parse

__all__ = ("bus_socket",)


def bus_socket(address: str) -> str | bytes | None:
    """The Unix socket of a D-Bus address (``unix:path=`` or ``unix:abstract=``, the first one), or None."""
    for part in address.split(";"):
        kind, _colon, rest = part.partition(":")
        if kind != "unix":
            continue
        for pair in rest.split(","):
            key, _eq, value = pair.partition("=")
            if key == "path":
                return urllib.parse.unquote(value)
            if key == "abstract":
                return b"\0" + urllib.parse.unquote_to_bytes(value)
    return None
