"""The reset against a seat user who fights it: a name owned on the bus, the bus's socket taken over, links
planted under the copy, a tree too deep to recurse, and a reset asked for right after an ``exec``.

One real daemon for the module (tests/support/session_seat.py): openbox on Xvfb, a session bus run by root that
admits the seat's user (as cud-bus@ runs it as cud-display), a home and its template. The seat's user is one
these tests made, so its processes are theirs to end.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from Xlib.display import Display

from cud.cuctl.client import Client, RemoteError
from cud.daemon.session.remove import remove_contents
from cud.daemon.session.sweep import session_pids
from cud.errors import SessionError
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers, tree_hash
from tests.support.session_seat import (
    SEAT,
    SYSTEM_PYTHON,
    TAKEOVER,
    SessionSeat,
    alive,
    as_seat_user,
    bus_call,
    listening,
    session_seat,
)
from tests.support.xserver import stop_process

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
#: A program of the seat's user that owns org.a11y.Bus (ending whoever had it: a process of its own user) and
#: keeps putting a link to argv[2] at names the template has, as fast as it can.
_SQUATTER = textwrap.dedent("""\
    import os, signal, subprocess, sys, threading
    from gi.repository import Gio, GLib
    home, target = sys.argv[1], sys.argv[2]
    names = ["ü 日本", "Desktop/notes.txt", "bin/hello.sh", "Desktop"]
    def plant():
        while True:
            for name in names:
                path = os.path.join(home, name)
                try:
                    os.symlink(target, path + ".new")
                    os.replace(path + ".new", path)
                except OSError:
                    try:
                        os.unlink(path + ".new")
                    except OSError:
                        pass
    owner = subprocess.run(["dbus-send", "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus",
                            "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                            "string:org.a11y.Bus"], capture_output=True, text=True).stdout.split()
    if owner:
        os.kill(int(owner[-1]), signal.SIGKILL)
    Gio.bus_own_name(Gio.BusType.SESSION, "org.a11y.Bus", Gio.BusNameOwnerFlags.REPLACE, None, None, None)
    threading.Thread(target=plant, daemon=True).start()
    GLib.MainLoop().run()
    """)


#: A program of the seat's user that owns a name on the seat's session bus, and a child that owns another.
_OWNER = textwrap.dedent("""\
    import os, sys
    from gi.repository import Gio, GLib
    if os.fork() == 0:
        os.setsid()
        name = "org.cud.Squat.Child"
    else:
        name = "org.cud.Squat"
    Gio.bus_own_name(Gio.BusType.SESSION, name, Gio.BusNameOwnerFlags.NONE, None, None, None)
    GLib.MainLoop().run()
    """)


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SessionSeat]:
    base = Path(tempfile.mkdtemp(prefix="cud-reset-holes-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(seat_users.make(), base) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def call(where: SessionSeat, kind: str, **fields: object) -> dict[str, object]:
    with Client(where.daemon.socket, timeout=120) as client:
        return client.call(kind, **fields)


def a11y_owner(seat: SessionSeat) -> int | None:
    reply = bus_call(seat.bus_address, "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.a11y.Bus")
    return int(reply.stdout.split()[-1]) if reply.returncode == 0 else None


def test_exec_then_reset_at_once_is_never_refused(seat: SessionSeat) -> None:
    """A health check under way (held here: the X server grabbed) is waited for, not a reason to refuse."""
    conn = Display(seat.desktop.display)
    outcome: list[object] = []
    try:
        conn.grab_server()
        conn.sync()
        time.sleep(3)  # past the seats' health interval (2 s): a check now waits for the X server
        def ask() -> None:
            try:
                call(seat, "exec", seat=SEAT, argv=["/bin/true"], timeout=30)
                outcome.append(call(seat, "reset", seat=SEAT))
            except Exception as exc:  # the refusal: shown by the assertion below
                outcome.append(exc)

        asker = threading.Thread(target=ask)
        asker.start()
        time.sleep(0.5)
    finally:
        conn.ungrab_server()
        conn.sync()
        conn.close()
    asker.join(120)
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    with Client(seat.daemon.socket, timeout=60) as client:
        for _ in range(200):
            client.call("exec", seat=SEAT, argv=["/usr/bin/setsid", "-f", "/bin/sleep", "1000"], timeout=30)
            client.call("reset", seat=SEAT)  # refused, it would raise WrongState
    assert session_pids(seat.user.uid) == []


def test_a_reset_while_a_task_holds_the_seat_is_refused(seat: SessionSeat, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    marker = seat.home / "setup-began"
    spec.write_text('prompt = "never mind"\nreset = true\n[[setup]]\n'
                    'run = ["/bin/sh", "-c", "touch setup-began; sleep 600"]\ntimeout = 600\n')
    with Client(seat.daemon.socket, timeout=60) as client:
        task = client.call("submit", **submit_fields(*load_spec(spec)))["id"]
        try:
            wait_until(marker.exists, 60, "the task's setup to run")
            with pytest.raises(RemoteError, match=r"seat 's1' is busy \(a task holds it\)"):
                client.call("reset", seat=SEAT)
        finally:
            client.call("cancel", id=task)
        wait_until(lambda: client.call("show", id=task)["state"] == "cancelled", 60, "the task to end")
    wait_until(lambda: call(seat, "seats")[0]["state"] == "idle", 60, "the seat to be idle")  # type: ignore[index]
    call(seat, "reset", seat=SEAT)


def test_a_5000_deep_tree_in_the_home_is_removed(seat: SessionSeat) -> None:
    fd = os.open(seat.home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(5000):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
            os.fchown(fd, seat.user.uid, seat.user.gid)
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    call(seat, "reset", seat=SEAT)
    assert not (seat.home / "d").exists()
    assert tree_hash(seat.home) == tree_hash(seat.template)
    assert call(seat, "seats")[0]["state"] == "idle"  # type: ignore[index]


def test_a_tree_the_reset_cannot_remove_is_named_with_why(seat: SessionSeat) -> None:
    mount = seat.home / "a" / "b" / "mounted"
    mount.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "cud-test", str(mount)], check=True)
    try:
        (mount / "admins.txt").write_text("kept\n")
        with pytest.raises(RemoteError) as failed:
            call(seat, "reset", seat=SEAT)
        assert f"{str(mount)!r} could not be removed: Device or resource busy" in str(failed.value), failed.value
        assert "mounted by root" in str(failed.value), failed.value
        assert (mount / "admins.txt").read_text() == "kept\n"  # root's mount: neither detached nor emptied
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    call(seat, "reset", seat=SEAT)
    assert tree_hash(seat.home) == tree_hash(seat.template)


#: A program of the seat's user that mounts a FUSE file system at argv[1] with the setuid fusermount3, as
#: libfuse does (_FUSE_COMMFD: fusermount3 hands back the /dev/fuse descriptor), and serves nothing: with
#: argv[2] "hold" it keeps the descriptor (a server that never answers, until the sweep ends it), else it
#: exits at once (the connection aborts: the mount stays, dead). Prints "mounted" once the mount is there.
_FUSE_MOUNT = textwrap.dedent("""\
    import os, socket, subprocess, sys, time
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    subprocess.run(["/usr/bin/fusermount3", "-o", "rw,nosuid,nodev,fsname=cud-test,subtype=cudtest", "--",
                    sys.argv[1]], env={"_FUSE_COMMFD": str(theirs.fileno()), "PATH": "/usr/bin:/bin"},
                   pass_fds=(theirs.fileno(),), check=True)
    _msg, fds, _flags, _addr = socket.recv_fds(ours, 1, 1)
    print("mounted", flush=True)
    if sys.argv[2:] == ["hold"]:
        os.setsid()
        while True:
            time.sleep(60)
    """)


def fuse_mount(seat: SessionSeat, path: Path, hold: bool) -> subprocess.Popen[bytes]:
    """``path`` (a directory of the seat's user) mounted by the seat's user with FUSE (see _FUSE_MOUNT)."""
    proc = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, "-c", _FUSE_MOUNT, str(path),
                             *(["hold"] if hold else [])], stdout=subprocess.PIPE, cwd="/")
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline() == b"mounted\n"
    if not hold:
        assert proc.wait(30) == 0
    return proc


def fuse_mounts_under(top: Path) -> list[str]:
    """The cudtest FUSE mounts at or below ``top``, from the mount table."""
    with open("/proc/self/mountinfo") as fh:
        return [line.split()[4] for line in fh
                if "fuse.cudtest" in line and (line.split()[4] + "/").startswith(f"{top}/")]


def test_fuse_mounts_of_the_seat_user_in_and_over_its_home_are_detached_by_the_reset(seat: SessionSeat) -> None:
    """fusermount3 is setuid: the user mounts a FUSE file system in its home (its server kept, ended by the
    sweep) and one over the home itself (its server gone at once); the reset detaches both and succeeds."""
    inside = seat.home / "m"
    inside.mkdir()
    os.chown(inside, seat.user.uid, seat.user.gid)
    holder = fuse_mount(seat, inside, hold=True)
    try:
        fuse_mount(seat, seat.home, hold=False)
        assert fuse_mounts_under(seat.home) == [str(inside), str(seat.home)]
        with pytest.raises(OSError):
            os.lstat(seat.home / "m")  # the dead mount over the home: root may not look in (no allow_other)
        report = call(seat, "reset", seat=SEAT)
        assert report["processes"] >= 1, report  # the holder
        assert fuse_mounts_under(seat.home) == []
        assert tree_hash(seat.home) == tree_hash(seat.template)
        assert call(seat, "seats")[0]["state"] == "idle"  # type: ignore[index]
    finally:
        stop_process(holder)
        for path in reversed(fuse_mounts_under(seat.home)):
            subprocess.run(["umount", "-l", path], check=False)


def test_a_fuse_mount_of_the_seat_user_in_its_runtime_directory_is_detached_by_the_reset(seat: SessionSeat) -> None:
    """A command of the session mounts FUSE in XDG_RUNTIME_DIR: the reset detaches it, not only forgets it."""
    script = ('mkdir "$XDG_RUNTIME_DIR/fuse" && /usr/bin/python3 -c "$0" "$XDG_RUNTIME_DIR/fuse" '
              '&& echo "$XDG_RUNTIME_DIR"')
    done = call(seat, "exec", seat=SEAT, argv=["/bin/sh", "-c", script, _FUSE_MOUNT], timeout=30)
    assert done["exit_code"] == 0, done
    runtime = Path(base64.b64decode(str(done["stdout"])).decode().splitlines()[-1])
    try:
        assert fuse_mounts_under(runtime) == [str(runtime / "fuse")]
        call(seat, "reset", seat=SEAT)
        assert fuse_mounts_under(runtime) == []
        assert not runtime.exists()
    finally:
        for path in fuse_mounts_under(runtime):
            subprocess.run(["umount", "-l", path], check=False)


def test_a_dead_fuse_mount_is_named_by_the_removal_never_a_raw_os_error(seat: SessionSeat) -> None:
    """Where a mount is still there (a removal outside the reset's detaching), looking at it is a SessionError
    naming it, not the OSError (EACCES, ENOTCONN) of a FUSE mount whose server is gone."""
    top = Path(tempfile.mkdtemp(prefix="dead-fuse-", dir=seat.base))
    (top / "dead").mkdir()
    os.chown(top, seat.user.uid, seat.user.gid)
    os.chown(top / "dead", seat.user.uid, seat.user.gid)
    fuse_mount(seat, top / "dead", hold=False)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(SessionError, match=f"{str(top / 'dead')!r} could not be looked at: "):
            remove_contents(fd, str(top), deadline=time.monotonic() + 30, what="seat 's1'")
    finally:
        os.close(fd)
        subprocess.run(["umount", "-l", str(top / "dead")], check=True)
        shutil.rmtree(top)


def test_a_launcher_of_the_seat_user_ends_with_the_reset_and_starts_again(seat: SessionSeat) -> None:
    """The accessibility launcher is a process of the user like any other: ended, then a fresh one owns the name."""
    runtime = Path(tempfile.mkdtemp(prefix="a11y-", dir=seat.base))
    os.chown(runtime, seat.user.uid, seat.user.gid)
    env = {"PATH": "/usr/bin:/bin", "DISPLAY": seat.desktop.display, "DBUS_SESSION_BUS_ADDRESS": seat.bus_address,
           "XDG_RUNTIME_DIR": str(runtime), "HOME": str(seat.home)}
    if (owner := a11y_owner(seat)) is not None:  # one the daemon started at an earlier reset: the user's
        os.kill(owner, signal.SIGKILL)
    launcher = subprocess.Popen([*as_seat_user(seat), LAUNCHER, "--launch-immediately"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_until(lambda: a11y_owner(seat) == launcher.pid, 30, "the user's launcher to own org.a11y.Bus")
        report = call(seat, "reset", seat=SEAT)
        assert report["processes"] >= 1
        assert launcher.poll() is not None  # ended, not spared for the name it owned
        fresh = a11y_owner(seat)
        assert fresh is not None and fresh != launcher.pid and os.stat(f"/proc/{fresh}").st_uid == seat.user.uid
        # The registry answers on the bus the fresh launcher hands out: the daemon can read targets.
        address = subprocess.run(["dbus-send", f"--bus={seat.bus_address}", "--print-reply=literal",
                                  "--dest=org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress"],
                                 capture_output=True, text=True, timeout=15).stdout.strip()
        assert address
        registry = subprocess.run(["dbus-send", f"--bus={address}", "--print-reply=literal",
                                   "--dest=org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                                   "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible",
                                   "string:ChildCount"], capture_output=True, text=True, timeout=15)
        assert registry.returncode == 0, registry.stderr
        # Ended by the user before the next reset: started again all the same.
        os.kill(fresh, signal.SIGKILL)
        call(seat, "reset", seat=SEAT)
        again = a11y_owner(seat)
        assert again is not None and again != fresh
    finally:
        stop_process(launcher)


def test_a_user_owning_org_a11y_bus_is_ended_and_root_writes_through_none_of_its_links(seat: SessionSeat,
                                                                                     tmp_path: Path) -> None:
    outside = tmp_path / "root-owned.txt"  # root's (the tests run as root), outside the home
    outside.write_bytes(b"root's own bytes\n")
    before = outside.stat()
    script = seat.base / "squatter.py"
    script.write_text(_SQUATTER)
    env = {"PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": seat.bus_address, "HOME": str(seat.home)}
    squatter = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, str(script), str(seat.home), str(outside)],
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: a11y_owner(seat) == squatter.pid, 30, "the squatter to own org.a11y.Bus")
        wait_until(lambda: (seat.home / "ü 日本").is_symlink(), 30, "the squatter to plant its links")
        call(seat, "reset", seat=SEAT)
        assert not alive(squatter.pid)  # not spared for the name it owned
        assert outside.read_bytes() == b"root's own bytes\n"
        assert (outside.stat().st_mtime_ns, outside.stat().st_uid) == (before.st_mtime_ns, before.st_uid)
        assert tree_hash(seat.home) == tree_hash(seat.template)
        owner = a11y_owner(seat)  # a real launcher again, not the squatter
        assert owner is not None and owner != squatter.pid
    finally:
        stop_process(squatter)
    assert squatter.poll() is not None


def test_a_link_planted_while_the_template_is_copied_is_never_written_through(seat: SessionSeat,
                                                                              tmp_path: Path) -> None:
    """Should anything still plant links during the copy (here the test itself, which no reset ends), root's
    copy goes into a directory of its own and is renamed in: a link is replaced, never followed."""
    outside = tmp_path / "root-owned.txt"
    outside.write_bytes(b"root's own bytes\n")
    stop = threading.Event()

    def plant() -> None:
        path, new = seat.home / "ü 日本", seat.home / ".planted"
        while not stop.is_set():
            try:
                new.symlink_to(outside)
                os.replace(new, path)
            except OSError:
                with contextlib.suppress(OSError):
                    new.unlink()

    planter = threading.Thread(target=plant)
    planter.start()
    try:
        for _ in range(10):
            call(seat, "reset", seat=SEAT)
            assert outside.read_bytes() == b"root's own bytes\n"
    finally:
        stop.set()
        planter.join()
    call(seat, "reset", seat=SEAT)
    assert tree_hash(seat.home) == tree_hash(seat.template)


def name_owner(seat: SessionSeat, name: str) -> int | None:
    reply = bus_call(seat.bus_address, "org.freedesktop.DBus.GetConnectionUnixProcessID", f"string:{name}")
    return int(reply.stdout.split()[-1]) if reply.returncode == 0 else None


def launcher_tree(seat: SessionSeat) -> set[int]:
    """The accessibility launcher that owns org.a11y.Bus now and every process below it (none if nobody owns it):
    once the seat had a launcher of its user's, the reset starts a fresh one after the sweep."""
    owner = a11y_owner(seat)
    if owner is None:
        return set()
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    tree, grown = {owner}, True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    return tree


def reset_ends_every_process_of_the_user(seat: SessionSeat) -> None:
    """A reset, after which no process of the seat's user that ran before it is left, and none at all but the fresh
    accessibility launcher the reset starts, if the seat had one."""
    before = set(session_pids(seat.user.uid))
    call(seat, "reset", seat=SEAT)
    after = set(session_pids(seat.user.uid))
    assert not before & after, before & after
    assert after <= launcher_tree(seat), after


def test_after_the_reset_no_process_of_the_seat_user_is_left_not_one_owning_names_on_the_bus(
        seat: SessionSeat) -> None:
    script = seat.base / "owner.py"
    script.write_text(_OWNER)
    env = {"PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": seat.bus_address, "HOME": str(seat.home)}
    owner = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, str(script)], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: name_owner(seat, "org.cud.Squat") == owner.pid, 30, "the program to own its name")
        wait_until(lambda: name_owner(seat, "org.cud.Squat.Child") is not None, 30, "its child to own its name")
        assert len(session_pids(seat.user.uid)) >= 2
        reset_ends_every_process_of_the_user(seat)  # none spared: neither for a name nor as the bus
        assert name_owner(seat, "org.cud.Squat") is None and name_owner(seat, "org.cud.Squat.Child") is None
        # The bus is root's: still there, still the one listening, still answering.
        assert seat.bus.poll() is None and listening(seat.bus_address) == (seat.bus.pid, 0)
        assert bus_call(seat.bus_address, "org.freedesktop.DBus.GetId").returncode == 0
    finally:
        stop_process(owner)


def test_the_seat_user_can_neither_end_the_bus_nor_listen_at_its_address(seat: SessionSeat) -> None:
    """The bus is root's, its socket in a directory of root's: the seat's user cannot put a program of its own
    where the daemon and the session's applications look for the bus."""
    script = seat.base / "takeover.py"
    script.write_text(TAKEOVER)
    path = seat.bus_address.removeprefix("unix:path=")
    attacker = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, str(script), str(seat.bus.pid), path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        assert attacker.stdout is not None
        tried = json.loads(attacker.stdout.readline())
        assert tried == {"kill": "Operation not permitted", "rename": "Permission denied",
                         "unlink": "Permission denied", "listen": "Address already in use"}, tried
        assert seat.bus.poll() is None and listening(seat.bus_address) == (seat.bus.pid, 0)
        reset_ends_every_process_of_the_user(seat)
        assert listening(seat.bus_address) == (seat.bus.pid, 0)
        assert bus_call(seat.bus_address, "org.freedesktop.DBus.GetId").returncode == 0
    finally:
        stop_process(attacker)
        if attacker.stdout is not None:
            attacker.stdout.close()
