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
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .apps.reporting import ReportingApp
from .desktop import Desktop, start_desktop
from .recorder import wait_until

__all__ = ("A11yBus", "FormApp", "a11y_env", "start_a11y_bus", "start_shared_a11y_bus", "stop_group")

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


def _dbus_send(bus: str, dest: str, path: str, method: str, *args: str) -> str | None:
    """``dbus-send``'s literal reply, or None if the call failed."""
    result = subprocess.run(["dbus-send", f"--bus={bus}", "--print-reply=literal", f"--dest={dest}", path, method,
                             *args], capture_output=True, text=True, timeout=5)
    return result.stdout.strip() if result.returncode == 0 else None


#: Seconds a bus or launcher may take to answer: a poll, so a wide bound costs a quiet machine nothing,
#: and a CI machine under load (two test processes and their apps on 2 cores) needed more than 20.
START_TIMEOUT = 60


def _bus_answers(address: str, launcher: subprocess.Popen[bytes]) -> bool:
    """Our launcher owns org.a11y.Bus on the session bus, and the registry answers on the bus it names.

    Ownership is checked first, with a call that starts nothing: a GetAddress sent before
    the launcher owns the name would have the session bus start a launcher of its own (D-Bus
    activation), one without this desktop's $DISPLAY and $XDG_RUNTIME_DIR, whose bus is
    the user's ~/.cache/at-spi/bus that every other test's such launcher takes over in turn.
    """
    owner = _dbus_send(address, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                       "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.a11y.Bus")
    if owner is None or owner.split()[-1] != str(launcher.pid):
        return False
    a11y = _dbus_send(address, "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress")
    # The registry starts on the first question: asked here, it is up before the first application.
    return bool(a11y) and _dbus_send(a11y, "org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                                     "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible",
                                     "string:ChildCount") is not None


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
        # The accessibility bus's socket goes under $XDG_RUNTIME_DIR/at-spi/: one of this desktop's
        # own (as the sandbox does), not the user's, which every other test's launcher would take over.
        runtime = workdir / "a11y-runtime"
        runtime.mkdir(mode=0o700)
        env = {**desktop.env, "DBUS_SESSION_BUS_ADDRESS": address, "XDG_RUNTIME_DIR": str(runtime)}
        with open(workdir / "at-spi-bus-launcher.log", "ab") as log:
            launcher = subprocess.Popen([LAUNCHER], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        stop_group(session)
        raise
    bus = A11yBus(address, session, launcher)
    try:
        wait_until(lambda: _bus_answers(address, launcher), START_TIMEOUT,
                   "at-spi-bus-launcher to own org.a11y.Bus and its registry to answer")
    except BaseException:
        bus.stop()
        raise
    return bus


#: A session bus that root and the seats' users may join, and that starts no services itself (no
#: activation: what a seat's applications would start on it would be root's, outside their session).
_SHARED_BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <auth>EXTERNAL</auth>
  <listen>unix:tmpdir=/tmp</listen>
  <policy context="default">
    {allow}
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  {deny}
</busconfig>
"""
DEFAULTS = Path("/usr/share/defaults/at-spi2")


def start_shared_a11y_bus(desktop: Desktop, users: list[str]) -> A11yBus:
    """Buses like cud-bus@'s (systemd/cud-session-bus.conf, cud-accessibility.conf): run by root, joined by
    root (the daemon) and ``users`` (the seats' applications), so a seat's reset, which ends every process of
    its user, leaves them running. Not as root, the tests' own user is every seat's: the plain buses do.

    at-spi-bus-launcher reads its bus's config from a fixed path, so it runs in a mount namespace of its
    own where that path holds one admitting ``users`` too (what cud-bus@ does with BindReadOnlyPaths).
    """
    if os.geteuid() != 0:
        return start_a11y_bus(desktop)
    workdir = Path(tempfile.mkdtemp(prefix="shared-bus-", dir=desktop.workdir))
    workdir.chmod(0o755)
    allow = "".join(f'<allow user="{name}"/>' for name in ["root", *users])
    # As systemd/cud-session-bus.conf: the seats' users may not own org.a11y.Bus, root's launcher's.
    deny = "".join(f'<policy user="{name}"><deny own="org.a11y.Bus"/></policy>' for name in users)
    (workdir / "session.conf").write_text(_SHARED_BUS_CONF.format(allow=allow, deny=deny))
    conf = workdir / "at-spi2"
    conf.mkdir(mode=0o755)
    text = (DEFAULTS / "accessibility.conf").read_text()
    (conf / "accessibility.conf").write_text(text.replace('<allow user="root"/>', allow, 1))
    (workdir / "at-spi").mkdir(mode=0o755)  # the launcher puts its bus's socket here; the users must reach it
    address = f"unix:path={workdir / 'bus'}"
    with open(workdir / "session-bus.log", "ab") as log:
        session = subprocess.Popen(["dbus-daemon", f"--config-file={workdir / 'session.conf'}", f"--address={address}",
                                    "--nofork", "--nopidfile"], stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: (workdir / "bus").exists(), START_TIMEOUT, "the shared session bus to listen")
        env = {**desktop.env, "DBUS_SESSION_BUS_ADDRESS": address, "XDG_RUNTIME_DIR": str(workdir)}
        script = f'mount --bind "$1" {DEFAULTS} && exec {LAUNCHER} --launch-immediately'
        with open(workdir / "at-spi-bus-launcher.log", "ab") as log:
            launcher = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
                                         "sh", str(conf)], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        stop_group(session)
        raise
    bus = A11yBus(address, session, launcher)
    try:
        wait_until(lambda: _bus_answers(address, launcher), START_TIMEOUT, "at-spi-bus-launcher to own org.a11y.Bus")
    except BaseException:
        bus.stop()
        raise
    return bus


@contextlib.contextmanager
def a11y_desktop(prefix: str) -> Iterator[tuple[Desktop, A11yBus]]:
    """An X11 desktop (openbox on Xvfb) in a new temporary folder, with its accessibility bus; both
    stopped and the folder removed after (a module's shared desktop)."""
    import shutil

    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with start_desktop("x11", workdir) as desktop:
            bus = start_a11y_bus(desktop)
            try:
                yield desktop, bus
            finally:
                bus.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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


class ChromiumForm:
    """Debian's Chromium showing forms/chromium_form.html as a kiosk, with its accessibility tree on the bus.

    Playwright attaches over the DevTools port only to read what the page received
    and where its elements are; no input goes through it.
    """

    name = "chromium-form"
    page_file = FORMS / "chromium_form.html"

    def __init__(self, desktop: Desktop, bus: A11yBus) -> None:
        self.desktop = desktop
        self.bus = bus

    def start(self) -> None:
        from playwright.sync_api import sync_playwright

        from .apps.chromium import CHROMIUM, FLAGS

        desktop = self.desktop
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-form-", dir=desktop.workdir))
        env = {**a11y_env(desktop, self.bus), "HOME": str(self.profile)}
        self.proc = desktop.spawn(
            [CHROMIUM, *FLAGS, "--force-renderer-accessibility", f"--user-data-dir={self.profile}",
             f"--window-size={desktop.width},{desktop.height}", "--window-position=0,0", "--kiosk",
             self.page_file.as_uri()], "chromium-form.log", env=env)
        port_file = self.profile / "DevToolsActivePort"
        port = wait_until(lambda: port_file.exists() and port_file.read_text().split("\n")[0], 60,
                          "chromium to open its DevTools port")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")

        def page() -> Any:
            for context in self._browser.contexts:
                for p in context.pages:
                    if p.url.startswith(self.page_file.as_uri()) and p.evaluate("window.ready === true"):
                        return p
            return None

        self.page = wait_until(page, 30, "chromium to show the form")
        wait_until(lambda: self.page.evaluate("[screenX, screenY, innerWidth, innerHeight]")
                   == [0, 0, desktop.width, desktop.height], 30, "the kiosk window to cover the screen")

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def rect(self, element_id: str) -> tuple[int, int, int, int]:
        x, y, w, h = self.page.evaluate("window.rects()")[element_id]
        return x, y, w, h

    def centre(self, element_id: str) -> tuple[int, int]:
        x, y, w, h = self.rect(element_id)
        return x + w // 2, y + h // 2

    def received(self, since: int = 0) -> list[dict[str, Any]]:
        return [e for e in self.page.evaluate("window.received")[since:] if e["type"] in ("clicked", "text")]

    def mark(self) -> int:
        return int(self.page.evaluate("window.received.length"))

    def wait_for(self, predicate: Any, since: int, what: str) -> dict[str, Any]:
        return wait_until(lambda: next((e for e in self.received(since) if predicate(e)), None), 10, what)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._browser.close()
        with contextlib.suppress(Exception):
            self._playwright.stop()
        stop_group(self.proc)
