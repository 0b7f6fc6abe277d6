"""The parts of the sandbox: which ones a configuration runs, what each needs, and in what order.

Order matters: a part starts only after the parts it needs answer, and a part
is restarted whenever one it needs is (a new X server means a new display for
everything drawn on it; a new scripted model means a new port for the daemon).

With ``SEATS=N`` (N > 1) every seat has its own X server, session bus,
accessibility bus, openbox, x11vnc and demo app, recorded as ``seatK.xserver`` and so on, and the one daemon drives
them all (``cud run --seat seat1=:X --seat seat2=:Y ...``). One seat keeps the
plain names (``xserver``, ...) and the daemon's single seat is its ``default``.

How a part starts is ``launch.py``; how to tell that it answers, ``probes.py``;
the X cookie and the VNC password, ``credentials.py``; the buses, ``buses.py``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from procs import Record, SandboxError

__all__ = (
    "CLAUDE_ENTRY", "CLAUDE_MODEL", "KEY_ENV", "MAX_SEATS", "NEEDS", "PARTS", "SEAT_PARTS", "Seat", "Settings",
    "is_part_name", "kind_of", "needs", "prefix_of", "seat_count", "seat_place", "seat_spec", "show_order",
    "stop_order", "wanted_parts",
)

#: The variable holding each API's key, by the API ``MODEL`` picks.
KEY_ENV = {"responses": "OPENAI_API_KEY", "messages": "ANTHROPIC_API_KEY"}
#: The [models] entry the sandbox's daemon drives Claude through (MODEL=claude), and its model id.
CLAUDE_ENTRY, CLAUDE_MODEL = "claude", "claude-sonnet-4-5"
#: The kinds of part, in the order they start.
PARTS = ("xserver", "session-bus", "a11y-bus", "openbox", "x11vnc", "demo-app", "model", "daemon")
#: The kinds every seat has one of; the rest (model, daemon) exist once.
SEAT_PARTS = ("xserver", "session-bus", "a11y-bus", "openbox", "x11vnc", "demo-app")
NEEDS = {
    "xserver": (),
    "session-bus": (),
    # The launcher marks the X root window with the bus (AT_SPI_BUS) and finds it on the session bus.
    "a11y-bus": ("xserver", "session-bus"),
    "openbox": ("xserver",),
    "x11vnc": ("xserver",),
    # An application joins the buses when it starts: new buses, a new app.
    "demo-app": ("xserver", "session-bus", "a11y-bus"),
    "model": (),
    "daemon": ("xserver", "session-bus", "model"),
}
#: Each seat is an X server, two buses and a registry, a window manager, a VNC server and a GTK
#: app (~230 MiB resident together, 95 of it the app): the cap catches a typo (SEATS=100) before
#: it fills a small VM.
MAX_SEATS = 16
#: What a record may be called: a seat's part (``xserver``, ``seat2.xserver``) or a shared one.
_PART_NAME = re.compile(r"(?:seat[1-9][0-9]*\.)?(?:xserver|session-bus|a11y-bus|openbox|x11vnc|demo-app)|model|daemon")


@dataclasses.dataclass(frozen=True)
class Seat:
    #: What the daemon calls it: ``default`` when it is the only one, else seat1..seatN.
    name: str
    #: What its parts' records are called before the kind: "" for the only seat, else "seatK.".
    prefix: str

    def part(self, kind: str) -> str:
        return self.prefix + kind


def kind_of(name: str) -> str:
    """``seat2.xserver`` -> ``xserver``; ``daemon`` -> ``daemon``."""
    return name.rpartition(".")[2]


def prefix_of(name: str) -> str:
    """``seat2.xserver`` -> ``seat2.``; a shared part or the only seat's -> ``""``."""
    return name[: len(name) - len(kind_of(name))]


def is_part_name(name: str) -> bool:
    return _PART_NAME.fullmatch(name) is not None


def _seat_number(name: str) -> int:
    prefix = prefix_of(name)
    return int(prefix[4:-1]) if prefix else 0


def stop_order(names: list[str]) -> list[str]:
    """Dependents first: the daemon, the model, then every seat's parts from the app down to its X server."""
    return sorted(names, key=lambda n: (-PARTS.index(kind_of(n)), _seat_number(n)))


def show_order(names: list[str]) -> list[str]:
    """Seat by seat (each in start order), then the shared parts: how status lists them."""
    return sorted(names, key=lambda n: (kind_of(n) not in SEAT_PARTS, _seat_number(n), PARTS.index(kind_of(n))))


def seat_count(raw: str | None) -> int:
    """``$SEATS``: empty means 1; anything but a whole number from 1 to MAX_SEATS is refused by name."""
    text = (raw or "").strip()
    if not text:
        return 1
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_SEATS:
        raise SandboxError(f"SEATS must be a whole number from 1 to {MAX_SEATS} (displays to start), got {raw!r}")
    return int(text)


@dataclasses.dataclass(frozen=True)
class Settings:
    root: Path
    venv: Path
    dir: Path
    xserver: str  # "xvfb" or "xvnc"
    model: str  # "scripted", "openai" or "anthropic": scripted when the API's key is not set
    driver: str  # "x11" or "vnc"
    geometry: str = "1280x800"
    seats: int = 1
    #: ``CONFIG``: a config of the user's, merged with the sandbox's (user_config.py); None: the sandbox's alone.
    config: Path | None = None
    #: ``SCENARIOS``: a folder of the user's scenarios the scripted model plays as ``scripted:NAME`` too.
    scenarios: Path | None = None
    #: ``MODEL``: the API the demo's model is driven through, "responses" (empty) or "messages" (``claude``).
    api: str = "responses"

    @classmethod
    def from_env(cls, root: Path, *, seats: bool = True) -> Settings:
        """The settings ``make`` passes through the environment.

        ``seats=False`` ignores ``$SEATS`` (down, status and the demo go by what
        was started, so a stray or bad SEATS never keeps anyone from stopping it).
        """
        env = os.environ
        xserver = env.get("SANDBOX", "") or "xvfb"
        if xserver not in ("xvfb", "xvnc"):
            raise SandboxError(f"SANDBOX must be 'xvfb' or 'xvnc', got {xserver!r}")
        geometry = env.get("SANDBOX_GEOMETRY", "") or "1280x800"
        width, _, height = geometry.partition("x")
        if not (width.isdigit() and height.isdigit()):
            raise SandboxError(f"SANDBOX_GEOMETRY must look like 1280x800, got {geometry!r}")
        venv = Path(env.get("VENV", "") or root / ".venv")
        # Over Xvnc the daemon drives the display through VNC (the way a VM
        # that only offers VNC is driven), once the VNC driver exists.
        has_vnc_driver = (root / "drivers" / "vnc.py").exists()
        driver = "vnc" if xserver == "xvnc" and has_vnc_driver else "x11"
        choice = env.get("MODEL", "").strip()
        if choice not in ("", "claude"):
            raise SandboxError(f"MODEL must be empty (OpenAI's Responses API) or 'claude' (Anthropic's Messages API), "
                               f"got {choice!r}")
        api = "messages" if choice == "claude" else "responses"
        real = "anthropic" if api == "messages" else "openai"
        return cls(
            root=root,
            venv=venv if venv.is_absolute() else root / venv,
            dir=Path(env.get("SANDBOX_DIR", "") or root / ".sandbox").absolute(),
            xserver=xserver,
            model=real if env.get(KEY_ENV[api], "").strip() else "scripted",
            driver=driver,
            geometry=geometry,
            seats=seat_count(env.get("SEATS")) if seats else 1,
            config=Path(env["CONFIG"]).absolute() if env.get("CONFIG", "").strip() else None,
            scenarios=Path(env["SCENARIOS"]).absolute() if env.get("SCENARIOS", "").strip() else None,
            api=api,
        )

    @property
    def key_env(self) -> str:
        """The variable holding the key of the demo's API (unset: the scripted model plays its part)."""
        return KEY_ENV[self.api]

    def path(self, name: str) -> Path:
        return self.dir / name

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def socket(self) -> Path:
        return self.dir / "cud.sock"

    def log(self, part: str) -> Path:
        return self.dir / "logs" / f"{part}.log"

    @property
    def seat_list(self) -> tuple[Seat, ...]:
        if self.seats == 1:
            return (Seat("default", ""),)
        return tuple(Seat(f"seat{k}", f"seat{k}.") for k in range(1, self.seats + 1))


def wanted_parts(settings: Settings) -> list[str]:
    """Every part this configuration runs, in start order: seat by seat, then the model and the daemon."""
    unused = {"x11vnc"} if settings.xserver == "xvnc" else set()  # Xvnc serves VNC itself
    if settings.model != "scripted":
        unused.add("model")
    names = [seat.part(kind) for seat in settings.seat_list for kind in SEAT_PARTS if kind not in unused]
    return names + [kind for kind in ("model", "daemon") if kind not in unused]


def needs(settings: Settings, name: str) -> list[str]:
    """The parts ``name`` needs: its seat's X server (and buses); for the daemon, every seat's and the model."""
    kind = kind_of(name)
    if kind == "daemon":
        return [seat.part(need) for seat in settings.seat_list for need in ("xserver", "session-bus")] + ["model"]
    return [prefix_of(name) + need for need in NEEDS[kind]]


def seat_spec(settings: Settings, records: dict[str, Record]) -> str | None:
    """``seat1=:5,seat2=:6`` (or VNC addresses): what the daemon drives; None for one seat or a missing server."""
    if settings.seats == 1:
        return None
    places = []
    for seat in settings.seat_list:
        xserver = records.get(seat.part("xserver"))
        if xserver is None:
            return None
        places.append(f"{seat.name}={seat_place(settings, xserver)}")
    return ",".join(places)


def seat_place(settings: Settings, xserver: Record) -> str:
    """Where the daemon reaches a seat's display: its VNC address, or its X display."""
    if settings.driver == "vnc":
        return f"127.0.0.1::{xserver.info['vnc_port']}"
    return xserver.info["display"]
