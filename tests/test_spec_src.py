"""A spec's files (setup ``src``, check ``equals``) are confined to the spec's folder, links resolved.

The layout, in a fresh folder: ``spec/`` holds the spec file, ``in.txt``, ``sub/deep.txt``, a link
``link_in`` to ``in.txt``, a link ``sub/up`` to ``spec/`` itself, a link ``link_out`` to ``../out.txt``
and a link ``dirlink_out`` to ``..``; ``out.txt`` is beside ``spec/``. A name that resolves outside
``spec/`` (an absolute path, a ``..`` climbing out, a link pointing out) is refused by
:func:`cud.spec.load.load_spec`, the message naming the key, the value, where it resolves, the spec
file and ``--allow-files-outside``; with ``allow_outside`` it is read. A link swapped to point out
between the check and the open is caught on the opened file. One case goes through a real daemon:
``cuctl submit --spec`` refuses, and with ``--allow-files-outside`` the file lands in the seat's home.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.spec.load import load_spec
from tests.support.daemon import cuctl, scenario
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

FILES = {"spec/in.txt": b"inside\n", "spec/sub/deep.txt": b"deep\n", "out.txt": b"outside secret\n"}
LINKS = {"spec/link_in": "in.txt", "spec/sub/up": "..", "spec/link_out": "../out.txt", "spec/dirlink_out": ".."}


def make_layout(root: Path) -> Path:
    """The layout above under ``root``; its ``spec/`` folder."""
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for name, target in LINKS.items():
        (root / name).symlink_to(target)
    return root / "spec"


def write_spec(folder: Path, src: str, *, key: str = "src") -> Path:
    """A spec in ``folder`` naming ``src`` as a setup file's ``src`` (or as a check's ``equals``)."""
    quoted = json.dumps(src)
    if key == "src":
        body = f'[[setup]]\nfiles = [{{ src = {quoted}, dest = "got.txt" }}]\n'
    else:
        body = f'[[checks]]\nfile = "got.txt"\nequals = {quoted}\n'
    spec = folder / "s.toml"
    spec.write_text(f'prompt = "say done"\n{body}')
    return spec


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_layout(tmp_path)


INSIDE = [("in.txt", b"inside\n"), ("sub/deep.txt", b"deep\n"), ("link_in", b"inside\n"),
          ("sub/up/in.txt", b"inside\n"), ("sub/../in.txt", b"inside\n")]
OUTSIDE = ["../out.txt", "link_out", "dirlink_out/out.txt", "sub/../../out.txt", "sub/up/../out.txt"]


@pytest.mark.parametrize(("src", "data"), INSIDE)
def test_a_file_inside_the_folder_is_read(folder: Path, src: str, data: bytes) -> None:
    spec, files = load_spec(write_spec(folder, src))
    assert files == {src: data}


@pytest.mark.parametrize("key", ["src", "equals"])
@pytest.mark.parametrize("src", [*OUTSIDE, "ABSOLUTE"])
def test_a_file_outside_the_folder_is_refused_naming_the_option(folder: Path, src: str, key: str) -> None:
    if src == "ABSOLUTE":
        src = str(folder.parent / "out.txt")
    spec = write_spec(folder, src, key=key)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    message = caught.value.message
    resolved = str((folder.parent / "out.txt").resolve())
    for words in (repr(src), repr(resolved), repr(str(spec)), "--allow-files-outside",
                  "setup[0].files[0].src" if key == "src" else "checks[0].equals"):
        assert words in message, message
    assert caught.value.details["option"] == "--allow-files-outside"
    assert load_spec(spec, allow_outside=True)[1] == {src: b"outside secret\n"}


def test_the_spec_file_reached_through_a_linked_folder_keeps_that_folder(tmp_path: Path) -> None:
    folder = make_layout(tmp_path)
    (tmp_path / "alias").symlink_to("spec")
    write_spec(folder, "sub/deep.txt")
    assert load_spec(tmp_path / "alias" / "s.toml")[1] == {"sub/deep.txt": b"deep\n"}
    write_spec(folder, "../out.txt")
    with pytest.raises(SpecError, match="--allow-files-outside"):
        load_spec(tmp_path / "alias" / "s.toml")


def test_a_link_swapped_to_point_out_after_the_check_is_refused(folder: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The race, made to happen: right after the name is resolved (and found inside), the link is
    # swapped for one pointing out, the way another process could; the file opened is then outside.
    link = folder / "moving"
    link.symlink_to("in.txt")
    spec = write_spec(folder, "moving")
    real_realpath = os.path.realpath

    def then_swap(path: str | os.PathLike[str], **kwargs: bool) -> str:
        resolved = real_realpath(path, **kwargs)
        if Path(path).name == "moving" and link.readlink() == Path("in.txt"):
            link.unlink()
            link.symlink_to("../out.txt")
        return resolved

    monkeypatch.setattr(os.path, "realpath", then_swap)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "'moving'" in caught.value.message and "out.txt" in caught.value.message, caught.value.message


SEGMENT = st.sampled_from(["..", ".", "sub", "up", "spec", "link_in", "link_out", "dirlink_out", "in.txt",
                           "deep.txt", "out.txt"])


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_layout(tmp_path_factory.mktemp("layout"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(SEGMENT, min_size=1, max_size=5), st.booleans())
@example(["..", "out.txt"], False)
@example(["dirlink_out", "spec", "in.txt"], False)  # out and back in: inside
@example(["sub", "up", "link_out"], False)
def test_any_name_is_read_exactly_when_it_resolves_inside(layout: Path, segments: list[str], absolute: bool) -> None:
    src = os.path.join(str(layout) if absolute else "", *segments)
    target = (layout / src).resolve()  # the oracle: pathlib's resolve, not the code's realpath
    spec = layout / "s.toml"
    spec.write_text(f'prompt = "say done"\n[[setup]]\nfiles = [{{ src = {json.dumps(src)}, dest = "got.txt" }}]\n')
    try:
        data: bytes | None = (layout / src).read_bytes()  # what the name gives, read as the OS reads it
    except OSError:
        data = None
    if target.is_relative_to(layout.resolve()):
        if data is not None:
            assert load_spec(spec)[1] == {src: data}
        else:
            with pytest.raises(SpecError, match="cannot be read"):
                load_spec(spec)
        return
    with pytest.raises(SpecError, match="--allow-files-outside") as caught:
        load_spec(spec)
    assert repr(str(target)) in caught.value.message
    if data is not None:
        assert load_spec(spec, allow_outside=True)[1] == {src: data}


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, scenario({"message": "done"}, look_first=False)) as s:
        yield s


def test_cuctl_submit_refuses_a_file_outside_and_takes_it_with_the_option(seat: SpecSeat) -> None:
    (seat.specs / "outside.txt").write_text("not the spec's\n")
    (seat.specs / "suite").mkdir()
    spec = seat.write("suite/s.toml", 'prompt = "say done"\nseat = "s1"\nreset = false\n'
                                      '[[setup]]\nfiles = [{ src = "../outside.txt", dest = "landed.txt" }]\n')
    refused = cuctl(seat.daemon.socket, "submit", "--spec", str(spec), "--json", timeout=60)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "'../outside.txt'" in refused.stderr and "--allow-files-outside" in refused.stderr, refused.stderr
    assert not (seat.home / "landed.txt").exists()
    code, task = seat.submit(spec, "--allow-files-outside")
    assert code == 0 and task["state"] == "succeeded", task
    assert (seat.home / "landed.txt").read_text() == "not the spec's\n"
