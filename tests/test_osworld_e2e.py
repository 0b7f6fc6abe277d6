"""OSWorld's tasks end to end with real applications: ``cuctl eval --from-osworld`` over an index file
written here in OSWorld's format (``evaluation_examples/test_e2e.json``, each task at
``examples/DOMAIN/ID.json``), on a seat whose home template is cud.osworld.seat's, with a scripted model.

The tasks are shaped like OSWorld's own (libreoffice_calc/01b269ae…, os/…):

* libreoffice_calc: a ``download`` of a workbook made here and served by a loopback http.server (no
  network), an ``open``, and OSWorld's calc postconfig (``activate_window``, ``sleep``, a save). The model
  moves to a cell and types a value. ``compare_table`` with a ``sheet_data`` rule judges the saved
  workbook against a ``cloud_file`` gold workbook from the same server. OSWorld saves with
  ``python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')"``; pyautogui is not installable here
  (offline) and the seat's python has none, so the task's save is an ``execute`` of
  ``xdotool key ctrl+s``, followed by a wait until the workbook is newer than a mark made just before.
* os: an ``execute`` config writes a file; a ``vm_command_line`` getter reads it back, judged by
  ``exact_match`` (passes) and by ``check_include_exclude`` with an excluded word it holds (fails).
* infeasible: ``func = "infeasible"``; a final message that declares the task infeasible passes, a
  confident answer fails.

Two runs over the same index: ``--model scripted:right`` types the right value and declares the
infeasible task infeasible; ``--model scripted:wrong`` types a value one off and answers confidently.
One daemon, one seat and one server for the module.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from cud.daemon.session.user import SeatUser
from cud.osworld.seat import template_files
from tests.support.daemon import cuctl
from tests.support.http_files import Served, serve_files
from tests.support.judge_python import judge_python
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

BOOK = "sales.xlsx"
WINDOW = f"{BOOK} - LibreOffice Calc"
RIGHT, WRONG = "60", "61"
#: Cell A5's middle on the seat's screen (Calc maximized at 1280x800 by openbox, the template's zoom).
A5 = (80, 271)


@functools.cache  # openpyxl stamps the time into the file: the same bytes every time they are served
def workbook(total: int | None) -> bytes:
    """Units in A2:A4 and their total in A5 (blank in the one the task starts from)."""
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sheet1"
    for row in (["units"], [10], [20], [30]):
        sheet.append(row)
    if total is not None:
        sheet["A5"] = total
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def typing(value: str, final: str) -> dict[str, Any]:
    """The model: looks, goes to A5 (Ctrl+Home, four times Down), types ``value`` and Enter, then says ``final``."""
    return {"steps": [
        {"actions": [{"type": "screenshot"}]},
        {"actions": [{"type": "click", "button": "left", "x": A5[0], "y": A5[1]}]},
        {"actions": [{"type": "type", "text": value}]},
        {"actions": [{"type": "keypress", "keys": ["ENTER"]}]},
        {"actions": [{"type": "wait"}]},
        {"message": final}]}


SCENARIOS = {
    "right": {"name": "right", **typing(RIGHT, "I could not do it: the task is infeasible.")},
    "wrong": {"name": "wrong", **typing(WRONG, "Done: everything is set up as asked.")},
}


def task(domain: str, instruction: str, config: list[dict[str, Any]], evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": "", "snapshot": domain, "instruction": instruction, "source": "cud tests", "config": config,
            "trajectory": "trajectories/", "related_apps": [domain], "evaluator": evaluator, "proxy": False}


def tasks(base: str) -> dict[str, dict[str, dict[str, Any]]]:
    write_note = {"type": "execute", "parameters": {
        "command": "mkdir -p /home/user/Desktop && echo 'release notes v2' > /home/user/Desktop/notes.txt",
        "shell": True}}
    read_note = {"type": "vm_command_line", "command": ["cat", "/home/user/Desktop/notes.txt"]}
    save = [
        {"type": "activate_window", "parameters": {"window_name": WINDOW, "strict": True}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
        # OSWorld: python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')"; no pyautogui here (see above).
        {"type": "execute", "parameters": {"command": [
            "/bin/sh", "-c", f"touch /home/user/.save-mark && xdotool key --clearmodifiers ctrl+s && "
            f"for i in $(seq 40); do [ /home/user/{BOOK} -nt /home/user/.save-mark ] && break; sleep 0.5; done"]}},
        {"type": "sleep", "parameters": {"seconds": 2}},
    ]
    return {
        "libreoffice_calc": {"total-units": task(
            "libreoffice_calc", "Put the total of the units in A2:A4 into cell A5.",
            [{"type": "download", "parameters": {"files": [{"url": f"{base}/start/{BOOK}", "path": f"/home/user/{BOOK}"}]}},
             {"type": "open", "parameters": {"path": f"/home/user/{BOOK}"}},
             {"type": "sleep", "parameters": {"seconds": 5}}],
            {"postconfig": save, "func": "compare_table",
             "expected": {"type": "cloud_file", "path": f"{base}/gold/{BOOK}", "dest": "gold.xlsx"},
             "result": {"type": "vm_file", "path": f"/home/user/{BOOK}", "dest": BOOK},
             "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}})},
        "os": {
            "notes-kept": task("os", "Keep the release notes.", [write_note],
                               {"func": "exact_match", "result": read_note,
                                "expected": {"type": "rule", "rules": {"expected": "release notes v2\n"}}}),
            "notes-current": task("os", "Make the release notes current.", [write_note],
                                  {"func": "check_include_exclude", "result": read_note,
                                   "expected": {"type": "rule", "rules": {"include": ["release notes"],
                                                                          "exclude": ["v2"]}}}),
        },
        "infeasible": {"spotify-tv": task(
            "os", "Install Spotify on the living-room TV.", [],
            {"func": "infeasible"})},
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
def served() -> Iterator[Served]:
    with serve_files({f"/start/{BOOK}": workbook(None), f"/gold/{BOOK}": workbook(int(RIGHT))}) as s:
        yield s


@pytest.fixture(scope="module")
def judge(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, judge: SeatUser) -> Iterator[SpecSeat]:
    with judge_python(judge) as python, \
            spec_seat(seat_users, SCENARIOS["wrong"], config=f'[sessions]\njudge_user = "{judge.name}"\n',
                      template_files=template_files(), scenarios=SCENARIOS, python=python) as s:
        yield s


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, served: Served) -> Path:
    return write_index(tmp_path_factory.mktemp("osworld") / "evaluation_examples", tasks(served.base))


def run(seat: SpecSeat, index: Path, out: Path, model: str) -> dict[str, dict[str, Any]]:
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(index), "--skip-unconvertible",
                 "--model", model, "--out", str(out), timeout=900)
    assert "Traceback" not in done.stderr, done.stderr
    data = json.loads((out / "results.json").read_text())
    return {r["spec"]: r for r in data["runs"]}


def outcomes(runs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {name: (r["state"], r["outcome"]) for name, r in runs.items()}


def test_the_right_model_passes_every_task_but_the_one_whose_check_can_never_hold(
        seat: SpecSeat, index: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:right")
    assert outcomes(runs) == {
        "libreoffice_calc/total-units": ("succeeded", "passed"),
        "os/notes-kept": ("succeeded", "passed"),
        "os/notes-current": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "passed"),
    }, json.dumps(runs, indent=1)[:6000]
    assert f"/start/{BOOK}" in served.requested and f"/gold/{BOOK}" in served.requested


def test_a_value_one_off_and_a_confident_answer_fail_with_osworlds_reason(
        seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:wrong")
    assert outcomes(runs) == {
        "libreoffice_calc/total-units": ("succeeded", "failed"),
        "os/notes-kept": ("succeeded", "passed"),
        "os/notes-current": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "failed"),
    }, json.dumps(runs, indent=1)[:6000]
    print(json.dumps(runs["libreoffice_calc/total-units"], indent=1))
