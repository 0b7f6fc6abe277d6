"""A seat's session in namespaces of its own: private temp directories, the home at ``home_path``, no network.

The namespaces are made by a child of root's (``nsexec.py make``: a process with one thread,
which the daemon is not) and held by the daemon as descriptors of ``/proc/CHILD/ns/*``; the
child then ends. Every command of the session joins them (``nsexec.py enter``) before it
becomes the user. The reset drops them once every process of the user has ended: the next
command gets new ones, so the private directories are empty again whatever a task left there,
and nothing a task mounted there survives.

Private, each a tmpfs of its own in the namespace: ``/tmp``, ``/var/tmp``, ``/dev/shm`` and
``/run/lock``, the places every user may write on a Debian system (``find / -writable`` as a
seat's user finds only these, the home, the runtime directory and character devices:
tests/test_session_namespace.py looks again at every run). Bound in from the host, where they
lie under a private place: the X server's socket directory (read-only: connecting still works,
nothing can be written there), the session bus's socket, another user's accessibility bus socket
(cud.daemon.session.a11y), the base of the runtime directories and the home (at its own path, or at
``home_path``, over a tmpfs that covers ``/home``). A network allow-list needs no namespace
(cud.daemon.session.egress).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from cud.daemon.session.bus_address import bus_socket
from cud.daemon.session.egress import Allowed
from cud.errors import SessionError

__all__ = ("PRIVATE_PLACES", "Isolation", "SeatNamespace", "kept_from_host", "private_place_of")

#: Every user may write there on a Debian system; isolation gives the session its own, emptied by the reset.
PRIVATE_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
#: The size of each private place's tmpfs: a task that fills one stops there, not at the machine's memory.
TMP_BYTES = 256 << 20
_HELPER = Path(__file__).with_name("nsexec.py")
#: Seconds the helper may take to make the namespaces (a loaded machine starts Python slowly).
_MAKE_TIMEOUT = 30.0


def private_place_of(path: str) -> str | None:
    """The private place ``path`` is in (or is), None if none."""
    for place in PRIVATE_PLACES:
        if path == place or path.startswith(place + "/"):
            return place
    return None


@dataclasses.dataclass(frozen=True)
class Isolation:
    """What a seat asks of its namespaces (``[[seats]] private_tmp``, ``home_path``, ``network``)."""

    private_tmp: bool = False
    home_path: str | None = None
    #: ``host`` (the machine's network), ``none`` (a loopback of its own only) or ``allow`` (the machine's network,
    #: to ``allowed`` only).
    network: str = "host"
    #: With ``network = "allow"``: where the session may connect (cud.daemon.session.egress).
    allowed: tuple[Allowed, ...] = ()

    @property
    def namespaced(self) -> bool:
        """Whether the session needs namespaces of its own (an allow-list needs none: nftables keeps it)."""
        return self.private_tmp or self.home_path is not None or self.network == "none"

    @property
    def private_loopback(self) -> bool:
        """Whether the session's loopback is its own: a port it listens on there is reachable from it alone."""
        return self.network == "none"

    @property
    def asked(self) -> bool:
        """Whether the seat asks for anything of this (which needs a daemon run as root: cud.daemon.seats.config)."""
        return self.namespaced or self.network != "host"

    def inside(self, host_path: str, home: Path) -> str:
        """``host_path`` (in the home) as the session sees it: under ``home_path`` when the seat has one."""
        if self.home_path is None:
            return host_path
        relative = os.path.relpath(host_path, home)
        return self.home_path if relative == "." else f"{self.home_path}/{relative}"


class SeatNamespace:
    """The namespaces of one seat's session, made at its first command and dropped by every reset."""

    def __init__(self, seat: str, isolation: Isolation) -> None:
        self.seat = seat
        self.isolation = isolation
        self._fds: tuple[int, int | None] | None = None
        self._lock = asyncio.Lock()

    def _spec(self, display: str | None, bus: str | None, runtime_base: Path | None, home: Path,
              home_identity: tuple[int, int] | None, sockets: Sequence[str]) -> dict[str, object]:
        private = [p for p in PRIVATE_PLACES if self.isolation.private_tmp and os.path.isdir(p) and not os.path.islink(p)]
        binds: list[tuple[str, str, list[int] | None, bool]] = [
            (path, path, None, read_only)
            for path, read_only in kept_from_host(private, display, bus, runtime_base, sockets=sockets)]
        identity = None if home_identity is None else list(home_identity)
        covers: list[str] = []
        if self.isolation.home_path is not None:
            covers.append(os.path.dirname(self.isolation.home_path))
            binds.append((str(home), self.isolation.home_path, identity, False))
        elif _hidden(str(home), private):
            binds.append((str(home), str(home), identity, False))
        return {"network": self.isolation.network, "private": private, "size": TMP_BYTES, "covers": covers,
                "binds": binds}

    async def fds(self, display: str | None, bus: str | None, runtime_base: Path | None, home: Path,
                  home_identity: tuple[int, int] | None,
                  sockets: Callable[[], Awaitable[Sequence[str]]] | None = None) -> tuple[int, int | None]:
        """The descriptors of the mount namespace and of the network one (None: the host's), made if needed;
        ``sockets``: asked, when they are made, for more sockets the session must reach (cud.daemon.session.a11y)."""
        async with self._lock:
            if self._fds is None:
                more = [] if sockets is None else await sockets()
                spec = self._spec(display, bus, runtime_base, home, home_identity, more)
                self._fds = await self._make(spec)
            return self._fds

    async def _make(self, spec: dict[str, object]) -> tuple[int, int | None]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", str(_HELPER), "make", json.dumps(spec), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={"LANG": "C.UTF-8"}, cwd="/",
            start_new_session=True)
        try:
            assert proc.stdout is not None and proc.stdin is not None
            line = await asyncio.wait_for(proc.stdout.readline(), _MAKE_TIMEOUT)
            if line != b"ready\n":
                err = b"" if proc.stderr is None else await asyncio.wait_for(proc.stderr.read(), _MAKE_TIMEOUT)
                why = (line.decode(errors="replace").removeprefix("error ").strip()
                       or err.decode(errors="replace").strip()[-300:] or f"exit status {await proc.wait()}")
                raise SessionError(f"seat {self.seat!r}: its private namespaces could not be made: {why}",
                                   seat=self.seat)
            mnt = os.open(f"/proc/{proc.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            net = (os.open(f"/proc/{proc.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                   if self.isolation.network == "none" else None)
            return mnt, net
        except TimeoutError:
            raise SessionError(f"seat {self.seat!r}: its private namespaces were not made within "
                               f"{_MAKE_TIMEOUT:g} s", seat=self.seat) from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                if proc.returncode is None and proc.stdin is not None:
                    proc.stdin.close()
                    try:
                        await asyncio.wait_for(proc.wait(), _MAKE_TIMEOUT)
                    except TimeoutError:
                        proc.kill()
            await proc.wait()

    def enter_argv(self, fds: tuple[int, int | None], uid: int, gid: int, groups: Sequence[int], cwd: str,
                   errfd: int, argv: Sequence[str]) -> list[str]:
        """The argv that runs ``argv`` in the namespaces as ``uid`` in ``cwd`` (a path in the namespace)."""
        mnt, net = fds
        return [sys.executable, "-I", "-S", str(_HELPER), "enter", str(mnt), "-" if net is None else str(net),
                str(uid), str(gid), ",".join(map(str, groups)), cwd, str(errfd), "--", *argv]

    def drop(self) -> None:
        """The reset ended every process of the user: the next command gets new, empty namespaces."""
        if self._fds is not None:
            for fd in self._fds:
                if fd is not None:
                    os.close(fd)
            self._fds = None


def _hidden(path: str, private: Sequence[str]) -> bool:
    """Whether ``path`` lies under one of the session's ``private`` places (and so must be bound in from the host)."""
    place = private_place_of(os.path.realpath(path))
    return place is not None and place in private


def kept_from_host(private: Sequence[str], display: str | None, bus: str | None, runtime_base: Path | None,
                   home: Path | None = None, *, sockets: Sequence[str] = ()) -> list[tuple[str, bool]]:
    """What the session needs from the host that lies under one of its ``private`` places, to be bound in at its
    own path: ``(path, read_only)``. The X server's socket directory (read-only: connecting still works, nothing
    can be written there), the session bus's socket, the base of the runtime directories, and ``home`` if given
    (the namespace's own program binds the home itself: checked, and maybe at ``home_path``)."""
    kept: list[tuple[str, bool]] = []
    if display is not None and display.startswith(":") and _hidden("/tmp/.X11-unix", private):
        kept.append(("/tmp/.X11-unix", True))
    bus_path = None if bus is None else bus_socket(bus)
    if isinstance(bus_path, str) and _hidden(bus_path, private):  # an abstract socket is not a file
        kept.append((bus_path, False))
    # Another user's accessibility bus (the sandbox's launcher): applications connect to it by its path.
    kept += [(path, False) for path in sockets if _hidden(path, private)]
    if runtime_base is not None and _hidden(str(runtime_base), private):
        kept.append((str(runtime_base), False))
    if home is not None and _hidden(str(home), private):
        kept.append((str(home), False))
    return kept
