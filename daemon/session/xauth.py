"""X authority files: read, pick one display's entries, write; what a seat's session gets of the daemon's cookies.

The daemon's ``XAUTHORITY`` may hold the cookie of every display it drives (under systemd,
``/run/cud-display/Xauthority``; in the sandbox, every seat's server's). A seat's user gets only
the entries of its own display, so it cannot open another seat's display with them.

The format (Xau's, as libXau writes it): records one after another, each a big-endian 16-bit
family, then four counted strings (a big-endian 16-bit length, then that many bytes): the
address, the display number (decimal digits as text; empty matches any display), the
authorization's name (``MIT-MAGIC-COOKIE-1``) and its data.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from cud.errors import SessionError

__all__ = ("XauthEntry", "display_number", "encode", "entries_for", "parse", "read_entries_for")

#: Largest authority file read: a few dozen entries take a few kB; a bigger one is not a cookie file.
MAX_XAUTHORITY_BYTES = 1 << 20
_COUNT = struct.Struct(">H")


@dataclasses.dataclass(frozen=True)
class XauthEntry:
    family: int
    address: bytes
    #: The display number as text (b"3"); b"" matches every display.
    number: bytes
    name: bytes
    data: bytes


def parse(blob: bytes, *, source: str = "the X authority file") -> list[XauthEntry]:
    """Every entry of an authority file's bytes; a truncated record is a SessionError naming ``source``."""
    entries: list[XauthEntry] = []
    offset = 0

    def take(size: int) -> bytes:
        nonlocal offset
        if offset + size > len(blob):
            raise SessionError(f"{source} is cut short at byte {offset} (entry {len(entries) + 1} is incomplete)",
                               path=source, offset=offset)
        chunk = blob[offset:offset + size]
        offset += size
        return chunk

    def counted() -> bytes:
        return take(_COUNT.unpack(take(_COUNT.size))[0])

    while offset < len(blob):
        family = _COUNT.unpack(take(_COUNT.size))[0]
        entries.append(XauthEntry(family, counted(), counted(), counted(), counted()))
    return entries


def encode(entries: Iterable[XauthEntry]) -> bytes:
    """The bytes of an authority file holding ``entries``, in order."""
    out = bytearray()
    for entry in entries:
        out += _COUNT.pack(entry.family)
        for field in (entry.address, entry.number, entry.name, entry.data):
            if len(field) > 0xFFFF:
                raise SessionError(f"an X authority field of {len(field)} bytes is over 65535", size=len(field))
            out += _COUNT.pack(len(field)) + field
    return bytes(out)


def display_number(display: str) -> bytes:
    """The number of an X display name as an authority file writes it: ':3', 'host:3.0', 'unix:3' -> b'3'."""
    _host, colon, rest = display.rpartition(":")
    number = rest.split(".")[0]
    if not colon or not number.isdigit():
        raise SessionError(f"X display {display!r} has no display number (like ':0' or ':1.0')", display=display)
    return str(int(number)).encode()


def entries_for(entries: Sequence[XauthEntry], display: str) -> list[XauthEntry]:
    """The entries a client of ``display`` may use: those for its number, of every family (local, wild,
    network). Only when there is none, the entries for any display (an empty number): a lone display's
    file may hold just those. A file with per-display entries never hands out another display's."""
    number = display_number(display)
    own = [entry for entry in entries if entry.number == number]
    return own or [entry for entry in entries if entry.number == b""]


def read_entries_for(path: Path, display: str) -> list[XauthEntry]:
    """``display``'s entries of the authority file at ``path`` (read without following a link at its name)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        blob = file.read(MAX_XAUTHORITY_BYTES + 1)
    if len(blob) > MAX_XAUTHORITY_BYTES:
        raise SessionError(f"X authority file {str(path)!r} is over {MAX_XAUTHORITY_BYTES} bytes", path=str(path))
    return entries_for(parse(blob, source=f"X authority file {str(path)!r}"), display)
