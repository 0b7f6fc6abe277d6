"""The processes the sandbox starts: records on disk, liveness by pid, stopping by pid.

A record keeps a process's pid together with its command line and its start
time as /proc shows them right after it started. A pid whose command line or
start time differ is someone else's (pids are reused), so it is never
signalled. Standard library only: sandbox-down and -status run without the venv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ("Record", "SandboxError", "spawn", "load", "save", "forget", "state_of", "stop", "wait_for", "tail")


class SandboxError(Exception):
    """Something the user must be told about; the message says what and where to look."""


@dataclasses.dataclass
class Record:
    name: str
    pid: int
    cmdline: list[str]
    start_time: int
    log: str
    info: dict[str, str] = dataclasses.field(default_factory=dict)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of ``pid``, or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return [part.decode(errors="surrogateescape") for part in raw.split(b"\0")[:-1]]


def state_of(record: Record) -> str:
    """``running``, ``dead`` (exited, or a zombie) or ``replaced`` (the pid now runs something else)."""
    stat = _stat(record.pid)
    if stat is None:
        return "dead"
    state, start_time = stat
    if start_time != record.start_time:
        return "replaced"
    if state in ("Z", "X"):  # exited, not yet reaped (a zombie has no command line left)
        return "dead"
    return "running" if _cmdline(record.pid) == record.cmdline else "replaced"


def spawn(
    name: str, argv: Sequence[str], log: Path, env: Mapping[str, str], pass_fds: Sequence[int] = (),
    program: str | None = None,
) -> tuple[subprocess.Popen[bytes], Record]:
    """Start ``argv`` in its own session (a Ctrl-C in the terminal must not reach it), output to ``log``;
    ``program``: what ``argv`` (a wrapper: unshare, sh) execs in the end, whose command line is recorded."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} sandbox starts: {' '.join(argv)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=dict(env), pass_fds=tuple(pass_fds), start_new_session=True,
            )
        except FileNotFoundError:
            raise SandboxError(f"{name}: program {argv[0]!r} not found (run sandbox/deps.sh)") from None
    # Popen returns once exec has begun, but the kernel fills in the new command
    # line a moment later (the close-on-exec pipe Popen waits on closes first):
    # wait for it, else the record would hold a command line the process never shows.
    deadline = time.monotonic() + 10.0
    delay = 0.001
    while ((not (cmdline := _cmdline(proc.pid)) or (program is not None and cmdline[0] != program))
           and proc.poll() is None and time.monotonic() < deadline):
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    stat = _stat(proc.pid)
    if not cmdline or stat is None:
        raise SandboxError(f"{name} ({argv[0]}) exited at once; the end of {log}:\n{tail(log)}")
    return proc, Record(name, proc.pid, cmdline, stat[1], str(log))


def _path(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.json"


def save(run_dir: Path, record: Record) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    target = _path(run_dir, record.name)
    temporary = target.with_suffix(f".tmp{os.getpid()}")
    temporary.write_text(json.dumps(dataclasses.asdict(record), indent=1) + "\n")
    os.replace(temporary, target)


def load(run_dir: Path, name: str) -> Record | None:
    try:
        data = json.loads(_path(run_dir, name).read_text())
        return Record(**data)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise SandboxError(f"{_path(run_dir, name)} is not a sandbox record ({exc}); remove it by hand") from None


def forget(run_dir: Path, name: str) -> None:
    _path(run_dir, name).unlink(missing_ok=True)


def _wait_gone(record: Record, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while state_of(record) == "running":
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return True


def stop(record: Record, timeout: float = 10.0) -> str:
    """SIGTERM, then SIGKILL after ``timeout``; returns what happened, in words."""
    state = state_of(record)
    if state == "replaced":
        return f"not running (pid {record.pid} now belongs to another program; left alone)"
    if state == "dead":
        return "was not running"
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return "was not running"
    if _wait_gone(record, timeout):
        return f"stopped (pid {record.pid})"
    if state_of(record) == "running":  # check again right before the hard kill
        os.kill(record.pid, signal.SIGKILL)
        _wait_gone(record, 5.0)
    return f"killed (pid {record.pid} ignored SIGTERM for {timeout:g}s)"


def tail(log: Path | str, lines: int = 15) -> str:
    try:
        text = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:])


def wait_for(
    what: str, check: Callable[[], bool], alive: Callable[[], bool], log: Path | str, timeout: float = 30.0
) -> None:
    """Poll ``check`` with backoff until it holds; fail early if the process died."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        if check():
            return
        if not alive():
            raise SandboxError(f"{what} exited while starting; the end of {log}:\n{tail(log)}")
        if time.monotonic() >= deadline:
            raise SandboxError(f"{what} did not answer within {timeout:g}s; the end of {log}:\n{tail(log)}")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
