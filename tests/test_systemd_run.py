"""The systemd units' own command lines run for real (systemd is not PID 1 here): the display
units' servers, the session and accessibility bus of cud-bus@, the shared cookie file, and the
daemon's sd_notify messages on a real datagram socket.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apps.reporting import SYSTEM_PYTHON
from tests.support.daemon import ROOT, Daemon, scenario
from tests.support.listeners import socket_inodes, tcp_listeners
from tests.support.probes import rfb_security_types, x_connects
from tests.support.recorder import wait_until
from tests.support.units import SYSTEMD, unit_command, unit_env, unit_settings
from tests.support.vnc import write_vnc_passwd
from tests.support.xserver import stop_process


# -- the display units' command lines, run for real -----------------------------------------------
def free_display_number(after: int = 299) -> int:
    # The units take the number from the instance name, so the test must choose one. A
    # number seen free here may be taken before the server starts: see start_server.
    for number in range(after + 1, 600):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(f"/tmp/.X{number}-lock").exists():
            return number
    raise AssertionError("no free X display number in 300..599")




def listening_addresses(port: int) -> set[str]:
    """Local addresses of TCP sockets listening on ``port`` (hex, as /proc/net/tcp* writes them)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1


@pytest.fixture
def unit_runner(prefix_install: Path, short_tmp: Path) -> Iterator[object]:
    """Runs a display unit's Exec lines as systemd would, as an unprivileged user.

    The units say User=cud-display; here "nobody" stands in for it, so the X
    server runs without root (as it will: no writable /var/lib/xkb, ...).
    """
    procs: list[subprocess.Popen[bytes]] = []
    nobody = pwd.getpwnam("nobody")
    as_user = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]
    short_tmp.chmod(0o755)  # the unprivileged user must reach its runtime and credentials dirs

    class Runner:
        number = free_display_number()
        run = short_tmp / "run"
        creds = short_tmp / "credentials"

        def settings(self, unit: str) -> tuple[dict[str, list[str]], dict[str, str], dict[str, str]]:
            s = unit_settings(prefix_install / "lib/systemd/system" / unit)
            assert s["User"] == ["cud-display"], unit
            replace = {"%i": str(self.number), "%d": str(self.creds), "/run/cud-display": str(self.run),
                       "/run/cud-bus": str(self.run / "cud-bus"), "/usr/local/lib/cud": str(prefix_install / "lib/cud")}
            return s, unit_env(s), replace

        def start(self, unit: str) -> subprocess.Popen[bytes]:
            s, env, replace = self.settings(unit)
            for runtime in s.get("RuntimeDirectory", []):  # systemd makes it, owned by User=
                path = self.run / runtime.replace("cud-display/", "").replace("%i", str(self.number))
                path.mkdir(parents=True, exist_ok=True)
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
                path.chmod(int(s.get("RuntimeDirectoryMode", ["0755"])[0], 8))
            umask = int(s.get("UMask", ["0022"])[0], 8)  # what systemd gives every Exec line
            for line in s.get("ExecStartPre", []):
                subprocess.run([*as_user, *unit_command(line, env, replace)], check=True, timeout=30, umask=umask)
            # The unit's Environment=, as systemd gives it (paths moved like the command lines').
            unset = ("DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "NOTIFY_SOCKET")
            process_env = {k: v for k, v in os.environ.items() if k not in unset}
            for name, value in env.items():
                for old, new in replace.items():
                    value = value.replace(old, new)
                process_env[name] = value
            notify = None
            if s.get("Type") == ["notify"]:
                notify = NotifySocket(short_tmp / f"notify-{len(procs)}")
                notify.path.chmod(0o777)  # the unit's user sends to it
                process_env["NOTIFY_SOCKET"] = str(notify.path)
            with open(short_tmp / f"{unit}.log", "ab") as log:
                proc = subprocess.Popen([*as_user, *unit_command(s["ExecStart"][0], env, replace)],
                                        stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=process_env,
                                        umask=umask)
            procs.append(proc)  # setpriv execs the program: this pid is the server's
            if notify is not None:
                try:  # systemd runs ExecStartPost= once the service says it is ready
                    ready = wait_until(lambda: notify.first("READY"), 30, f"{unit} to send READY=1")
                    assert ready["READY"] == "1"
                finally:
                    notify.close()
            for line in s.get("ExecStartPost", []):
                subprocess.run([*as_user, *unit_command(line, env, replace)], check=True, timeout=60,
                               stdout=subprocess.DEVNULL, umask=umask)
            return proc

        def stop(self, unit: str, proc: subprocess.Popen[bytes], number: int) -> None:
            """Stop instance ``number``'s main process and run its ExecStopPost lines, as systemd does."""
            self.number = number
            s, env, replace = self.settings(unit)
            stop_process(proc)
            for line in s.get("ExecStopPost", []):
                # systemd's "-" lets the line fail without failing the unit; here it must not fail.
                result = subprocess.run([*as_user, *unit_command(line.removeprefix("-"), env, replace)],
                                        capture_output=True, text=True, timeout=30)
                assert result.returncode == 0, f"{line}: {result.stderr}"

        def start_server(self, unit: str) -> subprocess.Popen[bytes]:
            """``start`` an X server unit; if its number was taken meanwhile, on the next free one."""
            for _ in range(5):
                try:
                    proc = self.start(unit)
                except subprocess.CalledProcessError:
                    if procs[-1].poll() is None:  # the server runs: the failure was something else
                        raise
                    proc = procs[-1]
                # The X server's lock file names the pid that holds the number: ours, or the
                # server that got it between the scan and the start.
                lock = Path(f"/tmp/.X{self.number}-lock")
                if proc.poll() is None and lock.exists() and lock.read_text().strip() == str(proc.pid):
                    return proc
                stop_process(proc)
                self.number = free_display_number(after=self.number)
            raise AssertionError(f"{unit} found no free display number in 5 tries")

    runner = Runner()
    runner.run.mkdir(mode=0o755)
    # tmpfiles.d gives /run/cud-display to cud-display: the units keep the shared cookie file there.
    os.chown(runner.run, nobody.pw_uid, nobody.pw_gid)
    runner.creds.mkdir(mode=0o700)
    write_vnc_passwd(runner.creds / "vnc-password", "s3cret")
    # systemd hands credentials to the service's user, readable by it alone.
    for path in (runner.creds, runner.creds / "vnc-password"):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    yield runner
    for proc in reversed(procs):
        stop_process(proc)


def test_xvfb_unit_serves_only_cookie_holders_and_x11vnc_unit_only_loopback_with_a_password(unit_runner) -> None:
    runner = unit_runner
    runner.start_server("xvfb@.service")
    display, cookie = f":{runner.number}", runner.run / str(runner.number) / "Xauthority"
    assert stat.S_IMODE(cookie.stat().st_mode) == 0o640
    assert x_connects(display, cookie)
    assert not x_connects(display, "/nonexistent")  # no -ac, no open door for other local users
    assert x_connects(display, runner.run / "Xauthority")  # the one file cud.service reads
    assert f"@/tmp/.X11-unix/X{runner.number}" in Path("/proc/net/unix").read_text()  # it holds the abstract name
    x11vnc = runner.start("x11vnc@.service")
    port = 5900 + runner.number  # x11vnc -N
    # Its own listener: another process on the port would not be the unit's x11vnc.
    wait_until(lambda: tcp_listeners(port) & socket_inodes(x11vnc.pid), 30, f"x11vnc to listen on {port}")
    assert listening_addresses(port) <= LOOPBACK
    assert rfb_security_types(port) == [2]  # VNC password authentication, and nothing else


def test_a_display_number_taken_after_it_was_chosen_moves_the_unit_to_the_next(unit_runner) -> None:
    runner = unit_runner
    chosen = runner.number
    # Another X server takes the number between the scan and the unit's start.
    squatter = subprocess.Popen(["Xvfb", f":{chosen}", "-nolisten", "tcp"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        # It answers (it has no cookie), so the number is really taken, not just a stale socket file.
        wait_until(lambda: squatter.poll() is None and x_connects(f":{chosen}", "/nonexistent"), 30,
                   f"a squatting X server on :{chosen}")
        proc = runner.start_server("xvfb@.service")
        assert runner.number != chosen and proc.poll() is None
        assert x_connects(f":{runner.number}", runner.run / str(runner.number) / "Xauthority")
    finally:
        stop_process(squatter)


def test_xvnc_unit_serves_only_cookie_holders_and_loopback_with_a_password(unit_runner) -> None:
    runner = unit_runner
    xvnc = runner.start_server("xvnc@.service")
    display, cookie = f":{runner.number}", runner.run / str(runner.number) / "Xauthority"
    assert x_connects(display, cookie) and not x_connects(display, "/nonexistent")
    port = 5900 + runner.number
    wait_until(lambda: tcp_listeners(port) & socket_inodes(xvnc.pid), 30, f"Xvnc to listen on {port}")
    assert listening_addresses(port) <= LOOPBACK
    assert rfb_security_types(port) == [2]


def dbus_call(address: str, *call: str, uid: int = 0) -> subprocess.CompletedProcess[str]:
    """``dbus-send --print-reply=literal`` to ``address`` as ``uid`` (root by default)."""
    as_user = [] if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    dest, path, method, *args = call
    return subprocess.run([*as_user, "dbus-send", f"--bus={address}", "--print-reply=literal", "--reply-timeout=10000",
                           f"--dest={dest}", path, method, *args], capture_output=True, text=True, timeout=30)


def registered_apps(a11y: str) -> list[str]:
    """The names of the applications on the accessibility bus ``a11y``, as its registry lists them."""
    root = ("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")
    count = dbus_call(a11y, *root, "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible",
                      "string:ChildCount")
    assert count.returncode == 0, count.stderr
    names = []
    for index in range(int(count.stdout.split()[-1])):
        child = dbus_call(a11y, *root, "org.a11y.atspi.Accessible.GetChildAtIndex", f"int32:{index}")
        sender, path = child.stdout.split()[-3:-1]  # "struct { :1.2 /org/a11y/atspi/accessible/root }"
        name = dbus_call(a11y, sender, path, "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible",
                         "string:Name")
        assert name.returncode == 0, name.stderr
        names.append(name.stdout.strip().removeprefix("variant").strip())  # "   variant       cud-demo"
    return names


def running_with(marker: bytes) -> list[int]:
    """Pids (not zombies) whose environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_text().rpartition(")")[2].split()[0] != "Z" \
                    and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_cud_bus_unit_gives_the_display_a_session_and_accessibility_bus_that_applications_join(
    unit_runner, prefix_install: Path, short_tmp: Path
) -> None:
    runner = unit_runner
    runner.start_server("xvfb@.service")
    number, cookie = runner.number, runner.run / str(runner.number) / "Xauthority"
    marker = f"XDG_RUNTIME_DIR={runner.run}/cud-bus/{number}".encode()
    app = None
    try:
        bus = runner.start("cud-bus@.service")  # READY=1 from dbus-daemon, then ExecStartPost's GetAddress
        runtime = runner.run / "cud-bus" / str(number)
        address = f"unix:path={runtime}/bus"
        reply = dbus_call(address, "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress")
        assert reply.returncode == 0, reply.stderr
        a11y = reply.stdout.strip()
        # The accessibility bus's socket is the unit's own, and the display's root window names it.
        assert a11y.startswith(f"unix:path={runtime}/at-spi/bus"), a11y
        env = {"PATH": "/usr/bin:/bin", "DISPLAY": f":{number}", "XAUTHORITY": str(cookie)}
        prop = subprocess.run(["xprop", "-root", "AT_SPI_BUS"], env=env, capture_output=True, text=True, timeout=30)
        assert a11y.split(",")[0] in prop.stdout, prop.stdout
        assert registered_apps(a11y) == []

        # A GTK application started with the bus's address joins the accessibility bus.
        with open(short_tmp / "demo-app.log", "ab") as log:
            app = subprocess.Popen([SYSTEM_PYTHON, str(ROOT / "sandbox" / "demo_app.py")],
                                   env={**env, "DBUS_SESSION_BUS_ADDRESS": address}, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log)
        seen: list[list[str]] = []
        try:
            wait_until(lambda: seen.append(registered_apps(a11y)) or seen[-1] == ["cud-demo"], 30,
                       "the GTK app on the accessibility bus")
        except AssertionError as exc:
            raise AssertionError(f"registered: {seen[-3:]}; the app: {(short_tmp / 'demo-app.log').read_text()}") from exc

        # The bus configs the unit runs on are its instance's: they admit cud-seat-N by name.
        for conf in ("session-bus.conf", "accessibility.conf"):
            text = (runtime / conf).read_text()
            assert f'<allow user="cud-seat-{number}"/>' in text and "@SEAT_USER@" not in text, conf
        # Seat N's user, in no group of the unit's, can reach both sockets; the buses' policy decides.
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o755
        assert stat.S_IMODE((runtime / "at-spi").stat().st_mode) == 0o711
        for socket_path in (runtime / "bus", Path(a11y.split(",")[0].removeprefix("unix:path="))):
            assert stat.S_IMODE(socket_path.stat().st_mode) == 0o777, socket_path
        # Who may connect: root and the bus's own user; another user is turned away.
        assert dbus_call(address, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetId",
                         uid=pwd.getpwnam("nobody").pw_uid).returncode == 0
        refused = dbus_call(address, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetId",
                            uid=1)
        assert refused.returncode != 0, refused.stdout

        # Stopping the unit's main process ends everything it started (systemd would stop the cgroup).
        stop_process(app)
        stop_process(bus)
        wait_until(lambda: running_with(marker) == [], 30, "the launcher, accessibility bus and registry to end")
    finally:
        if app is not None:
            stop_process(app)
        for pid in running_with(marker):  # what a failed test left: by pid, ours only
            os.kill(pid, 9)


@pytest.mark.parametrize("conf", ["session-bus.conf", "accessibility.conf"])
def test_the_bus_configs_admit_the_group_cud_display_and_the_seats_user_and_no_one_else(
        prefix_install: Path, short_tmp: Path, conf: str) -> None:
    # The group does not exist here: the same config naming group "daemon" (uid 1's) stands in for it,
    # and user "sys" (uid 3) for the seat's user the unit writes in; uid 2 is another seat's user.
    text = (prefix_install / "lib/cud" / conf).read_text()
    assert text.count('<allow group="cud-display"/>') == 1 and "<allow user=\"*\"/>" not in text
    assert text.count('<allow user="@SEAT_USER@"/>') == 1
    nobody = pwd.getpwnam("nobody")
    short_tmp.chmod(0o755)  # the bus's user must reach its directory
    place = short_tmp / "bus"
    place.mkdir(mode=0o755)
    os.chown(place, nobody.pw_uid, nobody.pw_gid)
    (place / conf).write_text(text.replace('group="cud-display"', 'group="daemon"').replace("@SEAT_USER@", "sys"))
    address = f"unix:path={place}/socket"
    with open(short_tmp / "bus.log", "ab") as log:
        proc = subprocess.Popen(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                                 "--", "dbus-daemon", f"--config-file={place / conf}", f"--address={address}",
                                 "--nofork", "--nopidfile"], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        get_id = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetId")
        wait_until(lambda: dbus_call(address, *get_id).returncode == 0, 30, "the bus to answer root")
        assert dbus_call(address, *get_id, uid=1).returncode == 0  # a member of the group
        assert dbus_call(address, *get_id, uid=3).returncode == 0  # the seat's user
        assert dbus_call(address, *get_id, uid=2).returncode != 0  # anyone else: another seat's user too
    finally:
        stop_process(proc)


def xauth_displays(path: Path) -> set[str]:
    """The display numbers ``path`` holds cookies for."""
    listed = subprocess.run(["xauth", "-i", "-f", str(path), "list"], capture_output=True, text=True, timeout=30)
    return {line.split()[0].rpartition(":")[2] for line in listed.stdout.splitlines() if line.strip()}


def test_display_units_share_their_cookies_in_the_one_file_a_daemon_with_seats_reads(unit_runner) -> None:
    runner = unit_runner
    shared = runner.run / "Xauthority"
    procs: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    for seat in ("left", "right"):
        proc = runner.start_server("xvfb@.service")
        procs[seat] = (runner.number, proc)
        runner.number = free_display_number(after=runner.number)
    numbers = {seat: number for seat, (number, _) in procs.items()}
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640  # cud reads it through the cud-display group
    assert xauth_displays(shared) == {str(n) for n in numbers.values()}
    for number in numbers.values():
        assert x_connects(f":{number}", shared) and not x_connects(f":{number}", "/nonexistent")

    # A display that stops takes its cookie out; started again (as Restart= does) it gets a
    # new one, and the shared file has the new one in place of the old.
    number, proc = procs["left"]
    stale = runner.run / "stale-Xauthority"
    shutil.copy(runner.run / str(number) / "Xauthority", stale)
    runner.stop("xvfb@.service", proc, number)
    assert xauth_displays(shared) == {str(numbers["right"])}
    runner.start_server("xvfb@.service")  # on the next free number if :number was taken meanwhile
    numbers["left"] = runner.number
    assert xauth_displays(shared) == {str(n) for n in numbers.values()}
    assert x_connects(f":{numbers['left']}", shared) and x_connects(f":{numbers['right']}", shared)
    if numbers["left"] == number:
        assert not x_connects(f":{number}", stale)  # the old cookie no longer opens it

    # One daemon, two seats, one XAUTHORITY: both seats answer.
    daemon = Daemon("", "http://127.0.0.1:9/v1", workdir=runner.run.parent / "daemon",
                    seats={seat: f":{n}" for seat, n in numbers.items()}, extra_env={"XAUTHORITY": str(shared)})
    daemon.dir.mkdir()
    try:
        daemon.start()

        def both_idle() -> list[dict[str, object]] | None:
            seats = daemon.call("seats")
            return seats if all(seat["state"] == "idle" for seat in seats) else None

        seats = wait_until(both_idle, 30, "both seats to be idle")
        assert [(seat["name"], seat["display"], seat["size"]) for seat in seats] == [
            (seat, f":{n}", [1280, 800]) for seat, n in numbers.items()]
    finally:
        daemon.stop()


def test_cud_xauth_share_and_unshare(tmp_path: Path) -> None:
    helper = str(SYSTEMD / "cud-xauth")
    shared = tmp_path / "Xauthority"
    for number in ("7", "12"):
        subprocess.run([helper, "new", number, str(tmp_path / number)], check=True, timeout=30)
        # Both entries, FamilyLocal and FamilyWild, every time (two xauth on one file in a
        # pipeline used to deadlock on its lock and drop the second entry now and then).
        assert len(subprocess.run(["xauth", "-f", str(tmp_path / number), "list"], capture_output=True,
                                  text=True, check=True).stdout.splitlines()) == 2
        subprocess.run([helper, "share", str(tmp_path / number), str(shared)], check=True, timeout=30)
    assert xauth_displays(shared) == {"7", "12"} and len(shared.read_bytes()) > 0
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    subprocess.run([helper, "unshare", "7", str(shared)], check=True, timeout=30)
    assert xauth_displays(shared) == {"12"}
    subprocess.run([helper, "unshare", "12", str(shared)], check=True, timeout=30)
    assert xauth_displays(shared) == set() and shared.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["12", "7", "Xauthority"]  # no temp files left
    # Nothing shared yet: nothing to take out. A missing cookie file or bad number: refused.
    assert subprocess.run([helper, "unshare", "3", str(tmp_path / "none")], timeout=30).returncode == 0
    assert subprocess.run([helper, "share", str(tmp_path / "missing"), str(shared)], capture_output=True,
                          timeout=30).returncode == 1
    assert subprocess.run([helper, "unshare", "3; x", str(shared)], capture_output=True, timeout=30).returncode == 2


def test_cud_xauth_rejects_bad_input(tmp_path: Path) -> None:
    helper = str(SYSTEMD / "cud-xauth")
    assert subprocess.run([helper, "new", "0; rm -rf /", str(tmp_path / "x")], capture_output=True).returncode == 2
    assert subprocess.run([helper, "wait", "abc"], capture_output=True).returncode == 2
    assert not (tmp_path / "x").exists()


# -- sd_notify from the real daemon ------------------------------------------------------------------
class NotifySocket:
    """A bound AF_UNIX datagram socket, as systemd's NOTIFY_SOCKET is; records what arrives, and when."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self) -> None:
        while not self.closed.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self.lock:
                self.messages.append(fields)
                self.arrivals.append(time.monotonic())

    def count(self, key: str) -> int:
        with self.lock:
            return sum(1 for m in self.messages if key in m)

    def first(self, key: str) -> dict[str, str] | None:
        with self.lock:
            return next((m for m in self.messages if key in m), None)

    def timeline(self) -> list[tuple[float, dict[str, str]]]:
        """Each message with its arrival (``time.monotonic()``), as systemd's watchdog timer sees them."""
        with self.lock:
            return list(zip(self.arrivals, self.messages, strict=True))

    def close(self) -> None:
        self.closed.set()
        self.thread.join()
        self.sock.close()


def test_daemon_sends_ready_feeds_the_watchdog_while_a_task_runs_and_says_stopping(xvfb, short_tmp: Path) -> None:
    from cud.scripted import ScriptedModel

    notify = NotifySocket(short_tmp / "notify")
    # The model's answer never comes within the test: the daemon's loop must keep feeding the
    # watchdog while it waits, however long that is, until the task is cancelled.
    model = ScriptedModel(scenario({"message": "done", "delay": 3600}))
    url = model.start()
    watchdog_usec = 1_000_000
    daemon = Daemon(xvfb.display, url, workdir=short_tmp,
                    extra_env={"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": str(watchdog_usec)})
    try:
        daemon.start()
        ready = wait_until(lambda: notify.first("READY"), 30, "READY=1")
        assert ready["READY"] == "1" and ready.get("MAINPID") == str(daemon.proc.pid)
        wait_until(lambda: notify.count("WATCHDOG") >= 2, 30, "WATCHDOG=1 while idle")

        task = daemon.call("submit", prompt="wait for the slow model")["id"]
        daemon.wait_state(task, "running")
        during = notify.count("WATCHDOG")
        wait_until(lambda: notify.count("WATCHDOG") >= during + 3, 30, "WATCHDOG=1 while the task runs")
        assert daemon.task(task)["state"] == "running"
        daemon.call("cancel", id=task)
        daemon.wait_state(task, "cancelled")
        assert notify.first("STOPPING") is None

        assert daemon.stop() == 0, daemon.log_text()  # SIGTERM, and a clean exit
        stopping = wait_until(lambda: notify.first("STOPPING"), 10, "STOPPING=1 after SIGTERM")
        assert stopping["STOPPING"] == "1"
        assert all(m.get("WATCHDOG", "1") == "1" for m in notify.messages)
        # What systemd enforces: from READY=1 to STOPPING=1 no stretch without a WATCHDOG=1 as long as
        # WATCHDOG_USEC, or it kills the daemon. (It pings every half of it: the other half is for a busy machine.)
        pings = [at for at, m in notify.timeline() if m.keys() & {"READY", "WATCHDOG", "STOPPING"}]
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(pings)]
        assert max(gaps) < watchdog_usec / 1e6, f"a gap of {max(gaps)} s between pings: {gaps}"
    finally:
        daemon.stop()
        model.stop()
        notify.close()
