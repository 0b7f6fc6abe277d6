"""How each part of the sandbox starts, and the wait until it answers (stopped again if it never does)."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from pathlib import Path

from buses import LAUNCHER, a11y_argv, app_env, session_argv
from credentials import ensure_vnc_password, share_xauthorities, write_xauthority
from parts import CLAUDE_ENTRY, CLAUDE_MODEL, SEAT_PARTS, Seat, Settings, kind_of, prefix_of, seat_place, seat_spec
from probes import answers
from procs import Record, SandboxError, spawn, state_of, wait_for
from seat_sessions import seat_session
from user_config import merged_config

__all__ = ("SCRIPTED_KEY", "TIMEOUTS", "start")

#: Seconds each part may take to answer after it started.
TIMEOUTS = {"xserver": 30.0, "session-bus": 20.0, "a11y-bus": 20.0, "openbox": 20.0, "x11vnc": 20.0, "demo-app": 30.0,
            "model": 20.0, "daemon": 60.0}
#: Debian's Python, which has PyGObject (python3-gi) for the GTK demo app; the venv has no GObject.
SYSTEM_PYTHON = "/usr/bin/python3"
#: Not a key: the scripted model accepts anything, and the SDK insists on one.
SCRIPTED_KEY = "sk-scripted-demo-not-a-real-key"

#: Where the sandbox's seats see their homes (as root): OSWorld's tasks and people's own scripts name it.
SANDBOX_HOME_PATH = "/home/user"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _base_env(settings: Settings, display: str | None, xserver: Record | None = None) -> dict[str, str]:
    """The environment of a part; with ``xserver``, its cookie only (a seat's parts), else every display's."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "XAUTHORITY", "CUD_SOCKET")}
    env["XAUTHORITY"] = str(_cookie_of(settings, xserver))
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


def _cookie_of(settings: Settings, xserver: Record | None) -> Path:
    """An X server's own cookie file; for None (or a server recorded before they had one), every display's."""
    own = None if xserver is None else xserver.info.get("xauthority")
    return Path(own) if own else settings.path("Xauthority")


def _start_xserver(
    settings: Settings, name: str, log: Path, records: dict[str, Record]
) -> tuple[subprocess.Popen[bytes], Record]:
    # A cookie of its own for every X server, so that one display's cookie opens no other. The
    # daemon reads them all from one file (Xauthority), rewritten once the number is known.
    xauthority = settings.path(f"{name}.Xauthority")
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
    record.info["xauthority"] = str(xauthority)
    running = {n: r for n, r in records.items() if kind_of(n) == "xserver" and n != name and state_of(r) == "running"}
    share_xauthorities(settings.path("Xauthority"), {
        r.info["display"]: Path(r.info["xauthority"]) for r in (*running.values(), record)
        if "display" in r.info and "xauthority" in r.info})
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
    kind, prefix = kind_of(name), prefix_of(name)
    xserver = records.get(prefix + "xserver") if kind in SEAT_PARTS else records.get("xserver")
    display = xserver.info["display"] if kind not in ("xserver", "session-bus") and xserver is not None else None
    # Everything on a seat is in that seat's session, with accessibility on (buses.py).
    # A seat's parts get its display's cookie only; the daemon and the model, every display's.
    env = app_env(_base_env(settings, display, xserver if kind in SEAT_PARTS else None),
                  records.get(prefix + "session-bus") if kind in SEAT_PARTS else None)
    if kind == "xserver":
        proc, record = _start_xserver(settings, name, log, records)
    elif kind == "session-bus":
        # As the sandbox's own user, admitting the seat's (buses.py): a seat's reset ends every process of its user.
        session = seat_session(settings, _seat_of(settings, prefix))
        argv, address = session_argv(settings, prefix, session)
        proc, record = spawn(name, argv, log, env)
        record.info["address"] = address
    elif kind == "a11y-bus":
        session = seat_session(settings, _seat_of(settings, prefix))
        argv, extra = a11y_argv(settings, prefix, session)
        # As the sandbox's own user (buses.py), with its display's cookie only (env): it sets AT_SPI_BUS on
        # the X root window.
        proc, record = spawn(name, argv, log, {**env, **extra}, program=LAUNCHER)
    elif kind == "openbox":
        proc, record = spawn(name, ["openbox", "--sm-disable"], log, env)
    elif kind == "x11vnc":
        ensure_vnc_password(settings)
        port = free_port()
        argv = ["x11vnc", "-display", str(display), "-auth", str(_cookie_of(settings, xserver)),
                "-rfbauth", str(settings.path("vnc-passwd")), "-localhost", "-rfbport", str(port),
                "-forever", "-shared", "-viewonly", "-noxdamage"]
        proc, record = spawn(name, argv, log, env)
        record.info["vnc_port"] = str(port)
    elif kind == "demo-app":
        app_log = settings.path(f"{prefix}demo-app.jsonl")
        # Appended to across restarts: make demo's suite resets the seats, which ends the app, and what it
        # received before stays on record (the demo counts from the lines there before its task).
        argv = [SYSTEM_PYTHON, str(settings.root / "sandbox" / "demo_app.py"), "--log", str(app_log)]
        proc, record = spawn(name, argv, log, env)
    elif kind == "model":
        port_file = settings.path("model.port")
        port_file.unlink(missing_ok=True)
        # The example suite's specs ask for scripted:NAME: make demo runs it after the demo task.
        argv = [settings.python, "-m", "cud.scripted", "--api", settings.api, "--scenario", "demo", "--scenarios",
                str(settings.root / "examples" / "suite" / "scenarios"), "--port-file", str(port_file)]
        if settings.scenarios is not None:  # SCENARIOS=dir/: the user's too, theirs on a name in both
            argv[-2:-2] = ["--scenarios", str(settings.scenarios)]
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
        argv += _config_file(settings, seat_lines(settings, records), model_lines(settings, records))
        if settings.model == "scripted" and settings.api == "responses":
            env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{records['model'].info['port']}/v1"
            env["OPENAI_API_KEY"] = SCRIPTED_KEY
        elif settings.model == "scripted":  # the entry's key; the daemon needs no OpenAI key for its tasks
            env["ANTHROPIC_API_KEY"] = SCRIPTED_KEY
        proc, record = spawn(name, argv, log, env)
        record.info["model"] = settings.model
        record.info["api"] = settings.api
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


def _seat_of(settings: Settings, prefix: str) -> Seat:
    return next(seat for seat in settings.seat_list if seat.prefix == prefix)


def seat_lines(settings: Settings, records: dict[str, Record]) -> list[str]:
    """The daemon's seats, as config lines, rewritten at every start to the servers' current places.

    Each names its seat's session bus, so that targets (docs/targets.md) name the
    accessibility element an action touches. A seat driven over VNC (SANDBOX=xvnc)
    also names the X display it shows, to read windows from. One seat is the
    daemon's ``default``: top-level keys; several are ``[[seats]]`` tables. Not run as root,
    every seat's user would be the invoking user, and two seats may not share a user (one's
    reset would end the other's task): then only the first seat has a session.
    """
    password = json.dumps(str(settings.path("vnc-password")))  # a JSON string is a TOML basic string
    tables = []
    for seat in settings.seat_list:
        xserver = records[seat.part("xserver")]
        keys = [f"name = {json.dumps(seat.name)}"] if settings.seats > 1 else []
        if settings.driver == "vnc":
            keys += [f"vnc = {json.dumps(seat_place(settings, xserver))}", f"vnc_password_file = {password}",
                     f"x_display = {json.dumps(xserver.info['display'])}"]
        else:
            keys.append(f"display = {json.dumps(xserver.info['display'])}")
        keys.append(f"session_bus = {json.dumps(records[seat.part('session-bus')].info['address'])}")
        session = seat_session(settings, seat)  # its session: cuctl exec/cp/clipboard/reset (docs/sessions.md)
        if os.geteuid() == 0 or seat == settings.seat_list[0]:
            keys += [f"user = {json.dumps(session.user)}", f"home = {json.dumps(str(session.home))}",
                     f"home_template = {json.dumps(str(session.template))}",
                     "empty_existing_home = true"]  # the sandbox made the home, under its own directory
            if os.geteuid() == 0:  # a seat of its own (docs/sessions.md): what a root daemon can give it
                keys += ["private_tmp = true", f"home_path = {json.dumps(SANDBOX_HOME_PATH)}"]
        tables.append(keys)
    if settings.seats == 1:
        return ["# The sandbox's display and the session bus its applications use.", *tables[0]]
    lines = ["# The sandbox's seats, each with the session bus its applications use."]
    for keys in tables:
        lines += ["", "[[seats]]", *keys]
    return lines


def model_lines(settings: Settings, records: dict[str, Record]) -> list[str]:
    """MODEL=claude: the [models] entry the demo's task names, at the scripted Messages server without
    ANTHROPIC_API_KEY; nothing for the Responses API (the daemon's own model)."""
    if settings.api != "messages":
        return []
    lines = ["", "# MODEL=claude: the demo's model, through Anthropic's Messages API (docs/models.md).",
             f"[models.{CLAUDE_ENTRY}]", 'api = "anthropic"', f"model = {json.dumps(CLAUDE_MODEL)}"]
    if settings.model == "scripted":
        lines.append(f"base_url = \"http://127.0.0.1:{records['model'].info['port']}\"  # the scripted model")
    return lines


def _config_file(settings: Settings, lines: list[str], models: list[str]) -> list[str]:
    """The daemon's config, rewritten at every start: ``lines`` (top-level keys for one seat, ``[[seats]]``
    tables for several) and ``models`` (tables) merged with the user's CONFIG (user_config.py)."""
    tables = ([] if settings.seats == 1 else lines) + models
    text = merged_config(settings, lines if settings.seats == 1 else [], tables)
    config = settings.path("cud.toml")
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return ["--config", str(config)]
