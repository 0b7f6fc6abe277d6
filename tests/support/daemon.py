"""Start the REAL daemon (`cud run`) as a subprocess on a short socket path, and talk to it.

The socket lives in a fresh directory under /tmp (AF_UNIX paths stop at ~108
bytes; pytest's tmp_path can be longer). Start-up is awaited by polling for a
``ping`` answer with backoff; stop is SIGTERM, then SIGKILL, by pid.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.cuctl.client import Client
from cud.errors import CudError
from cud.scripted import ScriptedModel

from .recorder import wait_until
from .xserver import stop_process

__all__ = ("Daemon", "cuctl", "json_out", "scenario", "start_daemon", "approve_each", "APPROVALS")

#: Approvals a caret test gives, each at a random moment (see ``approve_each``).
APPROVALS = 20
#: Approvals come at random moments up to this long after they were asked for: over
#: two blink cycles of Tk (900 ms), GTK (1.2 s) and Chromium (1.06 s), so every phase
#: of a caret is hit.
MAX_THINK_SECONDS = 2.5

ROOT = Path(__file__).resolve().parents[2]


class Daemon:
    """One `cud run` process with its own socket, state dir and log file."""

    def __init__(
        self,
        display: str,
        base_url: str,
        *,
        workdir: Path | None = None,
        approval: str | None = None,
        approval_timeout: float | None = None,
        max_steps: int | None = None,
        config: str | None = None,
        extra_env: dict[str, str] | None = None,
        vnc: tuple[str, Path] | None = None,
        seats: dict[str, str] | None = None,
        socket: Path | None = None,
        state_dir: str | None = None,
        python: str | None = None,
    ) -> None:
        """``vnc=(HOST::PORT, password file)`` drives that VNC server instead of ``display``;
        ``seats={name: display}`` drives those displays (``--seat``), ``display`` then unused.
        ``socket`` and ``state_dir`` (as spelled on the command line: relative to ``workdir``,
        the daemon's working directory) replace ``workdir``'s ``s`` and ``state``; ``python`` is the interpreter
        it runs in (default: the tests')."""
        self.python = python or sys.executable
        self.dir = workdir or Path(tempfile.mkdtemp(prefix="cud-", dir="/tmp"))
        self._own_dir = workdir is None
        self.socket = socket or self.dir / "s"
        self.state_dir = self.dir / (state_dir or "state")
        self.log = self.dir / "daemon.log"
        self.display = display
        self.args = ["--socket", str(self.socket), "--state-dir", state_dir or str(self.state_dir)]
        if seats is not None:
            self.args += [arg for name, where in seats.items() for arg in ("--seat", f"{name}={where}")]
        elif vnc is None:
            self.args += ["--display", display]
        else:
            self.args += ["--vnc", vnc[0], "--vnc-password-file", str(vnc[1])]
        if approval:
            self.args += ["--approval", approval]
        if approval_timeout is not None:
            self.args += ["--approval-timeout", str(approval_timeout)]
        if max_steps is not None:
            self.args += ["--max-steps", str(max_steps)]
        if config is not None:
            path = self.dir / "cud.toml"
            path.write_text(config)
            self.args += ["--config", str(path)]
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("CUD_SOCKET", "OPENAI_API_KEY", "NOTIFY_SOCKET")},
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "sk-test-cud-secret-key-0123456789",
            "PYTHONPATH": str(ROOT),
            **(extra_env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def api_key(self) -> str:
        return self.env["OPENAI_API_KEY"]

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it to answer (``start`` waits)."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.python, "-m", "cud.daemon.main", "run", *self.args],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
            )
        return self.proc

    def start(self, timeout: float = 30.0) -> Daemon:
        self.spawn()

        def answers() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}; log:\n{self.log_text()}")
            try:
                with Client(self.socket, timeout=5) as client:
                    client.call("ping")
                return True
            except CudError:
                return False

        wait_until(answers, timeout, "the daemon to answer ping")
        return self

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        stop_process(self.proc, timeout=15)
        code = self.proc.returncode
        self.proc = None
        return code

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- talking to it ------------------------------------------------------------------
    def call(self, kind: str, **fields: Any) -> Any:
        with Client(self.socket) as client:
            return client.call(kind, **fields)

    def task(self, task_id: int) -> dict[str, Any]:
        return dict(self.call("show", id=task_id))

    def wait_state(self, task_id: int, *states: str, timeout: float = 60.0) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}; log:\n{self.log_text()}")
            task = self.task(task_id)
            return task if task["state"] in states else None

        try:
            return dict(wait_until(reached, timeout, f"task {task_id} to reach {states}"))
        except AssertionError:
            raise AssertionError(f"task {task_id} is {self.task(task_id)}; log:\n{self.log_text()[-3000:]}") from None

    def wait_approval(self, task_id: int, timeout: float = 30.0) -> dict[str, Any]:
        def pending() -> dict[str, Any] | None:
            return next((a for a in self.call("approvals") if a["task_id"] == task_id), None)

        return dict(wait_until(pending, timeout, f"an approval for task {task_id}"))

    def events_now(self, task_id: int) -> list[dict[str, Any]]:
        """The task's events so far (``record``), without waiting for it to end."""
        events: list[dict[str, Any]] = []
        with Client(self.socket) as client:
            client.call("record", lambda m: events.append(m["event"]) if m["type"] == "event" else None, id=task_id)
        return events

    def events(self, task_id: int) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        with Client(self.socket) as client:
            client.call("follow", lambda m: events.append(m["event"]), wait_forever=True, id=task_id)
        return events


def cuctl(socket: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120.0,
          prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run cuctl as a subprocess (optionally under ``prefix``, e.g. setpriv) and capture its output."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("CUD_SOCKET", None)
    full_env.pop("CUD_HOST", None)  # a developer's own would send the tests' cuctl over ssh
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "cud.cuctl.main", "--socket", str(socket), *args],
        env=full_env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def json_out(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, f"cuctl failed ({result.returncode}): {result.stderr}"
    return json.loads(result.stdout)



def scenario(*steps: dict[str, Any], look_first: bool = True) -> dict[str, Any]:
    """A scripted-model scenario; by default the model first asks for a screenshot, as real ones do."""
    first = [{"actions": [{"type": "screenshot"}]}] if look_first else []
    return {"name": "test", "steps": [*first, *steps]}


def approve_each(daemon: Daemon, task_id: int, count: int, seed: int) -> None:
    """Approve ``count`` approvals of the task one after another, each after a random pause."""
    rng = random.Random(seed)
    for _ in range(count):
        approval = daemon.wait_approval(task_id)
        time.sleep(rng.uniform(0, MAX_THINK_SECONDS))
        daemon.call("approve", id=approval["id"])
        wait_until(lambda a=approval: all(p["id"] != a["id"] for p in daemon.call("approvals")), 30,
                   f"approval {approval['id']} to be taken")


@pytest.fixture
def start_daemon(xvfb: Any) -> Iterator[Callable[..., Daemon]]:
    """``start_daemon(scenario, **Daemon options)``: a scripted model and a real daemon on ``xvfb``."""
    made: list[tuple[Daemon, ScriptedModel]] = []

    def start(scenario_: dict[str, Any], model_options: dict[str, Any] | None = None, **options: Any) -> Daemon:
        model = ScriptedModel(scenario_, **(model_options or {}))
        url = model.start()
        daemon = Daemon(xvfb.display, url, **options)
        made.append((daemon, model))
        daemon.model = model  # type: ignore[attr-defined]
        return daemon.start()

    yield start
    for daemon, model in reversed(made):
        daemon.cleanup()
        model.stop()
