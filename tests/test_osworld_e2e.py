"""OSWorld's tasks end to end with real applications: ``cuctl eval --from-osworld`` over index files
written here in OSWorld's format (``evaluation_examples/test_NAME.json``, each task at
``examples/DOMAIN/ID.json``), on a seat whose home template is cud.osworld.seat's, with a scripted model.

Two of the tasks are OSWorld's own files, unchanged (tests/data/osworld/upstream/); the others are
shaped like OSWorld's (libreoffice_calc/01b269ae…, os/…):

* libreoffice_writer/3ef2b351… "center align the heading": the model goes to the first line and presses
  Ctrl+E; ``is_first_line_centered`` judges the saved document.
* libreoffice_impress/73c99fb9… "Add "Page 1" into the content textbox on Slide 2": the model waits until
  the second slide's thumbnail shows (Impress titles its window before it has laid out what is in it),
  clicks it, waits for that slide's content, clicks into it and adds a line; ``compare_pptx_files`` judges
  the saved presentation against the gold one. The slide's background and text have colours of their own
  for the scripted model to wait for and aim at (``until`` and ``target`` steps).
* libreoffice_calc: a ``download`` of a workbook, an ``open``, and OSWorld's calc postconfig. The model
  moves to a cell and types a value; ``compare_table`` with a ``sheet_data`` rule judges the saved
  workbook against a ``cloud_file`` gold workbook.
* os: an ``execute`` config writes a file; a ``vm_command_line`` getter reads it back, judged by
  ``exact_match`` (passes) and by ``check_include_exclude`` with an excluded word it holds (fails).
* infeasible: ``func = "infeasible"``; a final message that declares the task infeasible passes, a
  confident answer fails.

Nothing comes from the network: every URL of OSWorld's file cache is served by a loopback http.server,
with documents made here (the Impress ones saved by LibreOffice first, as OSWorld's were). OSWorld's
postconfig saves with ``python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')"``; pyautogui is not
installable here (offline) and the seat's python has none, so that step becomes an ``execute`` of
``xdotool key ctrl+s`` followed by a wait until the document is newer than a mark made just before.

The scripted model plays one scenario for every task of a run: ``right`` (types the right value, says it
is done) and ``wrong`` (a value one off, a confident answer) over the Calc/os/infeasible index,
``declares`` (types the right value, then declares the task infeasible: the infeasible task passes, the
Calc task fails whatever its check says) over Calc's and the infeasible one, ``centre`` over Writer's,
``page-1`` over Impress's, and ``idle`` (looks, does nothing) over both. One daemon, one seat and one server for the module.
"""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docx
import pptx
import pytest
from pptx.dml.color import RGBColor

from cud.daemon.session.user import SeatUser
from tests.support.http_files import Served, serve_files
from tests.support.libreoffice import A5, UNITS, saved_by_libreoffice, units_workbook, window_title
from tests.support.osworld_e2e import osworld_seat, outcomes, run, task, write_index
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat

BOOK = "sales.xlsx"
RIGHT, WRONG = str(sum(UNITS)), str(sum(UNITS) + 1)
UPSTREAM = Path(__file__).parent / "data" / "osworld" / "upstream"
#: OSWorld's file cache, whose URLs the tasks name; the server here answers under /cache/ instead.
CACHE = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/"
WRITER = ("libreoffice_writer", "3ef2b351-8a84-4ff2-8724-d86eae9b842e")
IMPRESS = ("libreoffice_impress", "73c99fb9-f828-43ce-b87a-01dc07faa224")
#: Colours used nowhere else on the screen: the second slide's background (its thumbnail shows it once Impress
#: has laid out its window) and its content's text (shown big once the slide is the one edited).
SLIDE_2, CONTENT = "#FFE699", "#C00000"
#: How many screenshots the model may wait through for each (a wait is the daemon's ``wait_seconds``, 1 s):
#: within the daemon's 50 steps a task.
LOOKS = {SLIDE_2: 30, CONTENT: 10}


def constitution() -> bytes:
    """The Writer task's document: a heading aligned left, then the text."""
    document = docx.Document()
    document.add_heading("Constitution of the Chess Club", level=1)
    document.add_paragraph("Article 1. The club meets every Tuesday.")
    document.add_paragraph("Article 2. Anyone may join.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def slides(contents: list[str]) -> bytes:
    """The Impress task's presentation: a title slide, and a slide "Overview" (background SLIDE_2) whose content
    is ``contents``, one paragraph each, in CONTENT's colour."""
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Chain of thought"
    first.placeholders[1].text = "A survey"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.background.fill.solid()
    second.background.fill.fore_color.rgb = RGBColor.from_string(SLIDE_2.lstrip("#"))
    second.shapes.title.text = "Overview"
    body = second.placeholders[1].text_frame
    body.text = contents[0]
    for line in contents[1:]:
        body.add_paragraph().text = line
    for paragraph in body.paragraphs:
        for text_run in paragraph.runs:
            text_run.font.color.rgb = RGBColor.from_string(CONTENT.lstrip("#"))
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def cache_files() -> dict[str, bytes]:
    """What the two upstream tasks download, by path under the server's /cache/."""
    writer_dir, impress_dir = "/".join(WRITER), "/".join(IMPRESS)
    decks = saved_by_libreoffice({"109_4.pptx": slides(["Contents"]), "109_4_Gold.pptx": slides(["Contents", "Page 1"])})
    return {f"{writer_dir}/Constitution_Template_With_Guidelines.docx": constitution(),
            **{f"{impress_dir}/{name}": data for name, data in decks.items()}}


def typing(value: str, final: str) -> dict[str, Any]:
    """The model: looks, goes to A5 (Ctrl+Home, four times Down), types ``value`` and Enter, then says ``final``."""
    return {"steps": [
        {"actions": [{"type": "screenshot"}]},
        {"actions": [{"type": "click", "button": "left", "x": A5[0], "y": A5[1]}]},
        {"actions": [{"type": "type", "text": value}]},
        {"actions": [{"type": "keypress", "keys": ["ENTER"]}]},
        {"actions": [{"type": "wait"}]},
        {"message": final}]}


def steps(*batches: dict[str, Any], final: str) -> list[dict[str, Any]]:
    """A look at the screen, one action a turn, and ``final``."""
    return [{"actions": [{"type": "screenshot"}]}, *({"actions": [b]} for b in batches), {"message": final}]


SCENARIOS = {
    "right": {"name": "right", **typing(RIGHT, "Done: the total is in A5.")},
    "declares": {"name": "declares", **typing(RIGHT, "I could not do it: the task is infeasible.")},
    "wrong": {"name": "wrong", **typing(WRONG, "Done: everything is set up as asked.")},
    "centre": {"name": "centre", "steps": steps(
        {"type": "keypress", "keys": ["ctrl", "Home"]}, {"type": "keypress", "keys": ["ctrl", "e"]},
        final="The heading is centred.")},
    "page-1": {"name": "page-1", "steps": [
        {"actions": [{"type": "screenshot"}]},
        *({"until": {"color": colour, "looks": LOOKS[colour]},
           "actions": [{"type": "click", "button": "left", "target": {"color": colour}}]} for colour in (SLIDE_2, CONTENT)),
        *({"actions": [action]} for action in (
            {"type": "keypress", "keys": ["ctrl", "End"]}, {"type": "keypress", "keys": ["ENTER"]},
            {"type": "type", "text": "Page 1"}, {"type": "keypress", "keys": ["ESC"]})),
        {"message": "Slide 2 now says Page 1."}]},
    "idle": {"name": "idle", "steps": steps(final="Done.")},
}


def tasks(base: str) -> dict[str, dict[str, dict[str, Any]]]:
    write_note = {"type": "execute", "parameters": {
        "command": "mkdir -p /home/user/Desktop && echo 'release notes v2' > /home/user/Desktop/notes.txt",
        "shell": True}}
    read_note = {"type": "vm_command_line", "command": ["cat", "/home/user/Desktop/notes.txt"]}
    save = [
        {"type": "activate_window", "parameters": {"window_name": window_title(BOOK), "strict": True}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
        {"type": "execute", "parameters": {"command": ["python", "-c", PYAUTOGUI_SAVE]}},
    ]
    return {
        "libreoffice_calc": {"total-units": offline(task(
            "libreoffice_calc", "Put the total of the units in A2:A4 into cell A5.",
            [{"type": "download", "parameters": {"files": [{"url": f"{base}/start/{BOOK}", "path": f"/home/user/{BOOK}"}]}},
             {"type": "open", "parameters": {"path": f"/home/user/{BOOK}"}},
             {"type": "sleep", "parameters": {"seconds": 5}}],
            {"postconfig": save, "func": "compare_table",
             "expected": {"type": "cloud_file", "path": f"{base}/gold/{BOOK}", "dest": "gold.xlsx"},
             "result": {"type": "vm_file", "path": f"/home/user/{BOOK}", "dest": BOOK},
             "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}}), base)},
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


#: OSWorld's postconfig save, as its task files write it.
PYAUTOGUI_SAVE = "import pyautogui; import time; pyautogui.hotkey('ctrl', 's'); time.sleep(0.5); "


def xdotool_save(path: str) -> dict[str, Any]:
    """Ctrl+S by xdotool, then a wait (bounded) until ``path`` is newer than a mark made just before."""
    return {"type": "execute", "parameters": {"command": [
        "/bin/sh", "-c", f"touch /home/user/.save-mark && xdotool key --clearmodifiers ctrl+s && "
        f"for i in $(seq 60); do [ {shlex.quote(path)} -nt /home/user/.save-mark ] && break; sleep 0.5; done"]}}


def offline(task: dict[str, Any], base: str) -> dict[str, Any]:
    """``task`` with its file cache's URLs on the loopback server, and its pyautogui save by xdotool."""
    task = json.loads(json.dumps(task).replace(CACHE, f"{base}/cache/"))
    evaluator = task["evaluator"]
    saved = evaluator["result"]["path"]
    evaluator["postconfig"] = [
        xdotool_save(saved) if step["type"] == "execute" and "pyautogui.hotkey('ctrl', 's')" in str(step) else step
        for step in evaluator.get("postconfig", [])]
    return task


def upstream(domain: str, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = json.loads((UPSTREAM / domain / f"{task_id}.json").read_text())
    return task


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    files = {f"/start/{BOOK}": units_workbook(None), f"/gold/{BOOK}": units_workbook(int(RIGHT)),
             **{f"/cache/{path}": data for path, data in cache_files().items()}}
    with serve_files(files) as s:
        yield s


@pytest.fixture(scope="module")
def judge(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, judge: SeatUser) -> Iterator[SpecSeat]:
    with osworld_seat(seat_users, judge, SCENARIOS, "wrong") as s:
        yield s


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("osworld") / "evaluation_examples"


@pytest.fixture(scope="module")
def index(examples: Path, served: Served) -> Path:
    return write_index(examples, tasks(served.base), "e2e")


def office(served: Served, *which: tuple[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The upstream tasks ``which`` (domain, id), offline, by domain."""
    return {domain: {task_id: offline(upstream(domain, task_id), served.base)} for domain, task_id in which}


def test_the_right_model_passes_every_feasible_task_but_the_one_whose_check_can_never_hold(
        seat: SpecSeat, index: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, index, tmp_path / "out", "scripted:right")
    assert outcomes(runs) == {
        "libreoffice_calc/total-units": ("succeeded", "passed"),
        "os/notes-kept": ("succeeded", "passed"),
        "os/notes-current": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "failed"),  # it did not declare it infeasible
    }, json.dumps(runs, indent=1)[:6000]
    assert f"/start/{BOOK}" in served.requested and f"/gold/{BOOK}" in served.requested


def test_declaring_a_task_infeasible_passes_the_infeasible_one_and_fails_a_feasible_one_done_right(
        seat: SpecSeat, examples: Path, served: Served, tmp_path: Path) -> None:
    """OSWorld's evaluate(): FAIL scores 1 on an infeasible task, 0 on any other, whatever its metric says."""
    both = {domain: by_id for domain, by_id in tasks(served.base).items() if domain != "os"}
    runs = run(seat, write_index(examples, both, "declares"), tmp_path / "out", "scripted:declares")
    assert outcomes(runs) == {
        "libreoffice_calc/total-units": ("succeeded", "failed"),
        "infeasible/spotify-tv": ("succeeded", "passed"),
    }, json.dumps(runs, indent=1)[:6000]
    calc = runs["libreoffice_calc/total-units"]
    assert [c["outcome"] for c in calc["checks"]] == ["passed"]  # the value is right: the declaration fails it


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


def test_writers_heading_centred_with_ctrl_e_passes_osworlds_check(
        seat: SpecSeat, examples: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, write_index(examples, office(served, WRITER), "writer"), tmp_path / "out", "scripted:centre")
    assert outcomes(runs) == {"/".join(WRITER): ("succeeded", "passed")}, json.dumps(runs, indent=1)[:6000]
    assert [c["name"] for c in runs["/".join(WRITER)]["checks"]] == ["is_first_line_centered on vm_file"]


def test_impress_slide_2_gets_its_line_and_matches_the_gold_presentation(
        seat: SpecSeat, examples: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, write_index(examples, office(served, IMPRESS), "impress"), tmp_path / "out", "scripted:page-1")
    assert outcomes(runs) == {"/".join(IMPRESS): ("succeeded", "passed")}, json.dumps(runs, indent=1)[:6000]
    assert [c["name"] for c in runs["/".join(IMPRESS)]["checks"]] == ["compare_pptx_files on vm_file"]


def test_office_tasks_left_as_they_opened_fail_osworlds_checks(
        seat: SpecSeat, examples: Path, served: Served, tmp_path: Path) -> None:
    runs = run(seat, write_index(examples, office(served, WRITER, IMPRESS), "office"), tmp_path / "out",
               "scripted:idle")
    assert outcomes(runs) == {"/".join(WRITER): ("succeeded", "failed"), "/".join(IMPRESS): ("succeeded", "failed")}, \
        json.dumps(runs, indent=1)[:6000]
    assert [c["why"].split(" scored ")[0] for run in runs.values() for c in run["checks"]] == [
        "OSWorld's is_first_line_centered", "OSWorld's compare_pptx_files"], json.dumps(runs, indent=1)[:6000]
    assert f"/cache/{'/'.join(IMPRESS)}/109_4.pptx" in served.requested
    assert f"/cache/{'/'.join(IMPRESS)}/109_4_Gold.pptx" in served.requested
