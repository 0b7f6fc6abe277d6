"""The session's runtime directory and a command's working directory against a seat user who plants links there.

Root writes the launched programs' log and the X cookie copy into the runtime directory, and used to enter a
command's working directory by name before it became the user: a user who swaps a link in at the right moment
must get no file of root's anywhere, no daemon stuck on a FIFO, no seat left dirty by a deep tree, and no
working directory it could not reach itself (docs/sessions.md, "The runtime directory").

One real daemon for the module (tests/support/session_seat.py) with a real seat user; every link planted points
at a directory of root's this test made in its own temporary directory.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.cuctl.client import Client, RemoteError
from cud.protocol import FINAL_STATES
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.session_seat import SEAT, SessionSeat, as_seat_user, session_seat
from tests.support.swapper import swapping

SECRET = "only-root-may-read-this"


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SessionSeat]:
    base = Path(tempfile.mkdtemp(prefix="cud-runtime-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(seat_users.make(), base) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def call(where: SessionSeat, kind: str, *, timeout: float = 120, **fields: object) -> dict[str, object]:
    with Client(where.daemon.socket, timeout=timeout) as client:
        return client.call(kind, **fields)


def runtime_of(seat: SessionSeat) -> Path:
    done = call(seat, "exec", seat=SEAT, argv=["/bin/sh", "-c", 'printf %s "$XDG_RUNTIME_DIR"'], timeout=30)
    return Path(base64.b64decode(str(done["stdout"])).decode())


def as_user(seat: SessionSeat, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*as_seat_user(seat), "/bin/sh", "-c", script, "sh", *args], capture_output=True,
                          text=True, timeout=60)


def submit_launch(seat: SessionSeat, folder: Path) -> int:
    """A task whose setup launches a program (no reset first: the runtime directory stays as the user left it)."""
    spec = folder / "spec.toml"
    spec.write_text('prompt = "never mind"\nreset = false\n[[setup]]\nlaunch = ["/bin/echo", "launched"]\n')
    with Client(seat.daemon.socket, timeout=60) as client:
        return int(client.call("submit", **submit_fields(*load_spec(spec)))["id"])


def wait_ended(seat: SessionSeat, task: int) -> str:
    """The task's end state; every question to the daemon bounded, so a daemon that hangs fails the test."""
    states: list[str] = []

    def ended() -> bool:
        states.append(str(call(seat, "show", timeout=30, id=task)["state"]))
        return states[-1] in FINAL_STATES

    wait_until(ended, 120, f"task {task} to end")
    return states[-1]


def roots_dir(folder: Path, name: str, mode: int) -> Path:
    path = folder / name
    path.mkdir()
    path.chmod(mode)
    return path


def test_a_runtime_directory_swapped_for_a_link_gets_no_file_of_roots(seat: SessionSeat, tmp_path: Path) -> None:
    target = roots_dir(tmp_path, "roots", 0o755)
    runtime = runtime_of(seat)
    moved = runtime.with_name(runtime.name + ".moved")
    as_user(seat, 'mv "$1" "$2" && ln -s "$3" "$1"', str(runtime), str(moved), str(target))
    try:
        task = submit_launch(seat, tmp_path)
        wait_ended(seat, task)
        call(seat, "exec", seat=SEAT, argv=["/bin/true"], timeout=30)  # the X cookie copy, again
        assert sorted(p.name for p in target.iterdir()) == []
    finally:
        if runtime.is_symlink():
            runtime.unlink()
        if moved.is_dir() and not moved.is_symlink():
            moved.rename(runtime)
    call(seat, "reset", seat=SEAT)


def test_a_fifo_at_the_log_neither_hangs_the_daemon_nor_is_written(seat: SessionSeat, tmp_path: Path) -> None:
    runtime = runtime_of(seat)
    fifo = runtime / "launched.log"
    made = as_user(seat, 'rm -f "$1" && mkfifo "$1"', str(fifo))
    assert made.returncode == 0, made.stderr
    try:
        task = submit_launch(seat, tmp_path)
        state = wait_ended(seat, task)
        assert call(seat, "ping", timeout=30) is not None
        assert state == "failed" and stat.S_ISFIFO(os.lstat(fifo).st_mode), state
        assert "launched.log" in str(call(seat, "show", timeout=30, id=task)), "the refusal names the log"
    finally:
        # On a daemon that blocked opening the FIFO, a reader lets it go on (and the module's later tests run).
        if fifo.exists() and stat.S_ISFIFO(os.lstat(fifo).st_mode):
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    call(seat, "reset", seat=SEAT, timeout=120)


def test_a_3000_deep_tree_in_the_runtime_directory_is_removed_by_the_reset(seat: SessionSeat) -> None:
    runtime = runtime_of(seat)
    fd = os.open(runtime, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for _ in range(3000):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
            os.fchown(fd, seat.user.uid, seat.user.gid)
    finally:
        os.close(fd)
    call(seat, "reset", seat=SEAT)
    assert not runtime.exists()
    assert runtime_of(seat) != runtime
    assert call(seat, "seats")[0]["state"] == "idle"  # type: ignore[index]


def test_a_working_directory_swapped_for_a_link_is_never_entered(seat: SessionSeat, tmp_path: Path) -> None:
    """The user trades its directory ``w`` with a link to a directory of root's it cannot reach (behind a 0700 one)
    as fast as it can while commands run in ``w``: each is refused or runs in ``w``, never behind the link."""
    vault = roots_dir(tmp_path, "vault", 0o700)
    room = roots_dir(vault, "room", 0o755)
    (room / "secret.txt").write_text(SECRET)
    as_user(seat, 'mkdir "$1/w" && ln -s "$2" "$1/w_link"', str(seat.home), str(room))
    ran, refused = [], 0
    with swapping(seat.user, seat.home, "w", "w_link"):
        for _ in range(300):
            try:
                done = call(seat, "exec", seat=SEAT, cwd="w", timeout=30,
                            argv=["/bin/sh", "-c", "/bin/pwd; /bin/cat secret.txt 2>/dev/null; true"])
            except RemoteError:
                refused += 1  # the walk met the link: it leads out of the home
                continue
            ran.append(base64.b64decode(str(done["stdout"])).decode())
            assert SECRET not in ran[-1] and str(vault) not in ran[-1], ran[-1]
    # pwd names the directory where it is when it asks: it may be trading its name at that moment.
    inside = (f"{seat.home}/w\n", f"{seat.home}/w_link\n")
    assert ran and all(out in inside for out in ran), (refused, ran[:5])
    call(seat, "reset", seat=SEAT)
