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
from cud.daemon.spec.checks import run_check
from cud.daemon.spec.verdict import collect
from cud.daemon.store.trajectory import Trajectories
from cud.errors import CudError, NotFound, PathRefused, SessionError
from cud.spec.checks import parse_check
from tests.support.seat_users import SeatUsers, make_home, tree_hash
from tests.support.swapper import swapping

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


#: Attempts a race test makes at most, and the swaps it must have met before it may stop.
RACE_ATTEMPTS, RACE_HITS = 100_000, 20


def race_place(home: SeatHome, outside: Path, name: str) -> tuple[Path, Path]:
    """In the home, ``name/d`` (a directory with a file ``f``) beside ``name/e`` (a symlink to a directory outside
    with a file ``f`` holding the secret), both the home's user's."""
    place = home.root / name
    place.mkdir()
    (place / "d").mkdir()
    (place / "d" / "f").write_bytes(b"inside")
    target = outside / name
    target.mkdir()
    (target / "f").write_bytes(SECRET)
    os.symlink(str(target), place / "e")
    for path in (place, place / "d", place / "d" / "f"):
        os.lchown(path, home.uid, home.gid)
    os.lchown(place / "e", home.uid, home.gid)
    return place, target


def test_a_directory_swapped_for_a_symlink_out_mid_walk_never_leads_out(place: tuple[SeatHome, Path],
                                                                       user: SeatUser) -> None:
    """The seat's user swaps ``d`` with a symlink out while the daemon walks through it: each directory's open
    does not follow a symlink (O_NOFOLLOW), so a swap between its lstat and its open is refused, never followed."""
    home, outside = place
    race, target = race_place(home, outside, "race_dir")
    before = tree_hash(target)
    swapped, seen, tried = 0, set(), 0
    with swapping(user, race, "d", "e"):
        while tried < RACE_ATTEMPTS and swapped < RACE_HITS and tree_hash(target) == before:
            tried += 1
            try:
                if tried % 2:
                    home.write_bytes("race_dir/d/f", b"written")
                else:
                    assert home.read_bytes("race_dir/d/f", max_bytes=100) in (b"inside", b"written")
            except CudError as exc:  # never a raw OSError: the swap met is cud's error naming the path
                assert "'race_dir/d/f'" in exc.message, exc.message
                seen.add(exc.message)
                swapped += "changed while it was opened (no longer a directory)" in exc.message
    assert tree_hash(target) == before, f"written outside the home after {tried} attempts"
    assert (target / "f").read_bytes() == SECRET
    assert swapped, f"the harness never swapped between a directory's lstat and its open in {tried} attempts: {seen}"


def test_a_symlink_swapped_mid_check_or_collect_is_could_not_look_naming_the_path(
        place: tuple[SeatHome, Path], user: SeatUser, tmp_path: Path) -> None:
    """``link`` (a symlink to ``target``) trades places with a plain file: the walk's readlink meets a file
    (EINVAL). Each ``file`` check still gives its result, and each collected file its entry: "could not
    look" naming the path, never the task's verdict lost to a raw OSError."""
    home, _outside = place
    race = home.root / "race_link"
    race.mkdir()
    (race / "target").write_bytes(b"inside")
    (race / "plain").write_bytes(b"plain")
    os.symlink("target", race / "link")
    for path in (race, race / "target", race / "plain", race / "link"):
        os.lchown(path, user.uid, user.gid)
    session = SeatSession("s", user, home.root, SessionPlaces(None, None, None))
    check = parse_check("checks[0]", {"file": "race_link/link", "matches": "inside"})
    trajectories = Trajectories(tmp_path)
    why = "path 'race_link/link' in the seat's home changed while it was followed"

    async def go() -> tuple[int, int, int]:
        hits = collected = tried = 0
        while tried < RACE_ATTEMPTS and hits < RACE_HITS:
            tried += 1
            result = await run_check(0, check, session, None, {}, None)  # type: ignore[arg-type]
            assert result["passed"] == (result["observed"] is not None and result["observed"]["text"] == "inside")
            if not result["passed"] and result["observed"] is None:  # the swap met: which step met it varies
                assert result["why"].startswith("could not look: path 'race_link/link' "), result["why"]
                hits += result["why"] == f"could not look: {why}: 'race_link/link' was a symlink, then no longer"
            [kept] = await collect(session, ["race_link/link"], trajectories, 1)
            if kept["error"] is not None:
                assert kept["error"].startswith("path 'race_link/link' "), kept
                collected += 1
            else:
                assert kept["bytes"] in (5, 6)
        return hits, collected, tried

    with swapping(user, race, "link", "plain"):
        hits, collected, tried = asyncio.run(go())
    assert hits, f"the harness never swapped between the walk's lstat and its readlink in {tried} checks"


def test_a_home_swapped_under_the_session_is_refused_naming_it(user: SeatUser,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    """Review of issue 41, (10): the home is opened by its path, so a directory above it swapped for another moves
    every read and write of root's elsewhere. Config load refuses a home below a directory a seat's user can
    write, so here root swaps it (the home itself, then its parent) for a directory of the same user: each walk
    finds it is not the home the session started with and refuses, naming the home; nothing is written there."""
    base = tmp_path_factory.mktemp("swapped")
    base.chmod(0o755)
    parent = base / "p"
    parent.mkdir(mode=0o755)
    root = make_home(parent, user)
    (root / "f").write_bytes(b"the home's")
    os.chown(root / "f", user.uid, user.gid)
    session = SeatSession("s", user, root, SessionPlaces(None, None, None))  # the session starts: home recorded
    home = session.home
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # and closed to everyone but its user at session start
    assert home.read_bytes("f", max_bytes=100) == b"the home's"

    def swapped_to(made: Path) -> None:
        for call in (lambda: home.read_bytes("f", max_bytes=100), lambda: home.write_bytes("g", b"no"),
                     lambda: home.resolve("f")):
            with pytest.raises(SessionError) as refused:
                call()
            assert f"the seat's home {str(home.root)!r} is no longer the directory the session started" in \
                refused.value.message
            assert refused.value.details["home"] == str(home.root)
        assert not (made / "g").exists() and (made / "f").read_bytes() == b"elsewhere"

    # The home itself replaced by another directory of the same user, holding a file of the same name.
    root.rename(base / "old-home")
    made = make_home(parent, user)
    (made / "f").write_bytes(b"elsewhere")
    swapped_to(made)
    # The parent replaced by another holding such a home: the path is the same, the directory is not.
    (made / "f").unlink()
    made.rmdir()
    (base / "old-home").rename(root)
    assert home.read_bytes("f", max_bytes=100) == b"the home's"  # the one recorded, back: fine again
    parent.rename(base / "old-p")
    (base / "p").mkdir(mode=0o755)
    made = make_home(base / "p", user)
    (made / "f").write_bytes(b"elsewhere")
    swapped_to(made)
    with pytest.raises(SessionError, match="no longer the directory the session started"):
        asyncio.run(session.write_file("g", b"no"))
    # A reset takes the home as it finds it (its user's, emptied): the session goes on with that one.
    asyncio.run(session.reset())
    asyncio.run(session.write_file("g", b"now"))
    assert (made / "g").read_bytes() == b"now" and not (made / "f").exists()
    # A home of another owner is refused too, even with nothing recorded yet.
    os.chown(made, 0, 0)
    fresh = SeatHome(made, user.uid, user.gid)
    with pytest.raises(SessionError, match=f"belongs to uid 0, not to its user \\(uid {user.uid}\\)"):
        fresh.read_bytes("f", max_bytes=10)
