"""The house: daemon/ in rooms, each said in one line, docs/layout.md pointing into them, no stray files.

A newcomer finds a behaviour by its room (docs/layout.md), so the map must name
only paths that exist and every room there is. Scratch output (pid files, media,
databases) committed by accident is caught here: tests and benches write those,
and only ``tests/data/`` (fixtures made on purpose) and ``docs/`` (its pictures)
may hold such files.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAEMON = ROOT / "daemon"
LAYOUT = ROOT / "docs" / "layout.md"

#: What the tests, benches and daemon write: pid files, media, databases, locks.
SCRATCH = re.compile(r"\.(pid|mp4|webm|mkv|avi|sqlite3?|db|sqlite3-(wal|shm)|lock|log)$")
#: Where such files may be kept on purpose.
KEPT = ("tests/data/", "docs/")
#: daemon/'s top: a handful of modules that tie the rooms together, and the rooms.
MAX_TOP_ENTRIES = 18  # 14, issue 28's two rooms (session/ and spec/), issue 29's fleet/ and issue 30's budget/


def rooms() -> list[Path]:
    return sorted(p for p in DAEMON.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def test_daemon_top_is_small() -> None:
    entries = sorted(p.name for p in DAEMON.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_ENTRIES, entries


def test_every_room_says_in_one_line_what_it_is_for() -> None:
    found = rooms()
    assert len(found) >= 8
    for room in found:
        for init in [room / "__init__.py", *room.glob("*/__init__.py")]:
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and "\n" not in doc.strip(), f"{init.relative_to(ROOT)}: one line saying what the room is for"


def test_layout_names_every_room_and_only_paths_that_exist() -> None:
    text = LAYOUT.read_text()
    for room in rooms():
        assert f"`daemon/{room.name}/`" in text, f"docs/layout.md does not list the room daemon/{room.name}/"
    paths = set(re.findall(r"`((?:daemon|drivers|cud|sandbox|tests|bench|systemd)/[\w./*-]*)`", text))
    assert len(paths) > 30
    missing = [p for p in sorted(paths) if not any(ROOT.glob(p.rstrip("/")))]
    assert missing == [], "docs/layout.md names paths that do not exist"


def test_rooms_modules_are_each_named_once() -> None:
    # A room's modules are named for what they are (no 'daemon/seats/seats.py' beside 'seat.py').
    for room in rooms():
        assert not (room / f"{room.name}.py").exists(), f"daemon/{room.name}/{room.name}.py: name it for what it is"


def test_no_scratch_output_is_committed() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    stray = [name for name in tracked if SCRATCH.search(name) and not name.startswith(KEPT)]
    assert stray == [], "files tests or benches write, committed outside tests/data/ and docs/"


def test_scratch_output_is_ignored() -> None:
    # Anything a run leaves in the work tree is ignored by git, so it cannot be committed by accident.
    names = ["ff.pid", "g.mp4", "bench-results/x.json", "state/cud.sqlite3", "cud.sqlite3-wal", "x.lock"]
    checked = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True)
    assert sorted(checked.stdout.split()) == sorted(names)


def test_ci_runs_ruff_and_mypy_before_the_tests() -> None:
    # CI runs `make test` (through the README's command, tests/test_docs.py): it must lint first, so a
    # ruff or mypy finding fails CI before pytest starts; and the lint is tools/lint, both tools.
    makefile = (ROOT / "Makefile").read_text()
    rules = dict(re.findall(r"^([\w-]+):(.*)$", makefile, re.M))
    assert "lint" in rules["test"].split(), "make test must depend on make lint"
    recipe = makefile[makefile.index("\nlint:"):].split("\n\n")[0]
    assert "tools/lint" in recipe
    lint = (ROOT / "tools" / "lint").read_text()
    assert "-m ruff check" in lint and "-m mypy" in lint
    assert (ROOT / "tools" / "lint").stat().st_mode & 0o111, "tools/lint must be executable"
