"""An existing home with files in it that cud neither made nor took is refused (a reset would empty it), unless
``empty_existing_home`` says the reset may; what cud made or took is recorded in its state directory and accepted
again after a restart, files and all."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.daemon.config import load_config
from cud.daemon.session.taken import RECORD_NAME
from cud.daemon.session.user import SeatUser
from cud.errors import ConfigError
from tests.support.daemon import Daemon, cuctl
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers, make_home, tree_hash
from tests.support.session_seat import SEAT, session_seat


@pytest.fixture(scope="module")
def user(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


def owned(path: Path, user: SeatUser, text: str = "years of work\n") -> Path:
    path.write_text(text)
    if os.geteuid() == 0:
        os.chown(path, user.uid, user.gid)
    return path


def write_config(base: Path, user: SeatUser, home: Path, extra: str = "") -> Path:
    path = base / "cud.toml"
    path.write_text(f'socket = "{base}/state/cud.sock"\nstate_dir = "{base}/state"\n'
                    f'[[seats]]\nname = "s1"\ndisplay = ":1"\nuser = "{user.name}"\nhome = "{home}"\n{extra}')
    return path


def test_a_home_holding_files_cud_did_not_put_there_is_refused(session_dir: Path, user: SeatUser) -> None:
    home = make_home(session_dir, user)
    owned(home / "thesis.txt", user)
    for name in ("b.txt", "c.txt", "d.txt"):
        owned(home / name, user)
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(session_dir, user, home), env={})
    message = str(refused.value)
    assert message.startswith(f"seat 's1': config key 'seats[0].home' = {str(home)!r} is refused: it already holds "
                              "4 entries ('b.txt', 'c.txt', 'd.txt', …) and cud did not make it")
    assert "'seats[0].empty_existing_home = true'" in message
    assert refused.value.details["key"] == "seats[0].home"
    (home / "b.txt").unlink(), (home / "c.txt").unlink(), (home / "d.txt").unlink()
    with pytest.raises(ConfigError, match=r"holds 1 entry \('thesis.txt'\)"):
        load_config(write_config(session_dir, user, home), env={})
    # One seat in top-level keys: the key is named bare.
    single = session_dir / "one.toml"
    single.write_text(f'display = ":1"\nuser = "{user.name}"\nhome = "{home}"\n')
    overrides = {"socket": f"{session_dir}/s", "state_dir": f"{session_dir}/state"}
    with pytest.raises(ConfigError, match="set 'empty_existing_home = true' to let the reset delete them"):
        load_config(single, overrides, env={})
    # The key lets the reset empty it.
    loaded = load_config(write_config(session_dir, user, home, "empty_existing_home = true\n"), env={})
    assert loaded.seats[0].empty_existing_home is True
    single.write_text(single.read_text() + "empty_existing_home = true\n")
    assert load_config(single, overrides, env={}).seats[0].empty_existing_home is True
    # An empty existing home is taken as it is; a missing one is made by the first reset.
    (home / "thesis.txt").unlink()
    assert load_config(write_config(session_dir, user, home), env={}).seats[0].empty_existing_home is False
    assert load_config(write_config(session_dir, user, session_dir / "later"), env={}).seats[0].home


def test_the_key_is_a_boolean_of_a_seat_with_a_session(session_dir: Path, user: SeatUser) -> None:
    home = make_home(session_dir, user)
    with pytest.raises(ConfigError, match=r"'seats\[0\]\.empty_existing_home' must be true or false"):
        load_config(write_config(session_dir, user, home, 'empty_existing_home = "yes"\n'), env={})
    path = session_dir / "bare.toml"
    path.write_text(f'socket = "{session_dir}/s"\nstate_dir = "{session_dir}/state"\n'
                    '[[seats]]\nname = "s1"\ndisplay = ":1"\nempty_existing_home = true\n')
    with pytest.raises(ConfigError, match=r"'seats\[0\]\.empty_existing_home' needs 'seats\[0\]\.user' and "
                                          r"'seats\[0\]\.home'"):
        load_config(path, env={})


def test_the_record_is_the_daemons_and_names_the_directory_itself(session_dir: Path, user: SeatUser) -> None:
    """A home recorded in the state directory is accepted with files in it; a directory made again in its place (a
    new inode) is a stranger; a mark in the home itself (the user's to forge) counts for nothing."""
    home = make_home(session_dir, user)
    owned(home / "thesis.txt", user)
    owned(home / RECORD_NAME, user, json.dumps({str(home): list((home.stat().st_dev, home.stat().st_ino))}))
    with pytest.raises(ConfigError, match="cud did not make it"):
        load_config(write_config(session_dir, user, home), env={})
    state = session_dir / "state"
    state.mkdir(mode=0o700)
    (state / RECORD_NAME).write_text(json.dumps({str(home): [home.stat().st_dev, home.stat().st_ino]}))
    load_config(write_config(session_dir, user, home), env={})
    home.rename(session_dir / "old")  # kept until the new one is made: its inode is not free to be reused
    home = make_home(session_dir, user)
    owned(home / "thesis.txt", user)
    shutil.rmtree(session_dir / "old")
    with pytest.raises(ConfigError, match="cud did not make it"):
        load_config(write_config(session_dir, user, home), env={})


def test_the_daemon_refuses_to_start_naming_the_home_and_the_key(session_dir: Path, user: SeatUser) -> None:
    home = make_home(session_dir, user)
    owned(home / "thesis.txt", user)
    workdir = session_dir / "daemon"
    workdir.mkdir(mode=0o755)
    seat = f'[[seats]]\nname = "s1"\ndisplay = ":1"\nuser = "{user.name}"\nhome = "{home}"\n'
    daemon = Daemon(":1", "http://127.0.0.1:9", workdir=workdir, seats={}, config=seat)
    try:
        proc = daemon.spawn()
        assert proc.wait(timeout=60) != 0
        log = daemon.log_text()
        assert f"config key 'seats[0].home' = {str(home)!r} is refused" in log
        assert "('thesis.txt')" in log and "'seats[0].empty_existing_home = true'" in log
        assert (home / "thesis.txt").read_text() == "years of work\n"
    finally:
        daemon.cleanup()


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cud-taken-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_with_the_key_the_reset_empties_it_and_a_restart_accepts_the_home_cud_took(
        seat_users: SeatUsers, base: Path) -> None:
    with session_seat(seat_users.make(), base, config="empty_existing_home = true\n",
                      home_files={"thesis.txt": "years of work\n"}) as seat:
        daemon = seat.daemon
        assert (seat.home / "thesis.txt").exists()  # the start takes it; only a reset empties it
        record = daemon.state_dir / RECORD_NAME
        assert json.loads(record.read_text()) == {str(seat.home): [seat.home.stat().st_dev, seat.home.stat().st_ino]}
        assert cuctl(daemon.socket, "reset", SEAT).returncode == 0
        assert not (seat.home / "thesis.txt").exists() and tree_hash(seat.home) == tree_hash(seat.template)
        assert json.loads(record.read_text()) == {str(seat.home): [seat.home.stat().st_dev, seat.home.stat().st_ino]}
        assert record.stat().st_mode & 0o077 == 0
        # Without the key, the home holds the template's files: cud's, recorded, so a restart accepts it.
        config = daemon.dir / "cud.toml"
        config.write_text(config.read_text().replace("empty_existing_home = true\n", ""))
        assert "empty_existing_home" not in config.read_text()
        daemon.stop()
        daemon.start()
        assert cuctl(daemon.socket, "reset", SEAT).returncode == 0
        # Without the record, the same home is a stranger's again.
        daemon.stop()
        record.unlink()
        proc = daemon.spawn()
        wait_until(lambda: proc.poll() is not None, 60, "the daemon to refuse its config")
        daemon.proc = None
        assert proc.returncode != 0 and "cud did not make it" in daemon.log_text()
        assert tree_hash(seat.home) == tree_hash(seat.template)
