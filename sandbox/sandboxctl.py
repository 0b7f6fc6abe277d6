"""``sandboxctl.py up|down|status``: the sandbox behind ``make sandbox-up/-down/-status``.

Everything lives in one directory (``$SANDBOX_DIR``, default ``.sandbox/``):
``run/*.json`` records what was started (pid, command line, start time),
``logs/`` the output of every part, ``state/`` the daemon's database, and
``cud.sock`` its socket. ``up`` is idempotent: parts that run and answer are
left alone, dead ones are restarted (with whatever depends on them).
``down`` signals only the pids recorded in ``run/`` that still run the
recorded program, then removes the records and the socket.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from parts import NEEDS, PARTS, Settings, answers, start, wanted_parts
from procs import Record, SandboxError, forget, load, save, state_of, stop

__all__ = ()

ROOT = Path(__file__).resolve().parent.parent


def _show(path: Path | str) -> str:
    """A path as short as it can be while still working from the current directory."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def say(text: str) -> None:
    print(f"sandbox: {text}", flush=True)


@contextmanager
def locked(settings: Settings) -> Iterator[None]:
    """One sandbox command at a time per sandbox directory."""
    settings.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(settings.dir / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another sandbox command is running on this directory; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _records(settings: Settings) -> dict[str, Record]:
    found = {}
    for name in PARTS:
        record = load(settings.dir / "run", name)
        if record is not None:
            found[name] = record
    return found


def _config_path(settings: Settings) -> Path:
    return settings.dir / "run" / "sandbox.json"


def _stop_parts(settings: Settings, records: dict[str, Record], names: list[str], *, quiet: bool = True) -> None:
    """Stop ``names`` (dependents first) and forget them; ``quiet``: say nothing about the dead."""
    for name in reversed(PARTS):
        if name in names and name in records:
            record = records.pop(name)
            if not quiet or state_of(record) == "running":
                say(f"{name}: {stop(record)}")
            forget(settings.dir / "run", name)


# -- up -------------------------------------------------------------------------------------------
def up(settings: Settings) -> int:
    with locked(settings):
        records = _records(settings)
        wanted = wanted_parts(settings)
        config = {"xserver": settings.xserver, "driver": settings.driver, "model": settings.model}
        try:
            previous = json.loads(_config_path(settings).read_text())
        except (FileNotFoundError, ValueError):
            previous = config
        if records and (previous.get("xserver"), previous.get("driver")) != (settings.xserver, settings.driver):
            say(f"the sandbox ran {previous.get('xserver')}; SANDBOX={settings.xserver} now: restarting everything")
            _stop_parts(settings, records, list(PARTS))
        elif records and previous.get("model") != settings.model:
            now = "OPENAI_API_KEY is set" if settings.model == "openai" else "OPENAI_API_KEY is not set"
            say(f"{now} now: restarting the model and the daemon")
            _stop_parts(settings, records, ["model", "daemon"])
        # Parts this configuration does not use (the scripted model once a key is set, ...).
        _stop_parts(settings, records, [name for name in records if name not in wanted])

        to_start: list[str] = []
        for name in wanted:
            record = records.get(name)
            state = state_of(record) if record else "absent"
            if record is not None and state == "running" and not any(need in to_start for need in NEEDS[name]):
                if answers(settings, record, records):
                    continue
                say(f"{name}: runs (pid {record.pid}) but does not answer; restarting it (log: {_show(record.log)})")
            elif record is not None and state != "absent":
                why = "its pid belongs to another program now" if state == "replaced" else "it had died"
                if state == "running":
                    why = "it needs a part that restarts"
                say(f"{name}: restarting ({why}; log: {_show(record.log)})")
            to_start.append(name)

        if not to_start:
            say("already up; everything runs and answers, nothing changed")
            summary(settings, records)
            return 0
        _stop_parts(settings, records, to_start)
        _config_path(settings).parent.mkdir(parents=True, exist_ok=True)
        _config_path(settings).write_text(json.dumps(config) + "\n")
        for name in wanted:
            if name not in to_start:
                continue
            try:
                record = start(settings, name, records)
            except SandboxError as exc:
                say(f"{name} failed: {exc}")
                say("what did start is still running: `make sandbox-status`, `make sandbox-down`")
                return 1
            save(settings.dir / "run", record)
            records[name] = record
            say(f"{name}: started (pid {record.pid})")
        summary(settings, records)
        return 0


def summary(settings: Settings, records: dict[str, Record]) -> None:
    xserver = records["xserver"]
    display = xserver.info["display"]
    kind = "Xvnc" if settings.xserver == "xvnc" else "Xvfb"
    port = xserver.info.get("vnc_port") or records["x11vnc"].info["vnc_port"]
    password = settings.path("vnc-password").read_text().strip()
    view = " (view only)" if settings.xserver == "xvfb" else ""
    xauthority = _show(settings.path("Xauthority"))
    lines = [
        f"display  {display} ({kind}, {settings.geometry}); X clients need XAUTHORITY={xauthority}",
        f"watch    xtigervncviewer -passwd {_show(settings.path('vnc-passwd'))} localhost::{port}{view}",
        f"         (any VNC viewer: localhost port {port}, password {password}; "
        f"from another machine first: ssh -L {port}:localhost:{port} THIS-HOST)",
        f"daemon   {_show(settings.venv / 'bin' / 'cuctl')} --socket {_show(settings.socket)} list",
    ]
    if settings.driver == "vnc":
        lines.append(f"         drives the display over VNC (127.0.0.1::{port})")
    if settings.model == "scripted":
        lines.append("model    SCRIPTED: OPENAI_API_KEY is not set, so a bundled script (cud/scripted/scenarios/"
                     "demo.json) plays the model's part; set the key for the real one")
    else:
        lines.append("model    the OpenAI API (OPENAI_API_KEY is set)")
    lines.append(f"logs     {_show(settings.dir / 'logs')}/{{{','.join(n for n in PARTS if n in records)}}}.log")
    lines.append("stop     make sandbox-down")
    for line in lines:
        print(f"  {line}")


# -- down -----------------------------------------------------------------------------------------
def down(settings: Settings) -> int:
    if not settings.dir.exists():
        say("nothing to stop (no sandbox directory)")
        return 0
    with locked(settings):
        records = _records(settings)
        if not records:
            say("nothing was running")
        _stop_parts(settings, records, list(PARTS), quiet=False)
        for leftover in ("cud.sock", "model.port"):
            settings.path(leftover).unlink(missing_ok=True)
        _config_path(settings).unlink(missing_ok=True)
        say(f"down; logs and the daemon's state stay in {_show(settings.dir)}")
    return 0


# -- status ---------------------------------------------------------------------------------------
def status(settings: Settings) -> int:
    records = _records(settings) if settings.dir.exists() else {}
    if not records:
        say("not running")  # a state, not a failure: `make sandbox-status` exits 0
        return 0
    dead = 0
    for name in PARTS:
        record = records.get(name)
        if record is None:
            continue
        state = state_of(record)
        detail = " ".join(f"{k}={v}" for k, v in record.info.items())
        if state == "running":
            line = f"running  pid {record.pid}"
            if name == "daemon":
                line += ", answers ping" if answers(settings, record, records) else ", DOES NOT ANSWER ping"
        else:
            dead += 1
            line = "DEAD     " + ("(pid reused by another program)" if state == "replaced" else f"was pid {record.pid}")
        print(f"  {name:9} {line}  {detail}  log: {_show(record.log)}")
    if dead:
        say(f"{dead} part(s) dead: `make sandbox-up` restarts them")
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("up", "down", "status"):
        print("usage: sandboxctl.py up|down|status", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env(ROOT)
        return {"up": up, "down": down, "status": status}[argv[0]](settings)
    except SandboxError as exc:
        say(str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
