"""cuctl export and replay: the raw record as files, and the same actions driven again from them.

The replay runs on a second, fresh Xvfb with its own recording window, its own
daemon and a scripted model playing nothing but the scenario made from the
export; what reaches that window must be what reached the first one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from cud.errors import ConfigError, ProtocolError
from cud.protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION, parse_message
from cud.record.export import load_export
from cud.record.replay import scenario_from_export
from cud.scripted import ScriptedModel, parse_scenario
from tests.support.daemon import Daemon, cuctl, json_out
from tests.support.recorder import Recorder, wait_until
from tests.support.records import PROMPT, RICH, TYPED, run_rich_task
from tests.support.xserver import start_xvfb, stop_process


def _input(recorder: Recorder, since: int = 0) -> list[tuple[Any, ...]]:
    """What reached the window, pointer motion aside (the path between points is the driver's business)."""
    out: list[tuple[Any, ...]] = []
    for e in recorder.events(since):
        if e["type"] in ("ButtonPress", "ButtonRelease"):
            out.append((e["type"], e["button"], e["x"], e["y"]))
        elif e["type"] in ("KeyPress", "KeyRelease"):
            out.append((e["type"], e["keysym"]))
    return out


def _step_actions(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [[a["action"] for a in e["data"]["actions"]] for e in events if e["kind"] == "step"]


def test_export_writes_the_documented_layout_as_a_directory_and_an_archive(
    start_daemon, recorder: Recorder, tmp_path: Path
) -> None:
    daemon: Daemon = start_daemon(RICH)
    task = run_rich_task(daemon)
    assert task["state"] == "succeeded"
    target = tmp_path / "run"
    result = json_out(cuctl(daemon.socket, "--json", "export", str(task["id"]), "-o", str(target)))
    assert result["path"] == str(target) and result["files"] == 4

    kept = daemon.state_dir / "trajectories" / str(task["id"])
    assert sorted(p.name for p in target.iterdir()) == ["events.jsonl", "manifest.json", "screenshots", "task.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    for path in target.rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    # events.jsonl is exactly the daemon's event log; task.json is `cuctl show --json`.
    events = [json.loads(line) for line in (target / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events == daemon.events(task["id"])
    assert json.loads((target / "task.json").read_text(encoding="utf-8")) == json_out(
        cuctl(daemon.socket, "show", str(task["id"]), "--json"))
    # The screenshots are the daemon's files, byte for byte, under the names the step events use.
    shots = sorted(p.name for p in (target / "screenshots").iterdir())
    assert shots == sorted(p.name for p in kept.iterdir())
    for name in shots:
        assert (target / "screenshots" / name).read_bytes() == (kept / name).read_bytes()
    named = {e["data"][k] for e in events if e["kind"] == "step" for k in ("saw", "screenshot") if e["data"][k]}
    assert named == set(shots)
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["format"] == "cud-export" and manifest["version"] == 1 and manifest["task_id"] == task["id"]
    assert manifest["events"] == len(events)
    assert {f["name"]: f["sha256"] for f in manifest["files"]} == {
        name: hashlib.sha256((kept / name).read_bytes()).hexdigest() for name in shots}

    # The same record as an archive, under task-ID/, reads back identically.
    archive = tmp_path / "run.tar.gz"
    assert cuctl(daemon.socket, "export", str(task["id"]), "-o", str(archive)).returncode == 0
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == sorted(
            [f"task-{task['id']}/{n}" for n in ("events.jsonl", "manifest.json", "task.json")]
            + [f"task-{task['id']}/screenshots/{n}" for n in shots])
    from_dir, from_tar = load_export(target), load_export(archive)
    assert (from_dir.task, from_dir.events, from_dir.files) == (from_tar.task, from_tar.events, from_tar.files)

    # The export holds everything the report is made of: offline, it renders the very same page.
    live, offline = tmp_path / "live.html", tmp_path / "offline.html"
    assert cuctl(daemon.socket, "report", str(task["id"]), "-o", str(live)).returncode == 0
    made = subprocess.run([sys.executable, "-m", "cud.record", "report", str(archive), "-o", str(offline)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert offline.read_bytes() == live.read_bytes()

    # Nothing is overwritten.
    again = cuctl(daemon.socket, "export", str(task["id"]), "-o", str(target))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_a_tampered_export_is_refused_by_name(tmp_path: Path, start_daemon) -> None:
    daemon = start_daemon({"name": "t", "steps": [{"actions": [{"type": "screenshot"}]}, {"message": "ok"}]})
    task_id = daemon.call("submit", prompt="look")["id"]
    daemon.wait_state(task_id, "succeeded")
    target = tmp_path / "x"
    assert cuctl(daemon.socket, "export", str(task_id), "-o", str(target)).returncode == 0
    shot = target / "screenshots" / "step-0001.png"
    shot.write_bytes(shot.read_bytes() + b"x")
    with pytest.raises(ConfigError, match=re.escape("step-0001.png does not match its sha256")):
        load_export(target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["files"][0]["name"] = "../../etc/passwd"
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=re.escape("bad file name '../../etc/passwd'")):
        load_export(target)


def test_replaying_an_export_drives_the_same_actions_on_a_fresh_screen(
    start_daemon, recorder: Recorder, tmp_path: Path, short_tmp: Path
) -> None:
    original: Daemon = start_daemon(RICH)
    mark = recorder.mark()
    task = run_rich_task(original)
    assert task["state"] == "succeeded"
    recorder.wait_text(TYPED + "\n")
    first = _input(recorder, mark)
    assert ("ButtonPress", 1, 200, 150) in first and ("ButtonPress", 3, 1000, 500) in first
    export = tmp_path / "export"
    assert cuctl(original.socket, "export", str(task["id"]), "-o", str(export)).returncode == 0

    scenario = scenario_from_export(export)
    parse_scenario(scenario)  # the scripted model's own validation
    printed = subprocess.run([sys.executable, "-m", "cud.record", "replay", str(export)],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and json.loads(printed.stdout) == scenario
    assert [list(s) for s in scenario["steps"]][-1] == ["message"]
    assert scenario["steps"][2]["safety_checks"] == [{"code": "confirm_typing",
                                                      "message": "About to type <into> the focused window."}]
    # No colour targets or relative positions survive: every pointer action has absolute x/y.
    assert scenario["steps"][1]["actions"] == [{"type": "click", "button": "left", "x": 200, "y": 150}]

    xvfb = start_xvfb(tmp_path)
    workdir = tmp_path / "replay-recorder"
    workdir.mkdir()
    replay_recorder = Recorder(xvfb.display, workdir, f"{xvfb.width}x{xvfb.height}+0+0")
    model = ScriptedModel(scenario)
    daemon = Daemon(xvfb.display, model.start(), workdir=short_tmp)
    try:
        daemon.start()
        replayed = run_rich_task(daemon)
        assert replayed["state"] == "succeeded", replayed
        assert replayed["final_message"] == task["final_message"]
        replay_recorder.wait_text(TYPED + "\n")
        assert _input(replay_recorder) == first
        assert _step_actions(daemon.events(replayed["id"])) == _step_actions(original.events(task["id"]))
        assert replayed["prompt"] == PROMPT
    finally:
        daemon.cleanup()
        model.stop()
        replay_recorder.stop()
        xvfb.stop()


NOISE_APP = """
import base64, io, os, sys, tkinter as tk
from PIL import Image
width, height, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
data = io.BytesIO()
image.save(data, "PNG", compress_level=1)
root = tk.Tk()
root.overrideredirect(True)
root.geometry(f"{width}x{height}+0+0")
photo = tk.PhotoImage(data=base64.b64encode(data.getvalue()))
tk.Label(root, image=photo, borderwidth=0, highlightthickness=0).pack()
def shown():
    root.update_idletasks()
    open(ready, "w").write("ready")
root.after(300, shown)
root.mainloop()
"""


def test_a_record_larger_than_the_message_cap_streams_in_pieces(start_daemon, xvfb: Any, tmp_path: Path) -> None:
    # Random pixels do not compress: each screenshot is several times the socket's 1 MiB message cap.
    ready = tmp_path / "ready"
    app = subprocess.Popen([sys.executable, "-c", NOISE_APP, str(xvfb.width), str(xvfb.height), str(ready)],
                           env={**os.environ, "DISPLAY": xvfb.display}, stdin=subprocess.DEVNULL)
    try:
        wait_until(ready.exists, 30, "the noise window")
        daemon = start_daemon({"name": "big", "steps": [
            {"actions": [{"type": "screenshot"}]}, {"actions": [{"type": "wait"}]}, {"message": "seen"}]})
        task_id = daemon.call("submit", prompt="look at the noise")["id"]
        daemon.wait_state(task_id, "succeeded")
    finally:
        stop_process(app)
    kept = daemon.state_dir / "trajectories" / str(task_id)
    sizes = {p.name: p.stat().st_size for p in kept.iterdir()}
    assert len(sizes) == 2 and min(sizes.values()) > 2 * MAX_MESSAGE_BYTES
    target = tmp_path / "big"
    assert cuctl(daemon.socket, "export", str(task_id), "-o", str(target)).returncode == 0
    for name in sizes:
        assert (target / "screenshots" / name).read_bytes() == (kept / name).read_bytes()
    report = tmp_path / "big.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(report)).returncode == 0
    assert report.stat().st_size > sum(sizes.values())  # both screenshots are in the page


@pytest.mark.parametrize("name", ["../step-0001.png", "/etc/passwd", "step-0001.png/..", "step-1.png", "x.png",
                                  "step-0001.PNG", "step-0001.png\n", 7, None])
def test_a_file_message_with_a_name_that_is_not_a_trajectory_file_is_refused(name: Any) -> None:
    with pytest.raises(ProtocolError, match="bad 'name'"):
        parse_message({"v": PROTOCOL_VERSION, "type": "file", "name": name, "offset": 0, "data": ""})


def test_file_messages_with_a_good_name_and_a_bad_offset_or_data_are_refused() -> None:
    good = {"v": PROTOCOL_VERSION, "type": "file", "name": "step-0012-approval.png", "offset": 0, "data": "iVBO"}
    assert parse_message(dict(good)) == good
    with pytest.raises(ProtocolError, match="bad 'offset'"):
        parse_message({**good, "offset": -1})
    with pytest.raises(ProtocolError, match="string 'data'"):
        parse_message({**good, "data": None})
