"""A seat's session as a systemd unit (``session_unit``), against a real systemd.

The systemd is the real system manager (Debian's), PID 1 of its own namespaces
(tests/support/private_systemd.py), with the project's ``systemd/cud-session@.service``
installed as written plus a drop-in naming the test's seat user (the unit says
``User=cud-seat-%i``; the tests make throwaway users instead). cud talks to it over its
real system bus (dbus-daemon, started by that systemd) with the daemon's own code; the polkit
rule (systemd/cud-session.rules) is decided by a real polkitd started by that systemd too.
``cud-bus@.service`` runs there too, to show whom a display's buses admit.
"""

from __future__ import annotations

import asyncio
import base64
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.cuctl.client import Client
from cud.daemon.session.namespace import Isolation
from cud.daemon.session.processes import SeatSession, session_for
from cud.daemon.session.sweep import session_pids
from cud.daemon.session.unit import SessionUnit
from cud.daemon.session.user import SeatUser
from cud.errors import SessionError
from tests.support.daemon import cuctl, json_out
from tests.support.netns import CONNECT
from tests.support.private_systemd import PrivateSystemd, private_systemd
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers, make_home, tree_hash
from tests.support.session_seat import SessionSeat, session_seat, windows
from tests.support.units import SYSTEMD

SEAT = "s1"  # tests/support/session_seat.py's seat
UNIT = "cud-session@7.service"


@pytest.fixture(scope="module")
def systemd() -> Iterator[PrivateSystemd]:
    with private_systemd() as made:
        shutil.copy(SYSTEMD / "cud-session@.service", made.units / "cud-session@.service")
        yield made


@pytest.fixture(scope="module")
def user(seat_users: SeatUsers, systemd: PrivateSystemd) -> SeatUser:
    made = seat_users.make()
    drop_in = systemd.units / f"{UNIT}.d"
    drop_in.mkdir()
    (drop_in / "user.conf").write_text(f"[Service]\nUser={made.name}\n")
    systemd.reload()
    return made


@pytest.fixture
def base(session_dir: Path) -> Path:
    return session_dir  # every seat user can reach it (tests/support/seat_users.py)


def session(systemd: PrivateSystemd, user: SeatUser, base: Path, unit: str = UNIT,
            isolation: Isolation | None = None) -> SeatSession:
    template = base / "template"
    (template / "Desktop").mkdir(parents=True)
    (template / "Desktop" / "notes.txt").write_text("hello\n")
    template.chmod(0o700)  # the home is 0700 after a reset: tree_hash compares the home's own mode too
    made = session_for(SEAT, user, make_home(base, user), template, None, None, unit, isolation=isolation)
    assert made is not None and made.unit is not None
    made.unit = SessionUnit(SEAT, unit, user.name, bus_address=systemd.bus_address, isolation=isolation)
    return made


def own_pids(user: SeatUser) -> list[int]:
    return session_pids(user.uid)


#: Shell lines that leave a process behind in every way a command can detach from its parent.
DETACHING = [
    "setsid sleep 1000 </dev/null >/dev/null 2>&1 &",
    "nohup sleep 1001 </dev/null >/dev/null 2>&1 &",
    "(sleep 1002 </dev/null >/dev/null 2>&1 &) &",  # double fork: reparented away from the command
    "(setsid sh -c 'trap \"\" TERM HUP; exec sleep 1003' </dev/null >/dev/null 2>&1 &)",
]


def test_stopping_and_starting_the_unit_ends_what_the_commands_daemonised(systemd: PrivateSystemd, user: SeatUser,
                                                                          base: Path) -> None:
    async def scenario() -> None:
        seat = session(systemd, user, base)
        try:
            await seat.unit.restart(10)  # the session is open
            done = await seat.run(["/bin/sh", "-c", "\n".join([*DETACHING, "echo started; id -un"])], timeout=20)
            assert done.exit_code == 0 and done.stdout.split() == [b"started", user.name.encode()], done
            pid = await seat.launch(["/bin/sh", "-c", "sleep 1004 & exec sleep 1005"])
            assert pid > 0
            # 4 detached sleeps and the launched pair (its background sleep may still be starting).
            await asyncio.to_thread(wait_until, lambda: len(own_pids(user)) >= 6, 10, f"6 processes of {user.name}")
            # Only systemd acts here: the unit is stopped, every command unit with it (PartOf=).
            await seat.unit.restart(10)
            assert own_pids(user) == [], f"processes left after stopping {UNIT}: {own_pids(user)}"
            state = systemd.systemctl("is-active", UNIT)
            assert state.stdout.strip() == "active", state
        finally:
            seat.close()

    asyncio.run(scenario())


def test_a_command_unit_reports_exit_status_output_stdin_and_its_timeout(systemd: PrivateSystemd, user: SeatUser,
                                                                         base: Path) -> None:
    async def scenario() -> None:
        seat = session(systemd, user, base)
        try:
            await seat.unit.restart(10)
            done = await seat.run(["/bin/sh", "-c", "cat; echo err >&2; pwd; exit 3"], timeout=20, stdin=b"in\n")
            assert (done.exit_code, done.stdout, done.stderr) == (3, f"in\n{seat.home.root}\n".encode(), b"err\n")
            big = await seat.run(["/usr/bin/head", "-c", "100000", "/dev/zero"], timeout=20, max_output=1000)
            assert big.exit_code == 0 and len(big.stdout) == 1000 and big.truncated
            slow = await seat.run(["/bin/sh", "-c", "sleep 1006 & sleep 1007"], timeout=1)
            assert slow.timed_out and slow.exit_code is None
            # The timeout killed the command's whole unit, what it forked too.
            assert own_pids(user) == [], own_pids(user)
            env = await seat.run(["/usr/bin/env"], timeout=20)
            lines = set(env.stdout.decode().splitlines())
            assert f"CUD_SEAT={SEAT}" in lines and f"HOME={seat.home.root}" in lines
            with pytest.raises(SessionError, match="did not start"):
                await seat.run(["/nonexistent/program"], timeout=20)
            # A run the session's end interrupts (the unit stopped under it) ends killed, not timed out.
            running = asyncio.ensure_future(seat.run(["/bin/sleep", "1009"], timeout=60))
            await asyncio.to_thread(wait_until, lambda: own_pids(user), 10, "the sleep to run")
            assert systemd.systemctl("stop", UNIT).returncode == 0
            ended = await running
            assert (ended.exit_code, ended.timed_out) == (-9, False), ended
        finally:
            seat.close()

    asyncio.run(scenario())


def test_the_reset_through_the_unit_leaves_the_seat_clean(systemd: PrivateSystemd, user: SeatUser,
                                                          base: Path) -> None:
    async def scenario() -> None:
        seat = session(systemd, user, base)
        try:
            await seat.reset()
            await seat.run(["/bin/sh", "-c", "\n".join(["echo dirty > Desktop/notes.txt; mkfifo f; ln -s /etc e",
                                                      *DETACHING])], timeout=20)
            await seat.launch(["/bin/sleep", "1008"])
            assert own_pids(user)
            report = await seat.reset()
            assert report.processes >= 5
            assert own_pids(user) == []
            assert tree_hash(seat.home.root) == tree_hash(base / "template")
            assert systemd.systemctl("is-active", UNIT).stdout.strip() == "active"
        finally:
            seat.close()

    asyncio.run(scenario())


def test_commands_do_not_start_while_the_session_unit_is_stopped(systemd: PrivateSystemd, user: SeatUser,
                                                                 base: Path) -> None:
    async def scenario() -> None:
        seat = session(systemd, user, base)
        try:
            await seat.unit.restart(10)
            assert systemd.systemctl("stop", UNIT).returncode == 0
            with pytest.raises(SessionError, match="did not start"):
                await seat.run(["/bin/true"], timeout=20)  # Requisite=: never outside the session
        finally:
            seat.close()

    asyncio.run(scenario())


def test_a_unit_of_another_user_or_missing_is_refused_and_fails_the_reset(systemd: PrivateSystemd, user: SeatUser,
                                                                          base: Path) -> None:
    other = "cud-session@8.service"
    (systemd.units / f"{other}.d").mkdir(exist_ok=True)
    (systemd.units / f"{other}.d" / "user.conf").write_text("[Service]\nUser=nobody\n")
    systemd.reload()

    async def scenario() -> None:
        wrong = session(systemd, user, base, other)
        try:
            with pytest.raises(SessionError, match=r"User=nobody, not the seat's user"):
                await wrong.reset()
            assert systemd.systemctl("is-active", other).stdout.strip() != "active"  # never started
        finally:
            wrong.close()
        missing = SessionUnit(SEAT, "cud-nothing@1.service", user.name, bus_address=systemd.bus_address)
        try:
            with pytest.raises(SessionError, match="is not-found in systemd"):
                await missing.restart(10)
        finally:
            missing.close()
        unreachable = SessionUnit(SEAT, UNIT, user.name, bus_address="unix:path=/nonexistent/bus")
        with pytest.raises(SessionError, match="cannot reach systemd"):
            await unreachable.restart(10)

    asyncio.run(scenario())


# -- the whole path: a daemon whose seat's session is the unit --------------------------------------
@pytest.fixture(scope="module")
def seat(systemd: PrivateSystemd, user: SeatUser) -> Iterator[SessionSeat]:
    base = Path(tempfile.mkdtemp(prefix="cud-unit-seat-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(user, base, config=f'session_unit = "{UNIT}"\n',
                          env={"DBUS_SYSTEM_BUS_ADDRESS": systemd.bus_address}) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def cgroups_of(pids: list[int]) -> dict[int, str]:
    """The cgroup of each of ``pids`` still alive (a short-lived one, xclip -o, may be gone by now)."""
    found = {}
    for pid in pids:
        try:
            found[pid] = Path(f"/proc/{pid}/cgroup").read_text().strip().rpartition(":")[2]
        except FileNotFoundError:
            continue
    return found


def test_the_daemon_runs_exec_and_the_clipboard_in_the_unit_and_its_reset_restarts_it(
        systemd: PrivateSystemd, seat: SessionSeat) -> None:
    sock = seat.daemon.socket
    assert cuctl(sock, "reset", SEAT).returncode == 0
    assert systemd.systemctl("is-active", UNIT).stdout.strip() == "active"
    script = "\n".join(["xterm -title in-the-unit &", *DETACHING, "cat /proc/self/cgroup"])
    done = cuctl(sock, "exec", SEAT, "--", "/bin/sh", "-c", script)
    assert done.returncode == 0, done.stderr
    assert "/system.slice/cud-cmd-" in done.stdout, done.stdout  # the command's own unit
    assert cuctl(sock, "clipboard", SEAT, "set", "in a unit ✓").returncode == 0  # xclip's child outlives xclip
    assert cuctl(sock, "clipboard", SEAT, "get").stdout == "in a unit ✓"
    wait_until(lambda: windows(seat.desktop.display), 30, "the xterm's window")
    wait_until(lambda: len(session_pids(seat.user.uid)) >= 6, 10, "the detached sleeps, xterm, xclip")
    left = session_pids(seat.user.uid)
    groups = cgroups_of(left)
    assert len(groups) >= 6 and all("/system.slice/cud-cmd-" in group for group in groups.values()), groups
    assert cuctl(sock, "reset", SEAT).returncode == 0
    assert session_pids(seat.user.uid) == []
    assert windows(seat.desktop.display) == []
    assert tree_hash(seat.home) == tree_hash(seat.template)
    assert cuctl(sock, "clipboard", SEAT, "get").stdout == ""
    assert systemd.systemctl("is-active", UNIT).stdout.strip() == "active"


def test_a_unit_that_fails_to_start_leaves_the_seat_unavailable_until_it_starts(
        systemd: PrivateSystemd, seat: SessionSeat) -> None:
    sock = seat.daemon.socket
    broken = systemd.units / f"{UNIT}.d" / "broken.conf"
    broken.write_text("[Service]\nExecStartPre=/bin/false\n")
    systemd.reload()
    try:
        failed = cuctl(sock, "reset", SEAT)
        assert failed.returncode == 2
        assert "the reset of seat 's1' failed" in failed.stderr
        assert f"StartUnit of its session unit '{UNIT}' ended 'failed'" in failed.stderr, failed.stderr
        view = json_out(cuctl(sock, "--json", "seats"))[0]
        assert view["state"] == "unavailable" and UNIT in view["error"]
    finally:
        broken.unlink()
        systemd.reload()
    # The health checks try the reset again; the seat takes work when one succeeds.
    wait_until(lambda: json_out(cuctl(sock, "--json", "seats"))[0]["state"] == "idle", 60, "the seat to be clean")
    assert systemd.systemctl("is-active", UNIT).stdout.strip() == "active"


# -- a seat of its own under systemd: private_tmp, home_path, network = "none" --------------------------------
OWN_UNIT = "cud-session@9.service"
HOME_PATH = "/home/user"
#: Where each private place is seen, and where the host (or the tests' systemd, for its own /run) keeps its own.
TEMP_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


@pytest.fixture(scope="module")
def own_seat(systemd: PrivateSystemd, seat_users: SeatUsers) -> Iterator[SessionSeat]:
    """A real daemon whose seat has a session unit and every key of a seat of its own; its home, bus and the
    X server's socket are in the host's /tmp, so the command units must bind them in to work at all."""
    own_user = seat_users.make()
    (systemd.units / f"{OWN_UNIT}.d").mkdir()
    (systemd.units / f"{OWN_UNIT}.d" / "user.conf").write_text(f"[Service]\nUser={own_user.name}\n")
    systemd.reload()
    base = Path(tempfile.mkdtemp(prefix="cud-unit-own-", dir="/tmp"))
    base.chmod(0o755)
    config = (f'session_unit = "{OWN_UNIT}"\nprivate_tmp = true\nhome_path = "{HOME_PATH}"\n'
              'network = "none"\n')
    try:
        with session_seat(own_user, base, config=config,
                          env={"DBUS_SYSTEM_BUS_ADDRESS": systemd.bus_address}) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def own_exec(seat: SessionSeat, argv: list[str]) -> tuple[int, str, str]:
    with Client(seat.daemon.socket, timeout=60) as client:
        done = client.call("exec", seat=SEAT, argv=argv, timeout=60)
    out, err = (base64.b64decode(done[k]).decode() for k in ("stdout", "stderr"))
    return done["exit_code"], out, err


def own_sh(seat: SessionSeat, script: str) -> str:
    code, out, err = own_exec(seat, ["/bin/sh", "-c", script])
    assert code == 0, f"{script!r} exited {code}: {err}"
    return out


def test_the_command_units_of_a_session_share_its_own_temp_places_which_the_reset_empties(
        systemd: PrivateSystemd, own_seat: SessionSeat) -> None:
    assert cuctl(own_seat.daemon.socket, "reset", SEAT).returncode == 0
    name = f"cud-left-{os.urandom(4).hex()}"
    # One command writes in each place (and checks its display works: the X socket's directory bound in)...
    own_sh(own_seat, f"for d in {' '.join(TEMP_PLACES)}; do echo from-one > $d/{name}; done; "
                     "xdpyinfo >/dev/null && echo x-works")
    # ...another command of the session (a unit of its own) reads them: one /tmp, /var/tmp, /dev/shm, /run/lock.
    seen = own_sh(own_seat, f"for d in {' '.join(TEMP_PLACES)}; do cat $d/{name}; done; ls -A /tmp")
    assert seen.splitlines()[:4] == ["from-one"] * 4, seen
    # The host never sees them, nor does the tests' systemd in its own /run (where /run/lock is).
    for place in TEMP_PLACES:
        assert not os.path.lexists(f"{place}/{name}"), place
        assert not os.path.lexists(f"/proc/{systemd.pid}/root{place}/{name}"), place
    assert cuctl(own_seat.daemon.socket, "reset", SEAT).returncode == 0
    after = own_sh(own_seat, f"for d in {' '.join(TEMP_PLACES)}; do ls -A $d; done")
    assert name not in after, after
    assert own_sh(own_seat, "xdpyinfo >/dev/null && echo x-works") == "x-works\n"


def test_a_command_unit_sees_its_home_at_home_path(own_seat: SessionSeat) -> None:
    assert cuctl(own_seat.daemon.socket, "reset", SEAT).returncode == 0
    out = own_sh(own_seat, "pwd; echo $HOME; echo hi > ~/made.txt; cat /home/user/made.txt; ls -A /home")
    assert out.splitlines() == [HOME_PATH, HOME_PATH, "hi", "user"], out
    assert (own_seat.home / "made.txt").read_text() == "hi\n"
    assert not os.path.exists(f"{HOME_PATH}/made.txt")
    (own_seat.home / "Desktop").mkdir(exist_ok=True)
    with Client(own_seat.daemon.socket, timeout=60) as client:
        done = client.call("exec", seat=SEAT, argv=["/bin/pwd"], cwd="Desktop", timeout=60)
    assert base64.b64decode(done["stdout"]).decode() == f"{HOME_PATH}/Desktop\n"


def test_a_command_unit_reaches_only_its_sessions_own_loopback(own_seat: SessionSeat) -> None:
    assert cuctl(own_seat.daemon.socket, "reset", SEAT).returncode == 0
    # The tests' systemd shares this process's network namespace: a server here is a server of the machine's.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # it answers everyone else
        assert own_sh(own_seat, f"python3 -c \"{CONNECT}\" {port}").strip() == "ECONNREFUSED"
    # What one command of the session listens on, another reaches: one network namespace for the session.
    listen = ("import socket, time\ns = socket.create_server(('127.0.0.1', 47123))\n"
              "while True: s.accept()[0].close()\n")
    assert cuctl(own_seat.daemon.socket, "exec", SEAT, "--", "/bin/sh", "-c",
                 f"setsid python3 -c \"{listen}\" </dev/null >/dev/null 2>&1 & sleep 1").returncode == 0
    assert own_sh(own_seat, f"python3 -c \"{CONNECT}\" 47123").strip() == "connected"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", 47123)) != 0  # not the host's
    assert own_sh(own_seat, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '") == "lo\n"


@pytest.mark.parametrize(("drop_in", "named"), [
    ("PrivateTmp=no\n", "has PrivateTmp=no, and the seat's private_tmp = true needs PrivateTmp=yes there"),
    ("PrivateNetwork=no\n", "has PrivateNetwork=no, and the seat's network = \"none\" needs PrivateNetwork=yes"),
    ("RuntimeDirectory=\n", "has no RuntimeDirectory= ending in /shm or /lock"),
])
def test_a_session_unit_without_what_the_isolation_needs_is_refused_naming_it(
        systemd: PrivateSystemd, seat_users: SeatUsers, base: Path, drop_in: str, named: str) -> None:
    other = "cud-session@10.service"
    made = seat_users.make()
    (systemd.units / f"{other}.d").mkdir(exist_ok=True)
    (systemd.units / f"{other}.d" / "user.conf").write_text(f"[Service]\nUser={made.name}\n{drop_in}")
    systemd.reload()

    async def scenario() -> None:
        seat = session(systemd, made, base, other, Isolation(private_tmp=True, network="none"))
        try:
            with pytest.raises(SessionError) as refused:
                await seat.reset()
            assert named in refused.value.message and other in refused.value.message
            with pytest.raises(SessionError, match=r"systemd/cud-session@\.service"):
                await seat.run(["/bin/true"], timeout=20)  # a command before any reset: checked too
        finally:
            seat.close()

    try:
        asyncio.run(scenario())
    finally:
        shutil.rmtree(systemd.units / f"{other}.d")
        systemd.reload()


# -- the polkit rule, decided by a real polkitd -------------------------------------------------------
def test_the_polkit_rule_lets_cuds_user_stop_and_start_session_units_and_nothing_else(
        systemd: PrivateSystemd, user: SeatUser, seat_users: SeatUsers) -> None:
    # The rule names the user `cud`; here the test's throwaway user stands for it. polkitd (Debian's) runs
    # in the tests' systemd, with the rule bound over /etc/polkit-1/rules.d in its mount namespace only.
    daemon_user, stranger = seat_users.make(), seat_users.make()
    rules = Path(tempfile.mkdtemp(prefix="cud-polkit-rules-", dir="/tmp"))
    try:
        rules.chmod(0o755)
        rule = (SYSTEMD / "cud-session.rules").read_text()
        assert 'subject.user != "cud"' in rule
        (rules / "50-cud-session.rules").write_text(rule.replace('subject.user != "cud"',
                                                                 f'subject.user != "{daemon_user.name}"'))
        shutil.copy("/usr/lib/systemd/system/polkit.service", systemd.units / "polkit.service")
        bound = subprocess.run(["nsenter", "-t", str(systemd.pid), "-m", "mount", "--bind", str(rules),
                                "/etc/polkit-1/rules.d"], capture_output=True, text=True)
        assert bound.returncode == 0, bound.stderr
        systemd.reload()
        started = systemd.systemctl("start", "polkit.service")
        assert started.returncode == 0, started.stderr

        def manager(caller: SeatUser, *args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["nsenter", "-t", str(systemd.pid), "-m", "-p", "setpriv", f"--reuid={caller.uid}",
                                   f"--regid={caller.gid}", "--clear-groups", "busctl", "--system", "call",
                                   "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", *args], capture_output=True, text=True,
                                  timeout=60)

        for verb in ("StopUnit", "StartUnit"):
            done = manager(daemon_user, verb, "ss", UNIT, "replace")
            assert done.returncode == 0 and "/job/" in done.stdout, (verb, done.stderr)
            refused = manager(stranger, verb, "ss", UNIT, "replace")  # the same call, by a user the rule does not name
            assert refused.returncode != 0 and "authentication required" in refused.stderr.lower(), refused
        other = manager(daemon_user, "StopUnit", "ss", "dbus.service", "replace")
        assert other.returncode != 0 and "authentication required" in other.stderr.lower(), other
        # systemd 252 asks polkit about StartTransientUnit without the unit's name: the rule cannot grant it
        # (docs/sessions.md says so: the daemon then runs as root).
        transient = manager(daemon_user, "StartTransientUnit", "ssa(sv)a(sa(sv))", "cud-cmd-0123456789abcdef.service",
                            "fail", "1", "ExecStart", "a(sasb)", "1", "/bin/true", "1", "/bin/true", "false", "0")
        assert transient.returncode != 0 and "authentication required" in transient.stderr.lower(), transient
    finally:
        systemd.systemctl("stop", "polkit.service")
        subprocess.run(["nsenter", "-t", str(systemd.pid), "-m", "umount", "/etc/polkit-1/rules.d"],
                       capture_output=True)
        shutil.rmtree(rules, ignore_errors=True)


def _bus_get_id(systemd: PrivateSystemd, address: str, uid: int, gid: int) -> subprocess.CompletedProcess[str]:
    """``GetId`` on the bus at ``address`` (a path in the private systemd's /run) as uid:gid, in no group."""
    return subprocess.run(["nsenter", "-t", str(systemd.pid), "-m", "--", "setpriv", f"--reuid={uid}",
                           f"--regid={gid}", "--clear-groups", "--", "dbus-send", f"--bus={address}",
                           "--print-reply=literal", "--reply-timeout=10000", "--dest=org.freedesktop.DBus",
                           "/org/freedesktop/DBus", "org.freedesktop.DBus.GetId"],
                          capture_output=True, text=True, timeout=60)


def test_a_displays_buses_admit_its_seats_user_and_not_another_seats(systemd: PrivateSystemd,
                                                                      seat_users: SeatUsers) -> None:
    """cud-bus@N as written (its configs installed in a directory of the test's), under the real systemd: seat
    N's user (cud-seat-N, in no group) reaches its session and accessibility buses; another seat's user neither."""
    number = next(n for n in range(73100, 73200) if not _user_exists(f"cud-seat-{n}"))
    name = f"cud-seat-{number}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                    "/usr/sbin/nologin", name], check=True, capture_output=True)
    seat_users.made.append(name)  # removed with the others at the end
    mine, other = SeatUser.lookup("user", name), seat_users.make()
    # The unit must leave the host's files alone: a bind over a missing path would create it there.
    host = [Path("/etc/at-spi2"), Path("/usr/share/defaults/at-spi2/accessibility.conf")]
    before = [path.exists() for path in host]
    assert before[1], "at-spi2-core's default accessibility.conf, which the unit binds over, is missing"
    lib = Path(tempfile.mkdtemp(prefix="cud-lib-"))
    unit = f"cud-bus@{number}.service"
    try:
        lib.chmod(0o755)
        for source, target in (("cud-session-bus.conf", "session-bus.conf"),
                               ("cud-accessibility.conf", "accessibility.conf")):
            shutil.copy(SYSTEMD / source, lib / target)
        text = (SYSTEMD / "cud-bus@.service").read_text().replace("/usr/local/lib/cud", str(lib))
        (systemd.units / "cud-bus@.service").write_text(text)
        (systemd.units / f"{unit}.d").mkdir()
        # The group cud-display does not exist here: nobody runs the buses instead (as in test_systemd_run);
        # the configs are in /tmp, which PrivateTmp= would hide.
        (systemd.units / f"{unit}.d" / "test.conf").write_text("[Service]\nUser=nobody\nGroup=nogroup\n"
                                                                "PrivateTmp=no\n")
        systemd.reload()
        started = systemd.systemctl("start", unit)
        assert started.returncode == 0, started.stderr + systemd.systemctl("status", unit).stdout
        session = f"unix:path=/run/cud-bus/{number}/bus"
        reply = subprocess.run(["nsenter", "-t", str(systemd.pid), "-m", "--", "dbus-send", f"--bus={session}",
                                "--print-reply=literal", "--dest=org.a11y.Bus", "/org/a11y/bus",
                                "org.a11y.Bus.GetAddress"], capture_output=True, text=True, timeout=60)
        assert reply.returncode == 0, reply.stderr
        a11y = reply.stdout.strip().split(",")[0]
        assert a11y.startswith(f"unix:path=/run/cud-bus/{number}/at-spi/"), a11y
        for address in (session, a11y):
            done = _bus_get_id(systemd, address, mine.uid, mine.gid)
            assert done.returncode == 0, (address, done.stderr)
            refused = _bus_get_id(systemd, address, other.uid, other.gid)
            assert refused.returncode != 0, (address, refused.stdout)
        assert [path.exists() for path in host] == before
    finally:
        systemd.systemctl("stop", unit)
        shutil.rmtree(systemd.units / f"{unit}.d", ignore_errors=True)
        (systemd.units / "cud-bus@.service").unlink(missing_ok=True)
        systemd.reload()
        shutil.rmtree(lib, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
