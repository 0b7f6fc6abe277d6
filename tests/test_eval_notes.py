"""What ``cuctl eval`` skips and says (#35): a suite folder's project files and ``--exclude GLOB`` are skipped
with a note while a broken spec still stops the suite; a run waiting for the only seat, unavailable, is said
at once on a stderr that is a pipe, and again every minute (:class:`cud.cuctl.progress.WaitNotice`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from cud.cuctl.progress import WAIT_REPEAT_SECONDS, WaitNotice
from cud.errors import SpecError
from cud.suite.plan import plan
from tests.support.daemon import scenario
from tests.support.recorder import wait_until
from tests.support.xserver import XServer

SPEC = 'prompt = "Say done."\nreset = false\n[[checks]]\nanswer = "done"\n'


def suite_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "good.toml").write_text(SPEC)
    (folder / "draft-later.toml").write_text('prompt = "not yet"\nnosuchkey = 1\n')
    (folder / "pyproject.toml").write_text('[project]\nname = "app-under-test"\nversion = "1.0"\n')
    (folder / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    (folder / ".editor.toml").write_text("indent = 4\n")
    return folder


def test_project_files_and_excluded_ones_are_skipped_with_a_note_and_a_broken_spec_still_stops(
        start_daemon, tmp_path: Path) -> None:
    folder = suite_folder(tmp_path / "suite")
    notes: list[str] = []
    planned = plan([str(folder)], exclude=["draft-*"], note=notes.append)
    assert [p.name for p in planned] == [str(folder / "good.toml")]
    assert notes == [f"skipped {folder / '.editor.toml'}: a hidden file",
                     f"skipped {folder / 'draft-later.toml'}: --exclude draft-*",
                     f"skipped {folder / 'package.json'}: a project file, not a spec",
                     f"skipped {folder / 'pyproject.toml'}: a project file, not a spec"]
    # Without --exclude, the draft is a spec like any other: broken, it stops the suite, naming file and key.
    try:
        plan([str(folder)])
        raise AssertionError("a broken spec was skipped")
    except SpecError as exc:
        assert exc.details["spec"] == str(folder / "draft-later.toml") and "nosuchkey" in exc.message, exc.message

    daemon = start_daemon(scenario({"message": "done"}, look_first=False))
    base = [sys.executable, "-m", "cud.cuctl.main", "--socket", str(daemon.socket), "eval"]
    done = subprocess.run([*base, str(folder), "--exclude", "draft-*", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"cuctl eval: skipped {folder / 'pyproject.toml'}: a project file, not a spec" in done.stderr
    assert f"cuctl eval: skipped {folder / 'draft-later.toml'}: --exclude draft-*" in done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["suite"]["specs"] == [str(folder / "good.toml")]
    broken = subprocess.run([*base, str(folder), "--out", str(tmp_path / "out2")], capture_output=True, text=True,
                            timeout=120)
    assert broken.returncode == 2 and "draft-later.toml" in broken.stderr and "nosuchkey" in broken.stderr, \
        broken.stderr


def test_a_run_waiting_for_the_only_seat_unavailable_is_said_on_a_pipe(start_daemon, xvfb: XServer,
                                                                         tmp_path: Path) -> None:
    xvfb.kill()  # the seat's display is gone (its number kept ours): the only seat is unavailable
    daemon = start_daemon(scenario({"message": "done"}, look_first=False))
    wait_until(lambda: daemon.call("seats")[0]["state"] == "unavailable", 30, "the seat unavailable")
    spec = tmp_path / "t.toml"
    spec.write_text(SPEC)
    proc = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--socket", str(daemon.socket), "eval",
                             str(spec), "--out", str(tmp_path / "out")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("waiting:" in line for line in lines), 60, "a line saying why the run waits")
    finally:
        proc.kill()
        proc.wait()
        reader.join(10)
        assert proc.stderr is not None
        proc.stderr.close()
    said = next(line for line in lines if "waiting:" in line)
    assert said.startswith(f"cuctl eval: waiting: {spec} #1 (task ") and "is queued: seat default is unavailable" \
        in said, said


def test_a_wait_is_said_when_it_begins_changes_and_every_minute_while_it_lasts() -> None:
    now = [0.0]
    said: list[str] = []
    notice = WaitNotice(said.append, clock=lambda: now[0])
    notice.update(None)
    notice.update("seat a is unavailable")
    now[0] = WAIT_REPEAT_SECONDS - 1
    notice.update("seat a is unavailable")
    assert said == ["seat a is unavailable"]  # once until a minute has passed
    now[0] = WAIT_REPEAT_SECONDS
    notice.update("seat a is unavailable")
    now[0] += 1
    notice.update("seat a is busy with task 3")  # a new reason: at once
    now[0] += 1
    notice.update(None)
    notice.update("seat a is busy with task 3")  # waiting again after a pause: at once
    assert said == ["seat a is unavailable", "seat a is unavailable", "seat a is busy with task 3",
                    "seat a is busy with task 3"]
    assert WAIT_REPEAT_SECONDS <= 60
