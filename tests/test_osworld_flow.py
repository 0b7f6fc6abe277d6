"""An OSWorld task file run end to end: ``cuctl submit --from-osworld`` on a real seat, judged.

The project's own task (tests/data/osworld/edit_notes.json, in OSWorld's format) downloads
notes.txt from a loopback HTTP server (fetched by cuctl, not the seat), makes a folder, launches
mousepad on the file, activates its window with wmctrl (as OSWorld's server) and sleeps; the scripted model adds a line
and saves; four converted checks judge it (exact_match on the file's text, check_include_exclude and
exact_match on vm_command_line, exact_match on list_directory). One seat and one daemon for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import cuctl, scenario
from tests.support.http_files import Served, serve_files
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

DATA = Path(__file__).parent / "data" / "osworld"
EDIT = scenario(
    {"actions": [{"type": "keypress", "keys": ["CTRL", "END"]}]},
    {"actions": [{"type": "type", "text": "done\n"}]},
    {"actions": [{"type": "keypress", "keys": ["CTRL", "S"]}]},
    {"message": "I added the line 'done' at the end of notes.txt and saved it."},
)
SERVED = {"/notes.txt": b"first line\n", "/notes-done.txt": b"first line\ndone\n"}


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve_files(SERVED) as served:
        yield served


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, EDIT, template_files={"Desktop/.keep": ""}) as s:
        yield s


def test_a_converted_osworld_task_runs_on_a_seat_and_is_judged(seat: SpecSeat, server: Served) -> None:
    task_file = seat.specs / "edit_notes.json"
    task_file.write_text((DATA / "edit_notes.json").read_text().replace("http://127.0.0.1:{port}", server.base))
    server.requested.clear()
    done = cuctl(seat.daemon.socket, "submit", "--from-osworld", str(task_file), "--seat", "s1", "--max-steps", "10",
                 "--wait", "--json", timeout=300)
    assert done.stdout.strip(), f"cuctl submit printed nothing; stderr: {done.stderr}"
    task = json.loads(done.stdout.strip().splitlines()[-1])
    verdict = task["verdict"]
    assert task["state"] == "succeeded", task
    assert verdict["verdict"] == "passed" and verdict["score"] == 1.0, json.dumps(verdict, indent=1)
    assert [c["name"] for c in verdict["checks"]] == ["exact_match on vm_command_line",
                                                      "check_include_exclude on vm_command_line",
                                                      "exact_match on vm_command_line", "exact_match on list_directory"]
    assert done.returncode == 0
    # cuctl fetched each URL once, on the submitter's side; the seat's home got the file it served.
    assert sorted(server.requested) == ["/notes.txt"]
    assert (seat.home / "Desktop" / "notes.txt").read_bytes() == b"first line\ndone\n"
    setup = [e["data"] for e in seat.events(task["id"]) if e["kind"] == "setup"]
    assert [(s["kind"], s["ok"]) for s in setup] == [("files", True), ("run", True), ("launch", True), ("run", True),
                                                     ("sleep", True)]
    assert "wmctrl -a notes.txt" in setup[3]["what"]


def test_an_unsupported_task_is_refused_by_name_before_anything_is_sent(seat: SpecSeat, server: Served) -> None:
    task_file = seat.specs / "unsupported.json"
    task_file.write_text((DATA / "unsupported.json").read_text())
    before = json.loads(cuctl(seat.daemon.socket, "list", "--json").stdout)
    done = cuctl(seat.daemon.socket, "submit", "--from-osworld", str(task_file))
    assert done.returncode == 2, done
    assert "OSWorld config type 'googledrive' in config[1] has no counterpart in cud" in done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(cuctl(seat.daemon.socket, "list", "--json").stdout) == before


def test_a_folder_of_osworld_tasks_runs_as_a_suite(seat: SpecSeat, server: Served, tmp_path: Path) -> None:
    folder = tmp_path / "osworld"
    folder.mkdir()
    (folder / "unsupported.json").write_text((DATA / "unsupported.json").read_text())
    before = json.loads(cuctl(seat.daemon.socket, "list", "--json").stdout)
    refused = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(folder), "--out", str(tmp_path / "refused"))
    assert refused.returncode == 2, refused
    assert "unsupported.json" in refused.stderr and "'googledrive'" in refused.stderr
    assert json.loads(cuctl(seat.daemon.socket, "list", "--json").stdout) == before  # nothing submitted
    assert not (tmp_path / "refused").exists()

    (folder / "unsupported.json").unlink()
    (folder / "edit_notes.json").write_text((DATA / "edit_notes.json").read_text()
                                            .replace("http://127.0.0.1:{port}", server.base))
    out = tmp_path / "suite"
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(folder), "--seats", "s1", "--out", str(out),
                 timeout=300)
    assert done.returncode == 0, done
    results = json.loads((out / "results.json").read_text())
    assert results["suite"]["osworld"] is True
    runs = results["runs"]
    assert [(r["verdict"], r["score"], r["outcome"]) for r in runs] == [("passed", 1.0, "passed")], runs
