"""What the OSWorld end-to-end modules share: tasks written in OSWorld's format, index files over them, a seat
for converted tasks (the OSWorld seat's home template, the judge as its own user), and ``cuctl eval
--from-osworld`` over an index with its runs by name."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cud.daemon.session.user import SeatUser
from cud.osworld.seat import template_files
from tests.support.daemon import cuctl
from tests.support.judge_python import judge_python
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

__all__ = ("osworld_seat", "outcomes", "run", "task", "write_index")


def task(snapshot: str, instruction: str, config: list[dict[str, Any]], evaluator: dict[str, Any],
         apps: list[str] | None = None) -> dict[str, Any]:
    """A task file's body as OSWorld writes one (its id is its file's name: :func:`write_index`)."""
    return {"id": "", "snapshot": snapshot, "instruction": instruction, "source": "cud tests", "config": config,
            "trajectory": "trajectories/", "related_apps": apps or [snapshot], "evaluator": evaluator,
            "proxy": False}


def write_index(root: Path, by_domain: dict[str, dict[str, dict[str, Any]]], name: str) -> Path:
    """Each task at ``examples/DOMAIN/ID.json`` under ``root``, and the index ``test_NAME.json`` listing them."""
    for domain, by_id in by_domain.items():
        (root / "examples" / domain).mkdir(parents=True, exist_ok=True)
        for task_id, body in by_id.items():
            (root / "examples" / domain / f"{task_id}.json").write_text(json.dumps({**body, "id": task_id}, indent=1))
    index = root / f"test_{name}.json"
    index.write_text(json.dumps({domain: list(by_id) for domain, by_id in by_domain.items()}, indent=2))
    return index


@contextlib.contextmanager
def osworld_seat(seat_users: SeatUsers, judge: SeatUser, scenarios: Mapping[str, dict[str, Any]], first: str,
                 config: str = "") -> Iterator[SpecSeat]:
    """A daemon and seat for converted tasks: ``scenarios`` for its scripted models (``first`` its own),
    the OSWorld seat's home template, metrics judged as ``judge``; ``config``: more top-level keys."""
    with judge_python(judge) as python, \
            spec_seat(seat_users, scenarios[first], config=f'{config}[sessions]\njudge_user = "{judge.name}"\n',
                      template_files=template_files(), scenarios=dict(scenarios), python=python) as s:
        yield s


def run(seat: SpecSeat, index: Path, out: Path, model: str) -> dict[str, dict[str, Any]]:
    """``cuctl eval --from-osworld INDEX --skip-unconvertible --model MODEL``: its runs by name."""
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(index), "--skip-unconvertible",
                 "--model", model, "--out", str(out), timeout=900)
    assert "Traceback" not in done.stderr, done.stderr
    data = json.loads((out / "results.json").read_text())
    return {r["spec"]: r for r in data["runs"]}


def outcomes(runs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {name: (r["state"], r["outcome"]) for name, r in runs.items()}
