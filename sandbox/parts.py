"""The parts of the sandbox: how each one starts and how to tell that it answers.

Order matters: a part starts only after the parts it needs answer, and a part
is restarted whenever one it needs is (a new X server means a new display for
everything drawn on it; a new scripted model means a new port for the daemon).

With ``SEATS=N`` (N > 1) every seat has its own X server, openbox, x11vnc and
demo app, recorded as ``seatK.xserver`` and so on, and the one daemon drives
them all (``cud run --seat seat1=:X --seat seat2=:Y ...``). One seat keeps the
plain names (``xserver``, ...) and the daemon's single seat is its ``default``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import select
import shutil
import socket
import string
import struct
import subprocess
import sys
import time
from pathlib import Path

from procs import Record, SandboxError, spawn, state_of, wait_for

__all__ = (
    "MAX_SEATS", "NEEDS", "PARTS", "SEAT_PARTS", "Seat", "Settings", "answers", "is_part_name", "kind_of",
    "needs", "seat_count", "seat_spec", "show_order", "start", "stop_order", "wanted_parts",
)

#: The kinds of part, in the order they start.
PARTS = ("xserver", "openbox", "x11vnc", "demo-app", "model", "daemon")
#: The kinds every seat has one of; the rest (model, daemon) exist once.
SEAT_PARTS = ("xserver", "openbox", "x11vnc", "demo-app")
NEEDS = {
    "xserver": (),
    "openbox": ("xserver",),
    "x11vnc": ("xserver",),
    "demo-app": ("xserver",),
    "model": (),
    "daemon": ("xserver", "model"),
}
#: Seconds each part may take to answer after it started.
TIMEOUTS = {"xserver": 30.0, "openbox": 20.0, "x11vnc": 20.0, "demo-app": 30.0, "model": 20.0, "daemon": 60.0}
#: Not a key: the scripted model accepts anything, and the SDK insists on one.
SCRIPTED_KEY = "sk-scripted-demo-not-a-real-key"
#: Each seat is an X server, a window manager, a VNC server and a Tk app (~60 MiB
#: together): the cap catches a typo (SEATS=100) before it fills a small VM.
MAX_SEATS = 16
#: What a record may be called: a seat's part (``xserver``, ``seat2.xserver``) or a shared one.
_PART_NAME = re.compile(r"(?:seat[1-9][0-9]*\.)?(?:xserver|openbox|x11vnc|demo-app)|model|daemon")


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


def _prefix_of(name: str) -> str:
    return name[: len(name) - len(kind_of(name))]


def is_part_name(name: str) -> bool:
    return _PART_NAME.fullmatch(name) is not None


def _seat_number(name: str) -> int:
    prefix = _prefix_of(name)
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
    model: str  # "scripted" or "openai"
    driver: str  # "x11" or "vnc"
    geometry: str = "1280x800"
    seats: int = 1

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
        return cls(
            root=root,
            venv=venv if venv.is_absolute() else root / venv,
            dir=Path(env.get("SANDBOX_DIR", "") or root / ".sandbox").absolute(),
            xserver=xserver,
            model="openai" if env.get("OPENAI_API_KEY", "").strip() else "scripted",
            driver=driver,
            geometry=geometry,
            seats=seat_count(env.get("SEATS")) if seats else 1,
        )

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
    if settings.model == "openai":
        unused.add("model")
    names = [seat.part(kind) for seat in settings.seat_list for kind in SEAT_PARTS if kind not in unused]
    return names + [kind for kind in ("model", "daemon") if kind not in unused]


def needs(settings: Settings, name: str) -> list[str]:
    """The parts ``name`` needs: its seat's X server; for the daemon, every seat's and the model."""
    kind = kind_of(name)
    if kind == "daemon":
        return [seat.part("xserver") for seat in settings.seat_list] + ["model"]
    return [_prefix_of(name) + need for need in NEEDS[kind]]


def seat_spec(settings: Settings, records: dict[str, Record]) -> str | None:
    """``seat1=:5,seat2=:6`` (or VNC addresses): what the daemon drives; None for one seat or a missing server."""
    if settings.seats == 1:
        return None
    places = []
    for seat in settings.seat_list:
        xserver = records.get(seat.part("xserver"))
        if xserver is None:
            return None
        places.append(f"{seat.name}={_seat_place(settings, xserver)}")
    return ",".join(places)


def _seat_place(settings: Settings, xserver: Record) -> str:
    if settings.driver == "vnc":
        return f"127.0.0.1::{xserver.info['vnc_port']}"
    return xserver.info["display"]


# -- secrets ----------------------------------------------------------------------------------
def write_xauthority(path: Path) -> None:
    """A fresh MIT cookie valid for any display number (the number is not known before -displayfd).

    One FamilyLocal entry for this host (python-xlib matches only that kind)
    and one FamilyWild entry; both with an empty display number, which every
    client library takes to match any display.
    """

    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    cookie = secrets.token_bytes(16)

    def entry(family: int, address: bytes) -> bytes:
        number = b""  # any display
        return struct.pack(">H", family) + b"".join(
            counted(field) for field in (address, number, b"MIT-MAGIC-COOKIE-1", cookie)
        )

    data = entry(256, socket.gethostname().encode()) + entry(0xFFFF, b"")
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def ensure_vnc_password(settings: Settings) -> None:
    """A generated password (kept across restarts, so a watcher's viewer keeps working)."""
    plain, obfuscated = settings.path("vnc-password"), settings.path("vnc-passwd")
    if plain.exists() and obfuscated.exists():
        return
    tool = shutil.which("tigervncpasswd") or shutil.which("vncpasswd")
    if tool is None:
        raise SandboxError("vncpasswd not found: install tigervnc-tools (sandbox/deps.sh)")
    # VNC authentication uses 8 characters at most.
    password = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(8))
    fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    fd = os.open(obfuscated, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        # The password goes through stdin, never argv.
        subprocess.run([tool, "-f"], input=(password + "\n").encode(), stdout=out, check=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- answering ----------------------------------------------------------------------------------
def x_connects(display: str, xauthority: Path) -> bool:
    from Xlib import display as xdisplay  # the venv's python-xlib
    from Xlib import error as xerror

    os.environ["XAUTHORITY"] = str(xauthority)
    try:
        connection = xdisplay.Display(display)
    except (xerror.DisplayError, OSError):
        return False
    connection.close()
    return True


def _x_query(display: str, xauthority: Path, query: str) -> bool:
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    os.environ["XAUTHORITY"] = str(xauthority)
    try:
        connection = xdisplay.Display(display)
    except (xerror.DisplayError, OSError):
        return False
    try:
        root = connection.screen().root
        if query == "wm":
            prop = root.get_full_property(connection.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType)
            return bool(prop and prop.value)
        # query == "demo-app": a window titled like the demo app, at any depth (the WM reparents).
        pending = [root]
        while pending:
            window = pending.pop()
            try:
                if window.get_wm_name() == "cud demo":
                    return True
                pending.extend(window.query_tree().children)
            except xerror.XError:  # a window that vanished meanwhile
                continue
        return False
    finally:
        connection.close()


def rfb_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as conn:
            return conn.recv(12).startswith(b"RFB ")
    except OSError:
        return False


def tcp_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


def daemon_answers(settings: Settings) -> bool:
    cuctl = settings.venv / "bin" / "cuctl"
    if not cuctl.exists():
        return False
    result = subprocess.run(
        [str(cuctl), "--socket", str(settings.socket), "ping"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
    )
    return result.returncode == 0


def answers(settings: Settings, record: Record, records: dict[str, Record]) -> bool:
    """Whether a running part does its job right now (one quick probe, no waiting)."""
    xauthority = settings.path("Xauthority")
    xserver = records.get(_prefix_of(record.name) + "xserver")
    display = xserver.info.get("display", "") if xserver is not None else ""
    name = kind_of(record.name)
    if name == "xserver":
        ok = x_connects(record.info["display"], xauthority)
        return ok and ("vnc_port" not in record.info or rfb_answers(int(record.info["vnc_port"])))
    if name == "openbox":
        return bool(display) and _x_query(display, xauthority, "wm")
    if name == "x11vnc":
        return rfb_answers(int(record.info["vnc_port"]))
    if name == "demo-app":
        return bool(display) and _x_query(display, xauthority, "demo-app")
    if name == "model":
        return tcp_answers(int(record.info["port"]))
    if name == "daemon":
        return daemon_answers(settings)
    raise AssertionError(name)


# -- starting ----------------------------------------------------------------------------------
def _base_env(settings: Settings, display: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "XAUTHORITY", "CUD_SOCKET")}
    env["XAUTHORITY"] = str(settings.path("Xauthority"))
    if display:
        env["DISPLAY"] = display
    return env


def _read_displayfd(fd: int, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            raise SandboxError(f"the X server did not report a display number; see {log}")
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(fd, 64)
            if not chunk and proc.poll() is not None:
                continue
            data += chunk
    return ":" + data.decode().strip()


def _start_xserver(
    settings: Settings, name: str, log: Path, records: dict[str, Record]
) -> tuple[subprocess.Popen[bytes], Record]:
    xauthority = settings.path("Xauthority")
    # One cookie for every display of the sandbox (the daemon and the viewers read one
    # file): a fresh one, unless another seat's X server still runs with the current one.
    others = [r for n, r in records.items() if kind_of(n) == "xserver" and n != name and state_of(r) == "running"]
    if not others or not xauthority.exists():
        write_xauthority(xauthority)
    read_fd, write_fd = os.pipe()
    common = ["-displayfd", str(write_fd), "-nolisten", "tcp", "-noreset", "-auth", str(xauthority)]
    vnc_port = None
    if settings.xserver == "xvnc":
        ensure_vnc_password(settings)
        vnc_port = free_port()
        argv = ["Xvnc", *common, "-geometry", settings.geometry, "-depth", "24", "-localhost",
                "-interface", "127.0.0.1", "-rfbport", str(vnc_port),
                "-SecurityTypes", "VncAuth", "-rfbauth", str(settings.path("vnc-passwd"))]
    else:
        argv = ["Xvfb", *common, "-screen", "0", f"{settings.geometry}x24"]
    try:
        proc, record = spawn(name, argv, log, _base_env(settings, None), pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    try:
        record.info["display"] = _read_displayfd(read_fd, proc, log, TIMEOUTS["xserver"])
    except SandboxError:
        _abandon(proc)
        raise
    finally:
        os.close(read_fd)
    if vnc_port is not None:
        record.info["vnc_port"] = str(vnc_port)
    return proc, record


def _abandon(proc: subprocess.Popen[bytes]) -> None:
    """Stop a part that never came up: nothing records it, so nothing else would."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start(settings: Settings, name: str, records: dict[str, Record]) -> Record:
    """Start part ``name`` and wait until it answers; returns its record (not yet saved).

    A part that does not answer in time is stopped again before the error is raised.
    """
    log = settings.log(name)
    kind, prefix = kind_of(name), _prefix_of(name)
    xserver = records.get(prefix + "xserver") if kind in SEAT_PARTS else records.get("xserver")
    display = xserver.info["display"] if kind != "xserver" and xserver is not None else None
    env = _base_env(settings, display)
    if kind == "xserver":
        proc, record = _start_xserver(settings, name, log, records)
    elif kind == "openbox":
        proc, record = spawn(name, ["openbox", "--sm-disable"], log, env)
    elif kind == "x11vnc":
        ensure_vnc_password(settings)
        port = free_port()
        argv = ["x11vnc", "-display", str(display), "-auth", str(settings.path("Xauthority")),
                "-rfbauth", str(settings.path("vnc-passwd")), "-localhost", "-rfbport", str(port),
                "-forever", "-shared", "-viewonly", "-noxdamage"]
        proc, record = spawn(name, argv, log, env)
        record.info["vnc_port"] = str(port)
    elif kind == "demo-app":
        app_log = settings.path(f"{prefix}demo-app.jsonl")
        app_log.unlink(missing_ok=True)  # what this instance receives, from its start on
        argv = [settings.python, str(settings.root / "sandbox" / "demo_app.py"), "--log", str(app_log)]
        proc, record = spawn(name, argv, log, env)
    elif kind == "model":
        port_file = settings.path("model.port")
        port_file.unlink(missing_ok=True)
        argv = [settings.python, "-m", "cud.scripted", "--scenario", "demo", "--port-file", str(port_file)]
        proc, record = spawn(name, argv, log, env)
        try:
            wait_for("the scripted model", port_file.exists, lambda: proc.poll() is None, log, TIMEOUTS[kind])
        except SandboxError:
            _abandon(proc)
            raise
        record.info["port"] = port_file.read_text().strip()
    elif kind == "daemon":
        settings.socket.unlink(missing_ok=True)  # a stale one from a daemon that died
        state = settings.path("state")
        state.mkdir(mode=0o700, exist_ok=True)
        argv = [str(settings.venv / "bin" / "cud"), "run", "--socket", str(settings.socket), "--state-dir", str(state)]
        spec = seat_spec(settings, records)
        if spec is not None:
            argv += _seat_arguments(settings, records)
        elif settings.driver == "vnc":
            port = records["xserver"].info["vnc_port"]
            argv += ["--vnc", f"127.0.0.1::{port}", "--vnc-password-file", str(settings.path("vnc-password"))]
        else:
            argv += ["--display", str(display)]
        if settings.model == "scripted":
            env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{records['model'].info['port']}/v1"
            env["OPENAI_API_KEY"] = SCRIPTED_KEY
        proc, record = spawn(name, argv, log, env)
        record.info["model"] = settings.model
        record.info["socket"] = str(settings.socket)
        if spec is not None:
            record.info["seats"] = spec
    else:
        raise AssertionError(name)
    everything = {**records, name: record}
    what = f"{name} ({' '.join(record.cmdline[:1])}, pid {record.pid})"
    try:
        wait_for(what, lambda: answers(settings, record, everything), lambda: proc.poll() is None, log, TIMEOUTS[kind])
    except SandboxError:
        _abandon(proc)
        raise
    return record


def _seat_arguments(settings: Settings, records: dict[str, Record]) -> list[str]:
    """How the daemon is told about several seats: ``--seat`` flags for X displays, a config for VNC.

    ``--seat`` names X displays only, so over Xvnc (driven through VNC, as with one
    seat) the seats go into a config file of ``[[seats]]`` tables, rewritten at
    every start to the servers' current ports.
    """
    if settings.driver != "vnc":
        return [arg for seat in settings.seat_list
                for arg in ("--seat", f"{seat.name}={records[seat.part('xserver')].info['display']}")]
    lines = ["# Written by `make sandbox-up` at every start of the daemon: the sandbox's seats over VNC."]
    password = json.dumps(str(settings.path("vnc-password")))  # a JSON string is a TOML basic string
    for seat in settings.seat_list:
        place = _seat_place(settings, records[seat.part("xserver")])
        lines += ["", "[[seats]]", f"name = {json.dumps(seat.name)}", f"vnc = {json.dumps(place)}",
                  f"vnc_password_file = {password}"]
    config = settings.path("cud.toml")
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return ["--config", str(config)]


if __name__ == "__main__":
    sys.exit("parts.py is used by sandboxctl.py")
