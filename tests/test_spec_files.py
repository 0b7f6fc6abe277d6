"""A spec's files from the submitter's side: streamed as ``put`` streams one, stored with the task, landing byte-exact.

One seat with a session and one daemon for the module, its ``[sessions]`` spec limits set low
(6 MB a file, 9 MB a spec) so that going over them costs little. The files travel as ``chunk``
messages after the daemon's ``ready`` (docs/specs.md, "Files from the submitter's side"): a
5 MB and a 3 MB fixture land byte-exact in the seat's home; a file or a set over the limits is
refused naming the file, its size and the config key, before any byte is sent; an upload cut
off mid-way leaves no task, no stored file and no spool file; a queued task's files survive a
restart; random sets of files, sized around the chunk boundaries, round-trip byte-exact; eight
clients sending one key with its files at once all get the one task.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import random
import re
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.cuctl.client import Client
from cud.daemon.session.config import SessionLimits, load_session_limits
from cud.errors import ConfigError, SpecError
from cud.fleet.attempt import run_attempt
from cud.protocol import CHUNK_BYTES, chunk_message, decode, encode, request
from cud.spec import parse_spec
from cud.spec.load import load_spec
from cud.spec.wire import file_pieces, submit_fields
from tests.support.daemon import cuctl, scenario
from tests.support.http_files import serve_files
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

DONE = scenario({"message": "done"}, look_first=False)
# A task that holds the seat: its first action waits for an approval nobody gives.
HOLD = scenario({"actions": [{"type": "click", "x": 5, "y": 5, "button": "left"}]}, {"message": "done"},
                look_first=False)
LIMITS = "[sessions]\nmax_spec_file_bytes = 6000000\nmax_spec_total_bytes = 9000000\n"


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, DONE, config=LIMITS, scenarios={"hold": HOLD}) as s:
        yield s


def spec_text(files: dict[str, str], *, reset: bool = True) -> str:
    """A spec that copies each ``src`` to its ``dest`` in the home and checks it there against its fixture."""
    copies = ", ".join(f"{{ src = {quoted(src)}, dest = {quoted(dest)} }}" for src, dest in files.items())
    checks = "".join(f"[[checks]]\nfile = {quoted(dest)}\nequals = {quoted(src)}\n" for src, dest in files.items())
    return (f'prompt = "say done"\nseat = "s1"\nreset = {str(reset).lower()}\n'
            f"[[setup]]\nfiles = [{copies}]\n{checks}")


def quoted(text: str) -> str:
    """A TOML basic string: JSON's, with every character but the escaped ones as is (TOML has no surrogates)."""
    return json.dumps(text, ensure_ascii=False)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored_file_count(seat: SpecSeat) -> int:
    with contextlib.closing(sqlite3.connect(seat.daemon.state_dir / "cud.sqlite3")) as db:
        return int(db.execute("SELECT COUNT(*) FROM task_files").fetchone()[0])


def task_count(seat: SpecSeat) -> int:
    return len(seat.daemon.call("list"))


def test_a_5_mb_and_a_3_mb_fixture_land_byte_exact_in_the_seats_home(seat: SpecSeat) -> None:
    fixtures = {"fixtures/sheet.xlsx": os.urandom(5_000_000), "fixtures/scan.pdf": os.urandom(3_000_000)}
    spec = seat.write("big.toml", spec_text({"fixtures/sheet.xlsx": "Documents/sheet.xlsx",
                                             "fixtures/scan.pdf": "Documents/scan.pdf"}), fixtures)
    code, task = seat.submit(spec)
    assert code == 0 and task["state"] == "succeeded", task
    assert task["verdict"]["verdict"] == "passed", task["verdict"]  # the daemon's own equals checks
    for src, dest in (("fixtures/sheet.xlsx", "sheet.xlsx"), ("fixtures/scan.pdf", "scan.pdf")):
        assert sha256((seat.home / "Documents" / dest).read_bytes()) == sha256(fixtures[src])


@pytest.mark.parametrize(("sizes", "words"), [
    ({"fx/a.bin": 6_000_001}, ["'fx/a.bin' is 6000001 bytes", "6000000 bytes per file",
                               "[sessions] max_spec_file_bytes"]),
    ({"fx/a.bin": 5_000_000, "fx/b.bin": 4_000_001}, ["9000001 bytes together (fx/a.bin, fx/b.bin)",
                                                      "9000000 bytes per spec", "[sessions] max_spec_total_bytes"]),
])
def test_files_over_the_limits_are_refused_naming_the_file_its_size_and_the_key(
        seat: SpecSeat, sizes: dict[str, int], words: list[str]) -> None:
    folder = seat.specs / f"over{len(sizes)}"
    for name, size in sizes.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "wb") as sparse:  # cuctl reads it whole; its size is what is refused
            sparse.truncate(size)
    spec = seat.write(f"over{len(sizes)}/s.toml", spec_text({name: name for name in sizes}))
    before = task_count(seat)
    refused = cuctl(seat.daemon.socket, "submit", "--spec", str(spec))
    assert refused.returncode == 2, refused.stderr
    for word in words:
        assert word in refused.stderr, refused.stderr
    assert task_count(seat) == before


def spool_files(seat: SpecSeat) -> list[str]:
    """The daemon's open files in its state directory that have no name (a spool: ``O_TMPFILE``)."""
    assert seat.daemon.proc is not None
    fds = Path(f"/proc/{seat.daemon.proc.pid}/fd")
    state = str(seat.daemon.state_dir)
    targets = []
    for fd in fds.iterdir():
        try:
            targets.append(os.readlink(fd))
        except FileNotFoundError:
            continue
    return [t for t in targets if t.startswith(state) and t.endswith(" (deleted)")]


def test_an_upload_cut_off_mid_way_leaves_no_task_and_no_file(seat: SpecSeat) -> None:
    files = {"fx/one.bin": os.urandom(CHUNK_BYTES + 7), "fx/two.bin": os.urandom(3 * CHUNK_BYTES)}
    spec = parse_spec(json.loads(json.dumps({"prompt": "say done", "seat": "s1",
                                             "setup": [{"files": [{"src": n, "dest": n} for n in files]}]})))
    before_tasks, before_files = task_count(seat), stored_file_count(seat)
    before_names = sorted(os.listdir(seat.daemon.state_dir))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(seat.daemon.socket))
        reader = sock.makefile("rb")
        sock.sendall(encode(request("submit", **submit_fields(spec, files))))
        assert decode(reader.readline())["type"] == "ready"
        pieces = file_pieces(files)
        for _ in range(2):  # the first file whole, and the first chunk of the second
            sock.sendall(encode(dict(chunk_message(base64.b64encode(next(pieces)).decode()))))
        wait_until(lambda: spool_files(seat), 30, "the daemon to spool the chunks")
        reader.close()
    wait_until(lambda: not spool_files(seat), 30, "the daemon to drop its spool")
    assert task_count(seat) == before_tasks and stored_file_count(seat) == before_files
    assert sorted(os.listdir(seat.daemon.state_dir)) == before_names
    assert "Traceback" not in seat.daemon.log_text()


def test_chunks_that_do_not_add_up_to_the_sizes_announced_are_refused_and_leave_nothing(seat: SpecSeat) -> None:
    files = {"fx/short.bin": b"0123456789", "fx/next.bin": b"abc"}
    spec = parse_spec({"prompt": "say done", "seat": "s1",
                       "setup": [{"files": [{"src": n, "dest": n} for n in files]}]})
    before_tasks, before_files = task_count(seat), stored_file_count(seat)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(seat.daemon.socket))
        reader = sock.makefile("rb")
        sock.sendall(encode(request("submit", **submit_fields(spec, files))))
        assert decode(reader.readline())["type"] == "ready"
        # One chunk that runs past the first file into the second: no chunk may hold two files' bytes.
        sock.sendall(encode(dict(chunk_message(base64.b64encode(b"".join(files.values())).decode()))))
        reply = decode(reader.readline())
        assert reply["ok"] is False, reply
        assert reply["error"]["message"] == ("the chunks for spec file 'fx/short.bin' do not add up to the 10 bytes "
                                             "announced")
        assert reader.readline() == b""  # the rest of an upload is never read as requests: the connection ends
        reader.close()
    assert not spool_files(seat)
    assert task_count(seat) == before_tasks and stored_file_count(seat) == before_files


def test_one_key_with_files_from_8_clients_at_once_makes_one_task(seat: SpecSeat) -> None:
    """#41: the key's lookup, the files' upload and the insert are one step as far as a client can tell: eight
    submits of one key, each past the daemon's first lookup (each has its ``ready``) before any sends a byte,
    all get the one task, ``existing: true`` but for one; no "already recorded" error, one task, one file."""
    key, files = "race-files/1#1", {"fx/race.bin": os.urandom(CHUNK_BYTES + 5)}
    spec = parse_spec({"prompt": "say done", "seat": "s1", "reset": False,
                       "setup": [{"files": [{"src": "fx/race.bin", "dest": "race.bin"}]}],
                       "checks": [{"file": "race.bin", "equals": "fx/race.bin"}]})
    fields = {**submit_fields(spec, files), "key": key}
    before_files = stored_file_count(seat)
    clients = [Client(seat.daemon.socket) for _ in range(8)]
    everyone_ready = threading.Barrier(len(clients))
    replies: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def pieces() -> Iterator[bytes]:
        everyone_ready.wait(60)  # iterated once this client's ready came: the uploads then go together
        yield from file_pieces(files)

    def submit(client: Client) -> None:
        try:
            replies.append(client.upload("submit", pieces(), **fields))
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(client,)) for client in clients]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        for client in clients:
            client.close()
    assert not errors and len(replies) == len(clients), errors
    assert len({r["id"] for r in replies}) == 1 and [r["existing"] for r in replies].count(False) == 1
    assert [t["id"] for t in seat.daemon.call("list", key=key)] == [replies[0]["id"]]
    assert stored_file_count(seat) == before_files + 1
    wait_until(lambda: not spool_files(seat), 30, "the daemon to drop the spools of the seven it did not store")
    task = seat.daemon.wait_state(replies[0]["id"], "succeeded", "failed", timeout=120)
    assert task["verdict"]["verdict"] == "passed", task  # the one file stored is the one sent, byte-exact


def test_a_queued_tasks_files_survive_a_daemon_restart(seat: SpecSeat) -> None:
    daemon = seat.daemon
    holder = daemon.call("submit", prompt="hold the seat", seat="s1", model="scripted:hold", approval="actions")["id"]
    daemon.wait_approval(holder)
    fixture = {"fx/kept.bin": os.urandom(2 * CHUNK_BYTES + 3)}
    spec = seat.write("kept.toml", spec_text({"fx/kept.bin": "kept/kept.bin"}), fixture)
    queued = json.loads(cuctl(daemon.socket, "submit", "--spec", str(spec), "--json").stdout)["id"]
    assert daemon.task(queued)["state"] == "queued"
    daemon.stop()
    daemon.start()
    daemon.call("cancel", id=holder)  # if it came back queued rather than interrupted
    task = daemon.wait_state(queued, "succeeded", "failed", timeout=120)
    assert task["state"] == "succeeded" and task["verdict"]["verdict"] == "passed", task
    assert sha256((seat.home / "kept" / "kept.bin").read_bytes()) == sha256(fixture["fx/kept.bin"])


AROUND = [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES - 1, 2 * CHUNK_BYTES + 1]
NAME = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters=" -_.é✓"), min_size=1,
               max_size=24).filter(lambda n: n.strip(" .") == n and n not in (".", ".."))
_run = iter(range(1, 1 << 30))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(st.dictionaries(NAME, st.sampled_from(AROUND) | st.integers(0, 3 * CHUNK_BYTES), min_size=1, max_size=4),
       st.integers(0, 2**32 - 1))
@example({"a": 0, "b c": CHUNK_BYTES, "é✓.txt": CHUNK_BYTES + 1}, 0)
@example({"𐀀": 1}, 1)  # a name outside the BMP: JSON's surrogate escapes are not TOML (the test's spec writer)
def test_random_sets_of_files_round_trip_byte_exact(seat: SpecSeat, sizes: dict[str, int], seed: int) -> None:
    rng = random.Random(seed)  # the bytes from a seed Hypothesis draws: megabytes of its own data would be slow
    run = next(_run)
    folder = seat.specs / f"p{run}"
    files = {f"fx/{name}": rng.randbytes(size) for name, size in sizes.items()}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    dests = {name: f"p{run}/{name[3:]}" for name in files}
    (folder / "s.toml").write_text(spec_text(dests, reset=False))
    spec, loaded = load_spec(folder / "s.toml")
    assert loaded == files
    with Client(seat.daemon.socket, timeout=60) as client:
        task_id = client.upload("submit", file_pieces(loaded), **submit_fields(spec, loaded))["id"]
    task = seat.daemon.wait_state(task_id, "succeeded", "failed", timeout=120)
    assert task["state"] == "succeeded" and task["verdict"]["verdict"] == "passed", task
    for name, dest in dests.items():
        assert sha256((seat.home / dest).read_bytes()) == sha256(files[name]), dest


@pytest.mark.parametrize(("key", "value", "words"), [
    ("max_spec_file_bytes", 0, "'sessions.max_spec_file_bytes' must be an integer from 1 to 536870912, got 0"),
    ("max_spec_file_bytes", 1 << 30, "'sessions.max_spec_file_bytes' must be an integer from 1 to 536870912"),
    ("max_spec_total_bytes", "256M", "'sessions.max_spec_total_bytes' must be an integer"),
])
def test_the_limits_are_config_values_checked_by_name(key: str, value: object, words: str) -> None:
    assert load_session_limits({}).max_spec_file_bytes == 64 << 20
    assert load_session_limits({}).max_spec_total_bytes == 256 << 20
    assert load_session_limits({key: 12345}) == SessionLimits(**{key: 12345})
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_session_limits({key: value})


def test_cuctl_eval_and_an_osworld_download_send_files_larger_than_a_message(seat: SpecSeat, tmp_path: Path) -> None:
    fixture = os.urandom(2_500_000)  # over the socket's 1 MiB message, as the old inline files could not be
    suite = seat.specs / "suite"
    seat.write("suite/fixture.toml", spec_text({"fx/fixture.bin": "suite/fixture.bin"}),
               {"suite/fx/fixture.bin": fixture})
    done = cuctl(seat.daemon.socket, "eval", str(suite), "--seats", "s1", "--out", str(tmp_path / "out"), timeout=300)
    assert done.returncode == 0, done.stderr
    runs = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert [r["verdict"] for r in runs] == ["passed"], runs
    assert sha256((seat.home / "suite" / "fixture.bin").read_bytes()) == sha256(fixture)

    download = os.urandom(1_500_000)
    with serve_files({"/big.bin": download}) as served:
        task = {"id": "cud-big-download", "instruction": "say done",
                "config": [{"type": "download", "parameters": {"files": [
                    {"url": f"{served.base}/big.bin", "path": "/home/user/Downloads/big.bin"}]}}],
                "evaluator": {"func": "check_include_exclude",
                              "result": {"type": "vm_command_line",
                                         "command": ["sha256sum", "/home/user/Downloads/big.bin"]},
                              "expected": {"type": "rule", "rules": {"include": [sha256(download)]}}}}
        (tmp_path / "big.json").write_text(json.dumps(task))
        done = cuctl(seat.daemon.socket, "submit", "--from-osworld", str(tmp_path / "big.json"), "--seat", "s1",
                     "--wait", "--json", timeout=300)
    ended = json.loads(done.stdout.strip().splitlines()[-1])
    assert ended["state"] == "succeeded" and ended["verdict"]["verdict"] == "passed", ended
    assert sha256((seat.home / "Downloads" / "big.bin").read_bytes()) == sha256(download)


def test_a_fleet_attempt_sends_its_files_through_the_same_upload(seat: SpecSeat) -> None:
    data = os.urandom(1_500_000)
    spec = {"prompt": "say done", "seat": "s1", "setup": [{"files": [{"src": "fx/fleet.bin", "dest": "fleet.bin"}]}],
            "checks": [{"file": "fleet.bin", "equals": "fx/fleet.bin"}]}
    outcome = run_attempt(seat.daemon.socket, spec=spec, files={"fx/fleet.bin": base64.b64encode(data).decode()},
                          key="spec-files/fleet/1#1")
    assert outcome.task["state"] == "succeeded" and outcome.task["verdict"]["verdict"] == "passed", outcome.task
    assert sha256((seat.home / "fleet.bin").read_bytes()) == sha256(data)
    with pytest.raises(SpecError, match=re.escape("spec file 'fx/fleet.bin' is not base64")):
        run_attempt(seat.daemon.socket, spec=spec, files={"fx/fleet.bin": "not base64!"}, key="spec-files/fleet/2#1")
