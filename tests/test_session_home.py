"""A seat's home: files read and written there, and nothing outside it ever read or written."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.daemon.session.home import SeatHome
from cud.daemon.session.processes import SeatSession, SessionPlaces
from cud.daemon.session.user import SeatUser
from cud.errors import CudError, NotFound, PathRefused
from tests.support.seat_users import SeatUsers, make_home, tree_hash

SECRET = b"the outside's secret"


@pytest.fixture(scope="module")
def user(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def place(user: SeatUser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SeatHome, Path]]:
    """A home full of traps (symlinks out, chains, a fifo) beside an ``outside`` directory holding a secret."""
    base = tmp_path_factory.mktemp("homes")
    base.chmod(0o755)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(SECRET)
    (outside / "dir").mkdir()
    home = make_home(base, user)
    (home / "sub").mkdir()
    (home / "sub" / "file").write_bytes(b"inside")
    os.symlink(str(outside / "secret"), home / "out_abs")
    os.symlink("../outside", home / "out_rel")
    os.symlink(str(outside), home / "sub" / "out_dir")
    os.symlink("chain2", home / "chain1")
    os.symlink("sub/../../outside/secret", home / "chain2")
    os.symlink("sub", home / "in_rel")
    os.symlink(str(home / "sub" / "file"), home / "in_abs")
    os.symlink("loop", home / "loop")
    os.mkfifo(home / "fifo")
    yield SeatHome(home, user.uid, user.gid), outside


def test_write_then_read_back_owned_by_the_user(place: tuple[SeatHome, Path], user: SeatUser) -> None:
    home, _outside = place
    home.write_bytes("Desktop/notes ü.txt", "line — ✓\n".encode(), mode=0o640)
    path = home.root / "Desktop" / "notes ü.txt"
    assert path.read_bytes() == "line — ✓\n".encode()
    assert (path.stat().st_uid, path.stat().st_gid) == (user.uid, user.gid)
    assert (home.root / "Desktop").stat().st_uid == user.uid
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert home.read_bytes("Desktop/notes ü.txt", max_bytes=100) == "line — ✓\n".encode()
    # Replaced at once, keeping its mode; no temporary file left beside it.
    home.write_bytes("Desktop/notes ü.txt", b"two")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in (home.root / "Desktop").iterdir()) == ["notes ü.txt"]
    # Symlinks that stay inside are followed; the path reached is inside.
    assert home.read_bytes("in_rel/file", max_bytes=100) == b"inside"
    assert home.read_bytes("in_abs", max_bytes=100) == b"inside"
    assert home.resolve("in_rel/file") == home.root / "sub" / "file"
    assert home.resolve(str(home.root / "sub")) == home.root / "sub"
    assert home.resolve("new/dir/file", for_write=True) == home.root / "new" / "dir" / "file"


@pytest.mark.parametrize(("path", "words"), [
    ("../outside/secret", "'..' component"),
    ("sub/../../outside/secret", "'..' component"),
    ("/etc/passwd", "outside the seat's home"),
    ("out_abs", "points to"),
    ("out_rel/secret", "leads out"),
    ("sub/out_dir/new", "points to"),
    ("chain1", "leads out"),
    ("loop", "more than 40 symlinks"),
    ("fifo", "is a fifo"),
    ("sub", "is a directory"),
    ("", "the seat's home itself"),
    ("a\x00b", "NUL"),
    ("x" * 300, "too long"),
    ("sub/file/below", "not a directory"),
])
def test_paths_that_lead_out_or_are_no_file_are_refused_naming_the_path(place: tuple[SeatHome, Path], path: str,
                                                                       words: str) -> None:
    home, _outside = place
    with pytest.raises(PathRefused) as refused:
        home.read_bytes(path, max_bytes=1000)
    assert words in refused.value.message
    assert repr(path)[:40].strip("'") in refused.value.message or path == "x" * 300


def test_missing_files_and_large_files(place: tuple[SeatHome, Path]) -> None:
    home, _outside = place
    with pytest.raises(NotFound, match="no 'nothing/here' in the seat's home"):
        home.read_bytes("nothing/here", max_bytes=10)
    home.write_bytes("big", b"x" * 1000)
    with pytest.raises(CudError, match="'big' in the seat's home is 1000 bytes; the limit is 999"):
        home.read_bytes("big", max_bytes=999)


_NAMES = st.sampled_from(["sub", "file", "out_abs", "out_rel", "out_dir", "chain1", "chain2", "in_rel", "in_abs",
                          "loop", "fifo", "..", ".", "", "outside", "secret", "new", "ü日本", "x" * 256, " "])
_PATHS = st.one_of(
    st.lists(_NAMES, min_size=1, max_size=6).map("/".join),
    st.lists(st.one_of(_NAMES, st.text(min_size=1, max_size=12)), min_size=1, max_size=4).map(
        lambda parts: "/" + "/".join(parts)),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATHS, absolute_home=st.booleans())
@example(path="out_rel/secret", absolute_home=False)
@example(path="in_rel/../out_rel/secret", absolute_home=False)
@example(path="sub/out_dir/secret", absolute_home=True)
def test_nothing_outside_the_home_is_read_or_written(place: tuple[SeatHome, Path], path: str,
                                                    absolute_home: bool) -> None:
    home, outside = place
    if absolute_home and not path.startswith("/"):
        path = f"{home.root}/{path}"
    before = tree_hash(outside)
    for attempt in (lambda: home.write_bytes(path, b"written"),
                    lambda: home.read_bytes(path, max_bytes=1 << 16),
                    lambda: home.resolve(path, for_write=True)):
        try:
            result = attempt()
        except CudError:
            continue
        if isinstance(result, bytes):
            assert SECRET not in result
        if isinstance(result, Path):
            assert result == home.root or result.is_relative_to(home.root), result
    assert tree_hash(outside) == before


def test_session_files_through_the_session(place: tuple[SeatHome, Path], user: SeatUser) -> None:
    home, outside = place
    session = SeatSession("s", user, home.root, SessionPlaces(None, None, None))

    async def go() -> bytes:
        await session.write_file("via/session.txt", b"ok")
        with pytest.raises(PathRefused):
            await session.write_file("out_rel/secret", b"no")
        return await session.read_file("via/session.txt", max_bytes=10)

    assert asyncio.run(go()) == b"ok"
    assert (outside / "secret").read_bytes() == SECRET
