"""OSWorld's tasks end to end: ``cuctl eval --from-osworld`` over an index file written here in OSWorld's
format (``evaluation_examples/test_e2e.json``, each task at ``examples/DOMAIN/ID.json``), on a real seat
whose home template is cud.osworld.seat's, with a scripted model, judged as OSWorld judges them.

The tasks are shaped like OSWorld's own (os/…, and its infeasible ones):

* os: an ``execute`` config (shell text naming ``/home/user``) writes a file; a ``vm_command_line``
  getter reads it back, judged by ``exact_match`` (passes) and by ``check_include_exclude`` with an
  excluded word the file holds (fails, whatever the model does).
* infeasible: ``func = "infeasible"``; a final message that declares the task infeasible passes, a
  confident answer fails.

Two runs over the same index: ``--model scripted:right`` declares the infeasible task infeasible,
``--model scripted:wrong`` answers confidently. One daemon and one seat for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.osworld.seat import template_files
from tests.support.daemon import cuctl
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

SCENARIOS = {
    "right": {"name": "right", "steps": [{"actions": [{"type": "screenshot"}]},
                                          {"message": "I could not do it: the task is infeasible."}]},
    "wrong": {"name": "wrong", "steps": [{"actions": [{"type": "screenshot"}]},
                                          {"message": "Done: everything is set up as asked."}]},
}


def task(domain: str, instruction: str, config: list[dict[str, Any]], evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": "", "snapshot": domain, "instruction": instruction, "source": "cud tests", "config": config,
            "trajectory": "trajectories/", "related_apps": [domain], "evaluator": evaluator, "proxy": False}


WRITE_NOTE = {"type": "execute", "parameters": {
    "command": "mkdir -p /home/user/Desktop && echo 'release notes v2' > /home/user/Desktop/notes.txt", "shell": True}}
READ_NOTE = {"type": "vm_command_line", "command": ["cat", "/home/user/Desktop/notes.txt"]}
TASKS: dict[str, dict[str, dict[str, Any]]] = {
    "os": {
        "notes-kept": task("os", "Keep the release notes.", [WRITE_NOTE],
                           {"func": "exact_match", "result": READ_NOTE,
                            "expected": {"type": "rule", "rules": {"expected": "release notes v2\n"}}}),
        "notes-current": task("os", "Make the release notes current.", [WRITE_NOTE],
                              {"func": "check_include_exclude", "result": READ_NOTE,
                               "expected": {"type": "rule", "rules": {"include": ["release notes"],
                                                                      "exclude": ["v2"]}}}),
    },
    "infeasible": {"spotify-tv": task("os", "Install Spotify on the living-room TV.", [], {"func": "infeasible"})},
}


def write_index(root: Path, by_domain: dict[str, dict[str, dict[str, Any]]]) -> Path:
    for domain, by_id in by_domain.items():
        (root / "examples" / domain).mkdir(parents=True, exist_ok=True)
        for task_id, body in by_id.items():
            (root / "examples" / domain / f"{task_id}.json").write_text(json.dumps({**body, "id": task_id}, indent=1))
    index = root / "test_e2e.json"
    index.write_text(json.dumps({domain: list(by_id) for domain, by_id in by_domain.items()}, indent=2))
    return index


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, SCENARIOS["wrong"], template_files=template_files(), scenarios=SCENARIOS) as s:
        yield s


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_index(tmp_path_factory.mktemp("osworld") / "evaluation_examples", TASKS)


def run(seat: SpecSeat, index: Path, out: Path, model: str) -> dict[str, dict[str, Any]]:
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(index), "--skip-unconvertible",
                 "--model", model, "--out", str(out), timeout=900)
    assert done.returncode == 1 and "Traceback" not in done.stderr, (done.stdout, done.stderr)  # one failed
    data = json.loads((out / "results.json").read_text())
    return {r["spec"]: r for r in data["runs"]}


def outcomes(runs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {name: (r["state"], r["outcome"]) for name, r in runs.items()}


def whys(run: dict[str, Any]) -> list[str]:
    return [check["why"] for check in run["checks"]]


def test_the_right_model_passes_every_task_but_the_one_whose_check_can_never_hold(
        seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:right")
    assert outcomes(runs) == {
        "os/notes-kept": ("succeeded", "passed"),
        "os/notes-current": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "passed"),
    }, json.dumps(runs, indent=1)[:6000]
    assert any("v2" in why for why in whys(runs["os/notes-current"])), runs["os/notes-current"]["checks"]
    assert [c["name"] for c in runs["infeasible/spotify-tv"]["checks"]] == ["infeasible"]


def test_a_confident_answer_to_an_infeasible_task_fails(seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:wrong")
    assert outcomes(runs) == {
        "os/notes-kept": ("succeeded", "passed"),
        "os/notes-current": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "failed"),
    }, json.dumps(runs, indent=1)[:6000]
    assert runs["infeasible/spotify-tv"]["checks"][0]["outcome"] == "failed"
