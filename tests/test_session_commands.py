"""Commands in a seat's session: as its user, never through a shell, bounded in time and output."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.daemon.session.processes import SeatSession, SessionPlaces
from cud.daemon.session.sweep import session_pids
from cud.daemon.session.user import SeatUser
from cud.errors import PathRefused, SessionError
from tests.support.seat_users import SeatUsers, make_home

#: One loop for the module, as in the daemon: a launched program is reaped by a task of the loop it began on.
_RUNNER = asyncio.Runner()


@pytest.fixture(scope="module")
def session(seat_users: SeatUsers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeatSession]:
    user = seat_users.make()
    base = tmp_path_factory.mktemp("cmd")
    base.chmod(0o755)
    home = make_home(base, user)
    session = SeatSession("cmds", user, home, SessionPlaces(None, "unix:path=/nonexistent/bus", None))
    yield session
    run(session.reset())
    run(_reaped(session))
    session.close()
    _RUNNER.close()


async def _reaped(session: SeatSession) -> None:
    """Until the reapers of what was launched have seen it end."""
    deadline = time.monotonic() + 10
    while session.launched and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


def run(coro: object) -> object:
    return _RUNNER.run(coro)  # type: ignore[arg-type]


def test_runs_as_the_seat_user_in_its_session(session: SeatSession) -> None:
    run(session.write_file("sub/.keep", b""))
    user: SeatUser = session.account
    done = run(session.run(["/usr/bin/id", "-u"], timeout=10))
    assert done.exit_code == 0 and done.stdout.decode().strip() == str(user.uid)
    assert user.uid != 0
    env = run(session.run(["/usr/bin/env"], timeout=10)).stdout.decode().splitlines()
    assert f"HOME={session.home.root}" in env
    assert f"USER={session.user}" in env and f"LOGNAME={session.user}" in env
    assert "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/bus" in env and f"CUD_SEAT={session.seat}" in env
    assert not any(line.startswith(("OPENAI_API_KEY=", "CUD_SOCKET=")) for line in env)
    assert run(session.run(["/bin/pwd"], timeout=10)).stdout.decode().strip() == str(session.home.root)
    assert run(session.run(["/bin/pwd"], timeout=10, cwd="sub")).stdout.decode().strip() == str(
        session.home.root / "sub")


def test_no_shell_unless_the_argv_names_one(session: SeatSession) -> None:
    done = run(session.run(["/bin/echo", "$HOME; touch pwned", "`id`"], timeout=10))
    assert done.stdout == b"$HOME; touch pwned `id`\n"
    assert not (session.home.root / "pwned").exists()
    shell = run(session.run(["/bin/sh", "-c", "echo $HOME; exit 7"], timeout=10))
    assert (shell.exit_code, shell.stdout.decode().strip()) == (7, str(session.home.root))


def test_stdin_output_cap_and_exit_status(session: SeatSession) -> None:
    done = run(session.run(["/bin/cat"], timeout=10, stdin="ü\n".encode() * 100_000))
    assert done.exit_code == 0 and done.stdout == "ü\n".encode() * 100_000 and not done.truncated
    capped = run(session.run(["/bin/sh", "-c", "head -c 300000 /dev/zero; echo oops >&2; exit 3"], timeout=10,
                             max_output=1000))
    assert (capped.exit_code, len(capped.stdout), capped.stderr, capped.truncated) == (3, 1000, b"oops\n", True)


def test_a_timeout_kills_the_whole_group(session: SeatSession) -> None:
    done = run(session.run(["/bin/sh", "-c", "sleep 300 & sleep 300; echo never"], timeout=0.5))
    assert done.timed_out and done.exit_code is None and done.stdout == b""
    deadline = time.monotonic() + 10
    while any(_cmdline(pid) == b"sleep\x00300\x00" for pid in session_pids(session.account.uid)):
        assert time.monotonic() < deadline, "the sleeps of the timed-out group still run"
        time.sleep(0.05)


def test_launch_detaches_into_its_own_session(session: SeatSession) -> None:
    pid = run(session.launch(["/bin/sh", "-c", "echo launched-output; exec sleep 300"]))
    assert os.stat(f"/proc/{pid}").st_uid == session.account.uid
    assert os.getsid(pid) == pid
    log = session.runtime_dir / "launched.log"
    deadline = time.monotonic() + 10
    while b"launched-output" not in (log.read_bytes() if log.exists() else b""):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    report = run(session.reset())
    assert report.processes >= 1 and pid not in session_pids(session.account.uid)


@pytest.mark.parametrize(("argv", "cwd", "error", "words"), [
    ([], None, SessionError, "non-empty list of strings"),
    (["/bin/true", "a\x00b"], None, SessionError, "NUL"),
    (["/nonexistent/program"], None, SessionError, "'/nonexistent/program' did not start"),
    (["/bin/true"], "../", PathRefused, "'..'"),
    (["/bin/true"], "etc_link", PathRefused, "leads out"),
])
def test_bad_commands_are_refused_by_name(session: SeatSession, argv: list[str], cwd: str | None,
                                         error: type[Exception], words: str) -> None:
    run(session.write_file("sub/.keep", b""))
    if not (session.home.root / "etc_link").is_symlink():
        os.symlink("/etc", session.home.root / "etc_link")
    with pytest.raises(error, match=words.replace("(", r"\(")):
        run(session.run(argv, timeout=5, cwd=cwd))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
