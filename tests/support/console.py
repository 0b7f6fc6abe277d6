"""Run ``cuctl console`` as a subprocess (as any user, through a prefix such as setpriv) and stop it by pid."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from .daemon import ROOT

__all__ = ("Console",)


class Console:
    def __init__(self, socket: Path, workdir: Path, *, prefix: list[str] | None = None, port: int = 0,
                 host: str | None = None, env: dict[str, str] | None = None) -> None:
        """The console of the daemon at ``socket``, or (``host``) of the one reached with ``--host``."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        env.pop("CUD_SOCKET", None)
        if not host:
            env.pop("CUD_HOST", None)
        where = ["--host", host] if host else ["--socket", str(socket)]
        self.log = workdir / "console.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*(prefix or []), sys.executable, "-m", "cud.cuctl.main", *where, "console",
                 "--port", str(port)],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=workdir,
            )
        assert self.proc.stdout is not None
        self.url = self._first_line(30.0)
        parts = urlsplit(self.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.port = parts.port

    def _first_line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise AssertionError(f"cuctl console printed no URL ({line!r}); log:\n{self.log_text()}")
            if select.select([self.proc.stdout], [], [], min(left, 0.5))[0]:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    continue
                line += chunk
        return line.decode().strip()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal it, wait for it to exit by itself (it must: a clean exit), SIGKILL only past ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode
