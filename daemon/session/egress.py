"""Where a seat's session may connect: ``network = [ALLOWED, ...]``, kept by nftables rules keyed on the seat's user.

Each entry is ``ADDRESS``, ``ADDRESS/PREFIX``, ``ADDRESS:PORT`` or ``ADDRESS/PREFIX:PORT`` (an IPv6
address in brackets when a port follows: ``[::1]:8080``); without a port, every port. The session
stays on the machine's network, and the daemon loads one nftables table of its own (``inet
cud_HASH``, the hash of its state directory, so two daemons on one machine keep apart) whose output
chain sends every packet of a socket the seat's user owns (``meta skuid``) through the seat's list:
what matches goes, a TCP connection elsewhere is reset and anything else gets an ICMP
"administratively prohibited", so an application fails at once (ECONNREFUSED) instead of waiting.
The daemon's own connections (the model, hooks) are not the seat's user's and never match. The
table is loaded whole in one transaction at start-up (replacing one a killed daemon left) and
deleted at stop. Unix sockets (the X display, the buses) are not IP and are not affected.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cud.daemon.config_values import bad
from cud.errors import SessionError

__all__ = ("Allowed", "Egress", "parse_allowed")

_NFT = "/usr/sbin/nft"
_NFT_TIMEOUT = 30.0


@dataclasses.dataclass(frozen=True)
class Allowed:
    """One entry of a seat's allow-list: a network and a port (None: every port)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    port: int | None

    def words(self) -> str:
        """As a config would write it: ``10.0.0.0/8``, ``192.0.2.7/32:443``, ``[::1/128]:8080``."""
        net = self.network.with_prefixlen
        if self.port is None:
            return net
        return f"[{net}]:{self.port}" if self.network.version == 6 else f"{net}:{self.port}"

    def rule(self) -> str:
        family = "ip" if self.network.version == 4 else "ip6"
        where = f"{family} daddr {self.network.with_prefixlen}"
        if self.port is None:
            return f"{where} accept"
        return f"{where} meta l4proto {{ tcp, udp }} th dport {self.port} accept"


def parse_allowed(key: str, value: object) -> Allowed:
    """``value`` as an allow-list entry; ConfigError naming ``key`` and the value."""
    wanted = "an address or CIDR, with ':PORT' if one port only (e.g. '10.0.0.0/8', '192.0.2.7:443', '[::1]:8080')"
    if not isinstance(value, str):
        raise bad(key, value, wanted)
    text, port = value, None
    if text.startswith("["):
        inner, close, rest = text[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            raise bad(key, value, wanted)
        text, port_text = inner, rest[1:] if rest else None
    elif text.count(":") == 1:  # IPv4 with a port; an IPv6 address has several colons
        text, port_text = text.split(":")
    else:
        port_text = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise bad(key, value, wanted + f"; the port {port_text!r} is not 1 to 65535")
        port = int(port_text)
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise bad(key, value, f"{wanted}; {exc}") from None
    return Allowed(network, port)


class Egress:
    """The nftables table that keeps each seat with an allow-list to it: ``seats`` are (seat, uid, allowed)."""

    def __init__(self, state_dir: Path, seats: Sequence[tuple[str, int, tuple[Allowed, ...]]]) -> None:
        self.seats = list(seats)
        self.table = "cud_" + hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
        self.loaded = False

    def ruleset(self) -> str:
        """The table, whole: one chain per seat, reached from the output hook by the seat's user's uid."""
        lines = [f"table inet {self.table} {{",
                 "  chain output {", "    type filter hook output priority filter; policy accept;"]
        lines += [f"    meta skuid {uid} jump seat_{index}" for index, (_seat, uid, _allowed) in enumerate(self.seats)]
        lines.append("  }")
        for index, (_seat, _uid, allowed) in enumerate(self.seats):
            lines.append(f"  chain seat_{index} {{")
            lines += [f"    {entry.rule()}" for entry in allowed]
            lines += ["    meta l4proto tcp reject with tcp reset", "    reject with icmpx admin-prohibited", "  }"]
        lines.append("}")
        return "\n".join(lines) + "\n"

    async def load(self) -> None:
        """Load the table (replacing one of a daemon that did not stop cleanly); SessionError naming the seats."""
        if not self.seats:
            return
        # Declared, deleted and made again in one transaction: never a moment without the rules.
        await self._nft(f"table inet {self.table}\ndelete table inet {self.table}\n{self.ruleset()}")
        self.loaded = True

    async def unload(self) -> None:
        if self.loaded:
            await self._nft(f"delete table inet {self.table}\n")
            self.loaded = False

    async def _nft(self, script: str) -> None:
        names = ", ".join(repr(seat) for seat, _uid, _allowed in self.seats)
        try:
            proc = await asyncio.create_subprocess_exec(
                _NFT, "-f", "-", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        except OSError as exc:
            raise SessionError(f"seats {names}: their network allow-lists need nftables ({_NFT}: {exc.strerror}); "
                               "install the package nftables", seats=names) from None
        try:
            _out, err = await asyncio.wait_for(proc.communicate(script.encode()), _NFT_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise SessionError(f"seats {names}: nft did not answer within {_NFT_TIMEOUT:g} s", seats=names) from None
        if proc.returncode != 0:
            raise SessionError(f"seats {names}: their network allow-lists could not be loaded into nftables: "
                               f"{err.decode(errors='replace').strip()[:500]}", seats=names)
