"""An accessibility stack for a test desktop: a session bus, at-spi2-core's bus, and apps that expose their trees.

Started by the test and stopped by pid (each in its own process group, which is
stopped whole: the launcher starts the accessibility bus's dbus-daemon, which
starts the registry).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .apps.reporting import ReportingApp
from .desktop import Desktop
from .recorder import wait_until

__all__ = ("A11yBus", "FormApp", "a11y_env", "start_a11y_bus", "stop_group")

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
FORMS = Path(__file__).with_name("forms")


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM to the process group ``proc`` leads (started with start_new_session), then SIGKILL; reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what the leader started and left behind


@dataclass
class A11yBus:
    address: str  # the session bus's D-Bus address
    session: subprocess.Popen[bytes]
    launcher: subprocess.Popen[bytes]

    def stop(self) -> None:
        stop_group(self.launcher)
        stop_group(self.session)


def _bus_answers(address: str) -> bool:
    env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": address}
    result = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.a11y.Bus", "/org/a11y/bus",
                             "org.a11y.Bus.GetAddress"], env=env, capture_output=True, timeout=5)
    return result.returncode == 0


def start_a11y_bus(desktop: Desktop) -> A11yBus:
    workdir = desktop.workdir
    read, write = os.pipe()
    with open(workdir / "session-bus.log", "ab") as log:
        session = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile",
                                    f"--print-address={write}"], pass_fds=(write,), stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            address = pipe.readline().decode().strip()
        if not address:
            raise RuntimeError(f"dbus-daemon gave no address; see {workdir / 'session-bus.log'}")
        env = {**desktop.env, "DBUS_SESSION_BUS_ADDRESS": address}
        with open(workdir / "at-spi-bus-launcher.log", "ab") as log:
            launcher = subprocess.Popen([LAUNCHER], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        stop_group(session)
        raise
    bus = A11yBus(address, session, launcher)
    try:
        wait_until(lambda: _bus_answers(address), 20, "at-spi-bus-launcher to own org.a11y.Bus")
    except BaseException:
        bus.stop()
        raise
    return bus


def a11y_env(desktop: Desktop, bus: A11yBus) -> dict[str, str]:
    """What an app needs to expose its tree: the session bus, GTK's bridge on, Qt's accessibility on."""
    env = {k: v for k, v in desktop.env.items() if k != "NO_AT_BRIDGE"}
    return {**env, "DBUS_SESSION_BUS_ADDRESS": bus.address, "QT_ACCESSIBILITY": "1",
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1"}


class FormApp(ReportingApp):
    """One of the dialogs in forms/ (``gtk_form.py``, ``qt_form.py``) on an accessibility bus."""

    capabilities = frozenset()

    def __init__(self, desktop: Desktop, bus: A11yBus, toolkit: str) -> None:
        super().__init__(desktop)
        self.bus = bus
        self.name = f"{toolkit}-form"
        self.probe = f"{toolkit}_form.py"

    def argv(self) -> list[str]:
        return [*super().argv()[:1], str(FORMS / self.probe)]

    def app_env(self) -> dict[str, str]:
        return a11y_env(self.desktop, self.bus)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def button(self, label: str) -> tuple[int, int]:
        """The centre of the button labelled ``label``."""
        x, y, w, h = self._state()["buttons"][label]
        return x + w // 2, y + h // 2

    def entry(self) -> tuple[int, int]:
        x, y, w, h = self.field
        return x + w // 2, y + h // 2

    def received(self, since: int = 0) -> list[dict[str, Any]]:
        return [e for e in self.events(since) if e["type"] in ("clicked", "text")]
