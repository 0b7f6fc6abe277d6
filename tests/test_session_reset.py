"""The reset: after apps, files, detached processes, D-Bus activation and the clipboard, the seat is clean again.

One real daemon for the module (tests/support/session_seat.py): openbox on Xvfb, a
session bus run by root, admitting the seat's user, that may activate a service, a
home and its template. Clean means: no X client on the display but the window manager
(and the daemon and this test, which read it), no process of the seat's user at all
(the session bus is root's, and still answers), a home whose tree hash (paths, types, modes, symlink targets, contents) is the
template's, CLIPBOARD and PRIMARY without an owner, and the directory beside the
home untouched.
"""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from Xlib.display import Display
from Xlib.ext import res

from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client
from cud.daemon.session.sweep import session_pids
from cud.daemon.session.user import SeatUser
from cud.errors import CudError
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.daemon import cuctl, json_out
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers, tree_hash
from tests.support.session_seat import SEAT, SessionSeat, bus_call, session_seat, windows


@pytest.fixture(scope="module")
def operator(seat_users: SeatUsers) -> SeatUser:
    """A user with the operate right and no other (as root; else the tests' own user, who has every right)."""
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, operator: SeatUser) -> Iterator[SessionSeat]:
    base = Path(tempfile.mkdtemp(prefix="cud-reset-", dir="/tmp"))
    base.chmod(0o755)
    # nobody may submit, not operate; the operator may operate, not submit.
    access = (f'[access]\nsubmit_users = ["nobody"]\noperate_users = ["{operator.name}"]\n'
              "[sessions]\nmax_file_bytes = 100000\nmax_output_bytes = 50000\n")
    try:
        with session_seat(seat_users.make(), base, config=access) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def call(where: SessionSeat, kind: str, **fields: object) -> object:
    with Client(where.daemon.socket, timeout=60) as client:
        return client.call(kind, **fields)


def run(seat: SessionSeat, *argv: str) -> dict[str, object]:
    return call(seat, "exec", seat=SEAT, argv=list(argv), timeout=30)  # type: ignore[return-value]


def x_client_pids(display: str) -> set[int | None]:
    """The process of every client of ``display`` but the server itself."""
    conn = Display(display)
    try:
        clients = conn.res_query_clients().clients
        specs = [{"client": c.resource_base, "mask": res.LocalClientPIDMask} for c in clients if c.resource_base]
        found = {i.spec.client: (i.value[0] if i.value else None) for i in conn.res_query_client_ids(specs).ids}
        return {found.get(c.resource_base) for c in clients if c.resource_base}
    finally:
        conn.close()


def assert_clean(seat: SessionSeat, sentinel_hash: str) -> None:
    drivers = {view["driver_pid"] for view in call(seat, "seats")} - {None}  # type: ignore[attr-defined]
    # openbox, the daemon, its driver process for the seat if it has one ([daemon] driver_processes), us
    infrastructure = {seat.desktop.procs[-1].pid, seat.daemon.proc.pid, *drivers, os.getpid()}
    assert x_client_pids(seat.desktop.display) <= infrastructure
    assert windows(seat.desktop.display) == []
    assert session_pids(seat.user.uid) == []
    assert seat.bus.poll() is None and bus_call(seat.bus_address, "org.freedesktop.DBus.GetId").returncode == 0
    names = bus_call(seat.bus_address, "org.freedesktop.DBus.ListNames").stdout
    assert "org.cud.SessionTest" not in names
    assert tree_hash(seat.home) == tree_hash(seat.template)
    assert seat.home.stat().st_uid == seat.user.uid
    assert all(p.lstat().st_uid == seat.user.uid for p in seat.home.rglob("*"))
    conn = Display(seat.desktop.display)
    try:
        for selection in ("CLIPBOARD", "PRIMARY"):
            assert conn.get_selection_owner(conn.intern_atom(selection)) in (0, None), selection
    finally:
        conn.close()
    assert tree_hash(seat.sentinel) == sentinel_hash


def test_exec_cp_and_clipboard_through_cuctl(seat: SessionSeat, tmp_path: Path) -> None:
    sock = seat.daemon.socket
    assert cuctl(sock, "reset", SEAT).returncode == 0
    done = cuctl(sock, "exec", SEAT, "--", "/bin/sh", "-c", "id -un; echo to-stderr >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, f"{seat.user.name}\n", "to-stderr\n")
    assert cuctl(sock, "exec", SEAT, "--timeout", "1", "--", "/bin/sleep", "30").returncode == 124
    local = tmp_path / "in.txt"
    local.write_text("über — ✓\n" * 1000)
    local.chmod(0o640)
    assert json_out(cuctl(sock, "--json", "cp", str(local), f"{SEAT}:Desktop/in.txt"))["bytes"] == local.stat().st_size
    copied = seat.home / "Desktop" / "in.txt"
    assert copied.read_text() == local.read_text() and copied.stat().st_uid == seat.user.uid
    assert oct(copied.stat().st_mode & 0o777) == oct(0o640)
    back = tmp_path / "back.txt"
    assert cuctl(sock, "cp", f"{SEAT}:notes", str(back)).returncode == 0  # a symlink inside the home, followed
    assert back.read_text() == "first line\n"
    refused = cuctl(sock, "cp", f"{SEAT}:../sentinel/keep.txt", str(tmp_path / "no"))
    assert refused.returncode == 2 and "'..' component" in refused.stderr and "../sentinel/keep.txt" in refused.stderr
    assert cuctl(sock, "clipboard", SEAT, "set", "klip — ü ✓").returncode == 0
    assert cuctl(sock, "clipboard", SEAT, "get").stdout == "klip — ü ✓"
    # Bounded by [sessions], refused by name; an unknown seat is named too.
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 200_000)
    refused = cuctl(sock, "cp", str(big), f"{SEAT}:big.bin")
    assert refused.returncode == 2 and "is 200000 bytes; [sessions] max_file_bytes is 100000" in refused.stderr
    assert not (seat.home / "big.bin").exists()
    loud = cuctl(sock, "exec", SEAT, "--", "/usr/bin/head", "-c", "80000", "/dev/zero")
    assert loud.returncode == 0 and len(loud.stdout) == 50000 and "cut at [sessions] max_output_bytes" in loud.stderr
    assert "no seat named 'nosuch'" in cuctl(sock, "exec", "nosuch", "--", "/bin/true").stderr


def test_the_seats_commands_never_see_the_daemons_api_key(seat: SessionSeat) -> None:
    """Issue 41, item 5: the seat's user runs the model's commands; the daemon (its OPENAI_API_KEY set) passes
    none of its environment to them, and its own /proc environ is root's."""
    sock, key = seat.daemon.socket, seat.daemon.api_key
    env = cuctl(sock, "exec", SEAT, "--", "/usr/bin/env")
    assert env.returncode == 0 and f"USER={seat.user.name}" in env.stdout.splitlines()
    assert key not in env.stdout and "OPENAI_API_KEY" not in env.stdout and "OPENAI_BASE_URL" not in env.stdout
    assert seat.daemon.proc is not None
    peek = cuctl(sock, "exec", SEAT, "--", "/bin/cat", f"/proc/{seat.daemon.proc.pid}/environ")
    assert peek.returncode != 0 and key not in peek.stdout


def test_the_reset_leaves_a_clean_seat(seat: SessionSeat) -> None:
    sentinel = tree_hash(seat.sentinel)
    call(seat, "reset", seat=SEAT)
    # Applications with windows, a dialog left open, an editor on a file of the home; processes
    # that detach every way; D-Bus activation; files of every kind; the clipboard.
    apps = ["xterm -title session-xterm &", "zenity --info --text 'left open' &", "setsid sleep 1000 &",
            "nohup sleep 1000 >/dev/null 2>&1 &", "(sleep 1000 &) &"]
    if shutil.which("mousepad"):
        apps.append("mousepad Desktop/notes.txt &")
    run(seat, "/bin/sh", "-c", " ".join(apps) + " true")
    started = run(seat, "/usr/bin/dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                  "/org/freedesktop/DBus", "org.freedesktop.DBus.StartServiceByName", "string:org.cud.SessionTest",
                  "uint32:0")
    assert started["exit_code"] == 0, base64.b64decode(started["stderr"])  # type: ignore[arg-type]
    run(seat, "/bin/sh", "-c", "mkfifo made.fifo; ln -s /etc/passwd out-link; mkdir -p a/b/c/d/e/f;"
                               " echo x > a/b/c/d/e/f/deep; chmod 000 a/b; echo changed >> Desktop/notes.txt;"
                               " rm -rf bin; chmod 700 .")
    call(seat, "clipboard", seat=SEAT, text="copied text")
    wanted = 3 if shutil.which("mousepad") else 2
    wait_until(lambda: len(windows(seat.desktop.display)) >= wanted, 30, f"{wanted} windows of the session")
    assert len(session_pids(seat.user.uid)) >= 6
    report = call(seat, "reset", seat=SEAT)
    assert report["processes"] >= 6  # type: ignore[index]
    assert_clean(seat, sentinel)
    assert cuctl(seat.daemon.socket, "clipboard", SEAT, "get").stdout == ""


_STEPS = st.sampled_from([
    ("/bin/sh", "-c", "sleep 1000 & true"),                            # a fork
    ("/bin/sh", "-c", "(sleep 1000 &) & true"),                        # a double fork: a daemon
    ("/usr/bin/setsid", "-f", "/bin/sleep", "1000"),                   # its own session
    ("/bin/sh", "-c", "nohup sleep 1000 >/dev/null 2>&1 & true"),      # nohup
    ("/bin/sh", "-c", "mkfifo f$$ && ln -s f$$ l$$"),                  # a fifo and a symlink
    ("/bin/sh", "-c", "ln -s ../sentinel/keep.txt out$$; ln -s / root$$"),  # symlinks out of the home
    ("/bin/sh", "-c", "mkdir -p d$$/1/2/3/4/5/6/7/8/9 && touch d$$/1/2/3/4/5/6/7/8/9/x"),  # a deep tree
    ("/bin/sh", "-c", "rm -rf Desktop Documents; chmod 000 bin"),     # the template's files changed
    ("/bin/sh", "-c", "ln -sf /etc/shadow notes; echo over > 'ü 日本'"),
    ("xterm", "-e", "sleep", "1000"),                                  # an X client, in the background below
])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEPS, min_size=1, max_size=6))
def test_after_any_commands_each_reset_leaves_the_seat_clean(seat: SessionSeat, steps: list[tuple[str, ...]]) -> None:
    sentinel = tree_hash(seat.sentinel)
    for argv in steps:
        if argv[0] == "xterm":
            with Client(seat.daemon.socket, timeout=60) as client:
                client.call("exec", seat=SEAT, argv=["/usr/bin/setsid", "-f", "/usr/bin/xterm", *argv[1:]], timeout=30)
        else:
            run(seat, *argv)
    call(seat, "reset", seat=SEAT)
    assert_clean(seat, sentinel)


def as_user(user: SeatUser | pwd.struct_passwd) -> list[str]:
    uid, gid = (user.uid, user.gid) if isinstance(user, SeatUser) else (user.pw_uid, user.pw_gid)
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


@pytest.mark.skipif(os.geteuid() != 0, reason="other users' requests need root to be made (setpriv)")
def test_without_the_operate_right_no_exec_cp_clipboard_or_reset(seat: SessionSeat, operator: SeatUser) -> None:
    sock, nobody = seat.daemon.socket, as_user(pwd.getpwnam("nobody"))
    os.chmod(sock, 0o666)  # the socket's mode is the first fence; the rights are the second, tested here
    local = seat.base / "f.txt"  # somewhere nobody may read
    local.write_text("x")
    local.chmod(0o644)
    for argv in (["exec", SEAT, "--", "/usr/bin/id"], ["cp", str(local), f"{SEAT}:f.txt"],
                 ["cp", f"{SEAT}:notes", "-"], ["clipboard", SEAT, "get"], ["clipboard", SEAT, "set", "x"],
                 ["reset", SEAT]):
        refused = cuctl(sock, *argv, prefix=nobody)
        assert refused.returncode == 2, argv
        assert "user 'nobody' (uid 65534) may not" in refused.stderr
        assert "not in [access] operate_users/operate_groups" in refused.stderr, refused.stderr
    assert not (seat.home / "f.txt").exists()
    # A prompt needs no operate right; the operate right alone does not submit.
    assert cuctl(sock, "ping", prefix=nobody).stdout.rstrip().endswith("may submit")
    assert cuctl(sock, "ping", prefix=as_user(operator)).stdout.rstrip().endswith("may operate")
    done = cuctl(sock, "exec", SEAT, "--", "/usr/bin/id", "-un", prefix=as_user(operator))
    assert (done.returncode, done.stdout) == (0, f"{seat.user.name}\n")
    assert "submit_users/submit_groups" in cuctl(sock, "submit", "hi", prefix=as_user(operator)).stderr


_PARTS = st.sampled_from(["..", ".", "", "Desktop", "notes", "dangling", "pipe", "sentinel", "keep.txt", "link",
                          "out", "ü 日本", "x" * 255, "new"])
_CP_PATHS = st.one_of(st.lists(_PARTS, min_size=1, max_size=5).map("/".join),
                      st.lists(_PARTS, min_size=1, max_size=5).map(lambda p: "/" + "/".join(p)),
                      st.builds(lambda p: f"{{home}}/{p}", st.lists(_PARTS, max_size=4).map("/".join)),
                      st.text(max_size=30))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_CP_PATHS)
def test_cp_never_reads_or_writes_outside_the_home(seat: SessionSeat, path: str) -> None:
    path = path.replace("{home}", str(seat.home))
    if not (seat.home / "link").is_symlink():  # symlinks out, planted by the session's user
        (seat.home / "link").symlink_to("../sentinel")
        (seat.home / "out").symlink_to(str(seat.sentinel / "keep.txt"))
    sentinel = tree_hash(seat.sentinel)
    secret = (seat.sentinel / "keep.txt").read_bytes()
    with Client(seat.daemon.socket, timeout=60) as client:
        try:
            client.upload("put", [b"written by cp"], seat=SEAT, path=path, size=13)
        except CudError as exc:
            assert exc.kind in ("path_refused", "not_found", "protocol", "error"), exc.message
    with Client(seat.daemon.socket, timeout=60) as client:
        chunks = Chunks("file")
        try:
            result = client.call("get", chunks, seat=SEAT, path=path)
            assert secret not in chunks.join(result)
        except CudError as exc:
            assert exc.kind in ("path_refused", "not_found", "protocol", "error"), exc.message
    assert tree_hash(seat.sentinel) == sentinel


def test_a_failed_reset_makes_the_seat_unavailable_until_a_reset_succeeds(seat: SessionSeat) -> None:
    sock = seat.daemon.socket
    os.chown(seat.home, 0, 0)  # the home is no longer the seat user's: a reset must not touch it
    try:
        failed = cuctl(sock, "reset", SEAT)
        assert failed.returncode == 2
        assert "the reset of seat 's1' failed" in failed.stderr and "not touching it" in failed.stderr
        view = json_out(cuctl(sock, "--json", "seats"))[0]
        assert view["state"] == "unavailable" and "the reset of seat 's1' failed" in view["error"]
        assert cuctl(sock, "exec", SEAT, "--", "/bin/true").returncode == 0  # still reachable to repair
    finally:
        os.chown(seat.home, seat.user.uid, seat.user.gid)
    # The health checks try the reset again; the seat takes work when one succeeds.
    wait_until(lambda: json_out(cuctl(sock, "--json", "seats"))[0]["state"] == "idle", 60, "the seat to be clean")
    assert_clean(seat, tree_hash(seat.sentinel))



def reset_when_free(seat: SessionSeat) -> subprocess.CompletedProcess[str]:
    """``cuctl reset``, again while the seat is busy: an unavailable seat's health check (every 2 s) retries the
    reset itself, and a reset asked for meanwhile is refused as busy."""
    done: list[subprocess.CompletedProcess[str]] = []

    def free() -> bool:
        done.append(cuctl(seat.daemon.socket, "reset", SEAT))
        return "is busy (a task or a check holds it)" not in done[-1].stderr

    wait_until(free, 60, "a reset not refused as busy")
    return done[-1]


def test_a_template_changed_into_one_a_reset_must_not_copy_refuses_the_reset(seat: SessionSeat) -> None:
    """Issue 41, item 5: the template passed at config load, but its tree can change while the daemon runs; each
    reset checks it again before it touches anything, and the seat is unavailable until it is fit again."""
    sock, template = seat.daemon.socket, seat.template
    user = seat.user
    assert cuctl(sock, "reset", SEAT).returncode == 0
    run(seat, "/bin/sh", "-c", "echo mine > Desktop/kept.txt")
    flaws = [
        (lambda: os.mkfifo(template / "Desktop" / "planted"), lambda: os.unlink(template / "Desktop" / "planted"),
         "it holds 'Desktop/planted', a FIFO: the reset would hand it to the seat's user"),
        (lambda: os.mknod(template / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3)),
         lambda: os.unlink(template / "null"), "it holds 'null', a character device"),
        (lambda: (template / "Desktop").chmod(0o777), lambda: (template / "Desktop").chmod(0o755),
         "'Desktop' in it is writable by its group and others (mode 0777)"),
        (lambda: os.chown(template / "bin" / "hello.sh", user.uid, user.gid),
         lambda: os.chown(template / "bin" / "hello.sh", 0, 0), f"'bin/hello.sh' in it belongs to uid {user.uid}"),
    ]
    for make, undo, words in flaws:
        make()
        try:
            refused = reset_when_free(seat)
            assert refused.returncode == 2, refused
            assert (f"the reset of seat 's1' failed: seat 's1': the template {str(template)!r} is refused: {words}"
                    in refused.stderr), refused.stderr
            assert "the reset did not touch the session" in refused.stderr
            assert (seat.home / "Desktop" / "kept.txt").read_text() == "mine\n"  # nothing was touched
            view = json_out(cuctl(sock, "--json", "seats"))[0]
            assert view["state"] == "unavailable" and words in view["error"], view
        finally:
            undo()
    # Fit again: the next reset runs, and the seat takes work.
    assert reset_when_free(seat).returncode == 0
    assert json_out(cuctl(sock, "--json", "seats"))[0]["state"] == "idle"
    assert_clean(seat, tree_hash(seat.sentinel))


def test_after_a_reset_from_a_0755_template_no_other_user_reads_the_home(seat: SessionSeat, operator: SeatUser,
                                                                         tmp_path: Path) -> None:
    """Review of issue 41, (5): the home is 0700 after every reset, whatever the template's mode (0755 is
    typical): another seat's user (the operator here, a real user of its own) and ``nobody`` can neither list
    the home nor read the template's files or one root put there (``cuctl cp``), though those are 0644."""
    sock, template = seat.daemon.socket, seat.template
    template.chmod(0o755)
    try:
        assert cuctl(sock, "reset", SEAT).returncode == 0
        local = tmp_path / "put.txt"
        local.write_text("root's\n")
        local.chmod(0o644)
        assert cuctl(sock, "cp", str(local), f"{SEAT}:put.txt").returncode == 0
        assert stat.S_IMODE(seat.home.stat().st_mode) == 0o700
        assert stat.S_IMODE((seat.home / "Desktop" / "notes.txt").stat().st_mode) & 0o004  # readable inside
        for name in (operator.name, "nobody"):
            entry = pwd.getpwnam(name)
            for argv in (["/bin/ls", str(seat.home)], ["/bin/cat", str(seat.home / "Desktop" / "notes.txt")],
                         ["/bin/cat", str(seat.home / "put.txt")]):
                done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                                       "--clear-groups", *argv], capture_output=True, text=True, cwd="/")
                assert done.returncode != 0 and "Permission denied" in done.stderr, (name, argv, done)
    finally:
        template.chmod(0o700)
    assert cuctl(sock, "reset", SEAT).returncode == 0


def test_a_cancel_during_a_reset_that_fails_ends_the_task_cancelled(seat: SessionSeat, tmp_path: Path) -> None:
    """Back in the queue, the cancel would be forgotten and the task would run on the next clean seat."""
    sock = seat.daemon.socket
    spec = tmp_path / "spec.toml"
    spec.write_text('prompt = "never reaches the model"\nreset = true\n')
    # A file system mounted in the home: the reset empties it (slowly: many files), then cannot
    # remove the mount point, and fails.
    mount = seat.home / "mounted"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=200k", "cud-test", str(mount)], check=True)
    try:
        for i in range(100):
            folder = mount / f"d{i}"
            folder.mkdir()
            for j in range(600):
                (folder / f"f{j}").touch()
        with Client(sock, timeout=60) as client:
            task = client.call("submit", **submit_fields(*load_spec(spec)))["id"]
            while client.call("show", id=task)["state"] == "queued":
                pass
            client.call("cancel", id=task)
            wait_until(lambda: client.call("show", id=task)["state"] not in ("queued", "running"), 60,
                       "the reset to fail")
            view = client.call("show", id=task)
        assert view["state"] == "cancelled", view
        assert "cancelled by" in (view["reason"] or ""), view
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    wait_until(lambda: json_out(cuctl(sock, "--json", "seats"))[0]["state"] == "idle", 60, "the seat to be clean")
    assert_clean(seat, tree_hash(seat.sentinel))
