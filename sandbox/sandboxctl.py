"""``sandboxctl.py up|down|status``: the sandbox behind ``make sandbox-up/-down/-status``.

Everything lives in one directory (``$SANDBOX_DIR``, default ``.sandbox/``):
``run/*.json`` records what was started (pid, command line, start time),
``logs/`` the output of every part, ``state/`` the daemon's database, and
``cud.sock`` its socket. ``up`` is idempotent: parts that run and answer are
left alone, dead ones are restarted (with whatever depends on them).
``down`` signals only the pids recorded in ``run/`` that still run the
recorded program, then removes the records and the socket. ``down`` and
``status`` go by the records, whatever ``$SEATS`` says now.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from buses import A11Y_ENV, check_socket_paths
from launch import start
from leftovers import remove_run_dirs
from parts import (
    CLAUDE_ENTRY,
    CLAUDE_MODEL,
    SEAT_PARTS,
    Settings,
    is_part_name,
    kind_of,
    needs,
    seat_spec,
    show_order,
    stop_order,
    wanted_parts,
)
from probes import answers
from procs import Record, SandboxError, forget, load, save, state_of, stop
from seat_sessions import remove_seat_users
from user_config import check_user_files, fingerprint

__all__ = ()

ROOT = Path(__file__).resolve().parent.parent
#: What Qt applications need besides the session bus, as a shell would set it.
A11Y_SHELL = " ".join(f"{k}={v}" for k, v in A11Y_ENV.items())


def _show(path: Path | str) -> str:
    """A path as short as it can be while still working from the current directory."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def path_line(settings: Settings) -> str:
    """How to type ``cuctl`` bare, as the README's examples do: the venv's bin/ on PATH, from here."""
    bin_dir = _show(settings.venv / "bin")
    where = bin_dir if os.path.isabs(bin_dir) else f"$PWD/{bin_dir}"
    return f'         (bare cuctl, as in the README: export PATH="{where}:$PATH")'


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
    """Every part recorded in run/, in the order status lists them (whatever SEATS is now)."""
    run = settings.dir / "run"
    names = [path.stem for path in run.glob("*.json") if is_part_name(path.stem)] if run.is_dir() else []
    found = {}
    for name in show_order(names):
        record = load(run, name)
        if record is not None:
            found[name] = record
    return found


def _config_path(settings: Settings) -> Path:
    return settings.dir / "run" / "sandbox.json"


def _stop_parts(settings: Settings, records: dict[str, Record], names: list[str], *, quiet: bool = True) -> None:
    """Stop ``names`` (dependents first) and forget them; ``quiet``: say nothing about the dead."""
    for name in stop_order(list(names)):
        if name in records:
            record = records.pop(name)
            if not quiet or state_of(record) == "running":
                say(f"{name}: {stop(record)}")
            forget(settings.dir / "run", name)


# -- up -------------------------------------------------------------------------------------------
def up(settings: Settings) -> int:
    with locked(settings):
        records = _records(settings)
        wanted = wanted_parts(settings)
        config = {"xserver": settings.xserver, "driver": settings.driver, "model": settings.model,
                  "api": settings.api, "seats": settings.seats, **fingerprint(settings)}
        try:
            previous = json.loads(_config_path(settings).read_text())
        except (FileNotFoundError, ValueError):
            previous = config
        if records and (previous.get("xserver"), previous.get("driver")) != (settings.xserver, settings.driver):
            say(f"the sandbox ran {previous.get('xserver')}; SANDBOX={settings.xserver} now: restarting everything")
            _stop_parts(settings, records, list(records))
        else:
            if records and previous.get("seats", 1) != settings.seats:
                # Several seats before and after: the seats that stay keep running. One
                # seat's parts have other names than seat1's, so 1 <-> N starts afresh.
                say(f"the sandbox ran {previous.get('seats', 1)} seat(s); SEATS={settings.seats} now: "
                    "starting or stopping displays to match, and restarting the daemon")
            if records and (previous.get("model"), previous.get("api", "responses")) != (settings.model, settings.api):
                now = f"{settings.key_env} is {'not set' if settings.model == 'scripted' else 'set'}"
                say(f"{'MODEL=claude, ' if settings.api == 'messages' else ''}{now} now: restarting the model and the daemon")
                _stop_parts(settings, records, ["model", "daemon"])
            for key, parts in (("scenarios", ["model", "daemon"]), ("config", ["daemon"])):
                if records and previous.get(key) != config[key]:
                    say(f"{key.upper()} is not what it was at the last start: restarting the {' and the '.join(parts)}")
                    _stop_parts(settings, records, parts)
        # Parts this configuration does not use (the scripted model once a key is set, ...).
        _stop_parts(settings, records, [name for name in records if name not in wanted])

        to_start: list[str] = []
        for name in wanted:
            record = records.get(name)
            state = state_of(record) if record else "absent"
            if record is not None and state == "running" and not any(need in to_start for need in needs(settings, name)):
                if kind_of(name) == "daemon" and record.info.get("seats") != seat_spec(settings, records):
                    # Every seat's X server runs, but not the set the daemon was started with.
                    say(f"daemon: restarting (it drives {record.info.get('seats') or 'one seat'}; "
                        f"the sandbox's seats are {seat_spec(settings, records) or 'one seat'})")
                elif answers(settings, record, records):
                    continue
                else:
                    say(f"{name}: runs (pid {record.pid}) but does not answer; restarting it "
                        f"(log: {_show(record.log)})")
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


def _vnc_port(records: dict[str, Record], prefix: str) -> str:
    """Where a seat's screen is served: Xvnc's own port, else its x11vnc's."""
    xserver = records[prefix + "xserver"]
    watcher = records.get(prefix + "x11vnc")
    return xserver.info.get("vnc_port") or (watcher.info["vnc_port"] if watcher else "?")


def summary(settings: Settings, records: dict[str, Record]) -> None:
    if settings.seats > 1:
        _summary_of_seats(settings, records)
        return
    xserver = records["xserver"]
    display = xserver.info["display"]
    kind = "Xvnc" if settings.xserver == "xvnc" else "Xvfb"
    port = _vnc_port(records, "")
    password = settings.path("vnc-password").read_text().strip()
    view = " (view only)" if settings.xserver == "xvfb" else ""
    xauthority = _show(settings.path("Xauthority"))
    lines = [
        f"display  {display} ({kind}, {settings.geometry}); your X clients: DISPLAY={display} XAUTHORITY={xauthority}",
        f"watch    xtigervncviewer -passwd {_show(settings.path('vnc-passwd'))} localhost::{port}{view}",
        f"         (any VNC viewer: localhost port {port}, password {password}; "
        f"from another machine first: ssh -L {port}:localhost:{port} THIS-HOST)",
        f"daemon   {_show(settings.venv / 'bin' / 'cuctl')} --socket {_show(settings.socket)} list",
        path_line(settings),
        f"apps     of your own on the display, with their accessibility trees: "
        f"DBUS_SESSION_BUS_ADDRESS={records['session-bus'].info['address']} {A11Y_SHELL} "
        "(docs/targets.md, \"Apps you start\")",
    ]
    if settings.driver == "vnc":
        lines.append(f"         drives the display over VNC (127.0.0.1::{port})")
    lines += _model_lines(settings) + _user_lines(settings)
    lines.append(f"logs     {_show(settings.dir / 'logs')}/{{{','.join(records)}}}.log")
    lines.append("stop     make sandbox-down")
    for line in lines:
        print(f"  {line}")


def _summary_of_seats(settings: Settings, records: dict[str, Record]) -> None:
    kind = "Xvnc" if settings.xserver == "xvnc" else "Xvfb"
    password = settings.path("vnc-password").read_text().strip()
    view = " (view only)" if settings.xserver == "xvfb" else ""
    cuctl = f"{_show(settings.venv / 'bin' / 'cuctl')} --socket {_show(settings.socket)}"
    lines = [(f"seats    {settings.seats} displays ({kind}, {settings.geometry} each), one daemon drives them all; "
              f"your X clients: DISPLAY=(a seat's display) XAUTHORITY={_show(settings.path('Xauthority'))}")]
    for seat in settings.seat_list:
        display = records[seat.part("xserver")].info["display"]
        port = _vnc_port(records, seat.prefix)
        lines.append(f"{seat.name:8} display {display}, watch: xtigervncviewer -passwd "
                     f"{_show(settings.path('vnc-passwd'))} localhost::{port}{view}; "
                     f"apps: DBUS_SESSION_BUS_ADDRESS={records[seat.part('session-bus')].info['address']}")
    first = _vnc_port(records, settings.seat_list[0].prefix)
    lines += [
        (f"         (any VNC viewer: localhost and the seat's port, password {password}; "
         f"from another machine first: ssh -L {first}:localhost:{first} THIS-HOST, one -L per seat)"),
        f"apps     of your own, on a seat: its DBUS_SESSION_BUS_ADDRESS and {A11Y_SHELL} "
        "(docs/targets.md, \"Apps you start\")",
        f"daemon   {cuctl} seats",
        f"         ({cuctl} submit --seat seat2 PROMPT pins a task; without --seat the first free seat takes it)",
        path_line(settings),
    ]
    if settings.driver == "vnc":
        places = ", ".join(f"{seat.name} 127.0.0.1::{_vnc_port(records, seat.prefix)}" for seat in settings.seat_list)
        lines.append(f"         drives the displays over VNC ({places}; config {_show(settings.path('cud.toml'))})")
    lines += _model_lines(settings) + _user_lines(settings)
    lines.append(f"logs     {_show(settings.dir / 'logs')}/ (one per part: {next(iter(records))}.log ... daemon.log)")
    lines.append("stop     make sandbox-down")
    for line in lines:
        print(f"  {line}")


def _user_lines(settings: Settings) -> list[str]:
    """The user's CONFIG and SCENARIOS, when given (user_config.py)."""
    lines = [f"config   {_show(settings.path('cud.toml'))}: the sandbox's keys"
             + (f" with CONFIG={_show(settings.config)} merged in" if settings.config else "")
             + " (make sandbox-up CONFIG=my.toml SCENARIOS=dir/: docs/sandbox.md)"]
    if settings.scenarios is not None:
        lines.append(f"         SCENARIOS={_show(settings.scenarios)}: a task whose model is scripted:NAME plays "
                     "NAME.json from it")
    return lines


def _model_lines(settings: Settings) -> list[str]:
    if settings.api == "messages":
        entry = f"[models.{CLAUDE_ENTRY}] ({CLAUDE_MODEL}, cuctl submit --model {CLAUDE_ENTRY} --approval actions)"
        if settings.model == "scripted":
            return [(f"model    SCRIPTED over Anthropic's Messages API (MODEL=claude): ANTHROPIC_API_KEY is not set, "
                     f"so a bundled script (cud/scripted/scenarios/demo.json) plays {entry}; set the key for Claude")]
        return [f"model    Anthropic's Messages API (MODEL=claude, ANTHROPIC_API_KEY is set): {entry}"]
    if settings.model == "scripted":
        return [("model    SCRIPTED: OPENAI_API_KEY is not set, so a bundled script (cud/scripted/scenarios/"
                 "demo.json) plays the model's part; set the key for the real one")]
    return ["model    the OpenAI API (OPENAI_API_KEY is set)"]


# -- down -----------------------------------------------------------------------------------------
def down(settings: Settings) -> int:
    if not settings.dir.exists():
        say("nothing to stop (no sandbox directory)")
        return 0
    with locked(settings):
        records = _records(settings)
        if not records:
            say("nothing was running")
        _stop_parts(settings, records, list(records), quiet=False)
        for leftover in ("cud.sock", "model.port", "cud.toml"):
            settings.path(leftover).unlink(missing_ok=True)
        for leftover in settings.dir.glob("*session-bus.conf"):
            leftover.unlink()
        remove_run_dirs(settings, say)  # the seats' bus directories (leftovers.py)
        remove_seat_users(settings, say)  # only those it made, by its record (seat_sessions.py)
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
    width = max(9, *(len(name) for name in records))
    daemon_answers = False
    for name, record in records.items():
        state = state_of(record)
        detail = " ".join(f"{k}={v}" for k, v in record.info.items())
        if state == "running":
            line = f"running  pid {record.pid}"
            if name == "daemon":
                daemon_answers = answers(settings, record, records)
                line += ", answers ping" if daemon_answers else ", DOES NOT ANSWER ping"
        else:
            dead += 1
            line = "DEAD     " + ("(pid reused by another program)" if state == "replaced" else f"was pid {record.pid}")
        print(f"  {name:{width}} {line}  {detail}  log: {_show(record.log)}")
    prefixes = [name[: -len("xserver")] for name in records if kind_of(name) == "xserver" and name != "xserver"]
    if prefixes:
        _status_of_seats(settings, records, prefixes, daemon_answers)
    if dead:
        say(f"{dead} part(s) dead: `make sandbox-up` restarts them")
        return 1
    return 0


def _status_of_seats(settings: Settings, records: dict[str, Record], prefixes: list[str], ask: bool) -> None:
    """Each seat's display and VNC port; and, when the daemon answers, how it sees its seats."""
    say(f"{len(prefixes)} seats:")
    for prefix in prefixes:
        parts = [records[prefix + kind] for kind in SEAT_PARTS if prefix + kind in records]
        running = all(state_of(record) == "running" for record in parts)
        display = records[prefix + "xserver"].info.get("display", "?")
        print(f"  {prefix[:-1]:9} display {display}, VNC localhost::{_vnc_port(records, prefix)}"
              f"{'' if running else '  (a part is DEAD)'}")
    cuctl = settings.venv / "bin" / "cuctl"
    if not ask or not cuctl.exists():
        return
    # The daemon's own view (idle, busy, unavailable; the task on each). A cuctl
    # from before seats has no such command: then there is nothing more to show.
    result = subprocess.run([str(cuctl), "--socket", str(settings.socket), "seats"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=30)
    if result.returncode == 0 and result.stdout.strip():
        say("the daemon's seats (cuctl seats):")
        for line in result.stdout.rstrip("\n").splitlines():
            print(f"  {line}")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("up", "down", "status", "check"):
        print("usage: sandboxctl.py up|down|status|check", file=sys.stderr)
        return 2
    try:
        # down and status go by what was started, never by $SEATS (see Settings.from_env).
        settings = Settings.from_env(ROOT, seats=argv[0] in ("up", "check"))
        if argv[0] in ("up", "check"):
            check_socket_paths(settings)
            check_user_files(settings)
        if argv[0] == "check":  # up.sh, before it installs anything: refuse bad settings first
            return 0
        return {"up": up, "down": down, "status": status}[argv[0]](settings)
    except SandboxError as exc:
        say(str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
