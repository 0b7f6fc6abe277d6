"""More of OSWorld's domains end to end with real applications: ``cuctl eval --from-osworld`` over index files
written here in OSWorld's format, on one seat whose home template is cud.osworld.seat's, with scripted models.

Each domain has its own index and its own pair of scripted models (a scripted model plays one scenario for
every task of a run): ``scripted:DOMAIN-right`` does the task, ``scripted:DOMAIN-wrong`` does it subtly wrong.
The tasks are shaped like OSWorld's own:

* multi_apps (like 3680a5ee…): two one-column files are downloaded to the Desktop from a loopback server and a
  terminal is started there; the model merges the columns with ``paste`` into ``output.csv`` and opens it in
  LibreOffice Calc from the terminal. ``check_include_exclude`` over OSWorld's own ``ps`` command (was soffice
  started from a terminal?) and ``compare_csv`` against a ``cloud_file`` gold judge it, ``conj = "and"``. The
  wrong model joins the columns with a space.
* vlc (like fba2c100…): a clip made here with ffmpeg (three seconds of one scene, three of another, lossless)
  is downloaded to the Desktop and launched in VLC with OSWorld's flags (``--start-time``, ``--stop-time``,
  ``--play-and-pause``: it stops on a frame of the first scene); the model takes a snapshot with VLC's
  Shift+S (Video > Take Snapshot). ``compare_images`` judges the ``vm_file`` against a ``cloud_file`` gold
  drawn here, which VLC's snapshot matches pixel for pixel (black and white only survive YUV). OSWorld's
  model moves the snapshot from VLC's folder to the Desktop with a terminal; here the launch names the
  snapshot's file (``--snapshot-path``, a file rather than a folder), so the model acts in VLC alone. The
  wrong model first presses C (crop to 16:10), and its snapshot is the cropped picture.

* thunderbird (like f201fbc3…, 10a730d5…: a setting judged in ``prefs.js``): Thunderbird is launched on the
  seat's profile; the model opens Settings (the button at the foot of the spaces bar), its Appearance pane, and
  picks the message list's "Table view", which Thunderbird keeps as ``mail.threadpane.listview`` = 1. OSWorld's
  postconfig closes the window by class; a wait until Thunderbird has exited (prefs.js written and closed)
  stands in for its ``sleep``. ``check_thunderbird_prefs`` reads the ``vm_file``. The wrong model ticks "Auto
  hide tab bar" beside it instead. Clicks only: keys sent as Gecko opens a menu (View > Layout) were sometimes
  lost under load, so the task goes through the settings page, where each step waits (``until``) for a colour
  of what it clicks on.

OSWorld's tasks start an application and let the model act at once (its agents take seconds to answer); the
scripted model answers at once, so after each ``launch`` an ``execute`` waits until the application's window
is up.
"""

from __future__ import annotations

import functools
import io
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from cud.daemon.session.user import SeatUser
from tests.support.http_files import Served, serve_files
from tests.support.osworld_e2e import osworld_seat, run, task, write_index
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat

FIRST = b"alpha\nbeta\ngamma\n"
SECOND = b"-one\n-two\n-three\n"
GOLD_CSV = b"alpha-one\nbeta-two\ngamma-three\n"
CLIP = "/home/user/Desktop/scenes.mp4"
PROFILE = "/home/user/.thunderbird/cud.default-release"
SIZE = (320, 240)


def scene(left: int) -> Image.Image:
    """A white box at ``left`` on black: two scenes of the clip that differ in grey at every scale."""
    picture = Image.new("RGB", SIZE, (0, 0, 0))
    ImageDraw.Draw(picture).rectangle([left, 64, left + 95, 175], fill=(255, 255, 255))
    return picture


def png(picture: Image.Image) -> bytes:
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


@functools.cache
def clip() -> bytes:
    """Three seconds of scene(32), then three of scene(192), at 10 frames a second: H.264, lossless."""
    with tempfile.TemporaryDirectory(prefix="cud-clip-") as folder:
        first, second, out = Path(folder, "a.png"), Path(folder, "b.png"), Path(folder, "scenes.mp4")
        first.write_bytes(png(scene(32)))
        second.write_bytes(png(scene(192)))
        subprocess.run(["ffmpeg", "-loglevel", "error", "-nostdin", "-y", "-loop", "1", "-t", "3", "-r", "10",
                        "-i", str(first), "-loop", "1", "-t", "3", "-r", "10", "-i", str(second),
                        "-filter_complex", "[0][1]concat=n=2:v=1", "-c:v", "libx264", "-qp", "0",
                        "-pix_fmt", "yuv420p", "-g", "10", str(out)], check=True, timeout=120)
        return out.read_bytes()


def _keys(*keys: str) -> dict[str, Any]:
    return {"actions": [{"type": "keypress", "keys": list(keys)}]}


def _typed(text: str) -> dict[str, Any]:
    return {"actions": [{"type": "type", "text": text}]}


def merging(separator: str) -> list[dict[str, Any]]:
    """In the terminal: join the columns with ``separator`` into output.csv, then open it in Calc from there."""
    return [
        {"actions": [{"type": "screenshot"}]},
        _typed(f"paste -d '{separator}' first.txt second.txt > output.csv && soffice --calc output.csv &"),
        _keys("ENTER"),
        {"actions": [{"type": "wait"}]},
        {"message": "Done: output.csv is merged and open in Calc."},
    ]


def snapshot(*before: str) -> list[dict[str, Any]]:
    """VLC's keys ``before``, then its snapshot key, twice: the first may come before VLC shows a picture (it then
    saves nothing), the second writes the same picture again."""
    return [
        {"actions": [{"type": "screenshot"}]},
        *[_keys(key) for key in before],
        _keys("SHIFT", "s"),
        {"actions": [{"type": "wait"}]},
        _keys("SHIFT", "s"),
        {"actions": [{"type": "wait"}]},
        {"message": "Done: the snapshot is on the Desktop."},
    ]


#: In Thunderbird's main window, maximized by openbox on the seat's 1280x800 screen: the Settings button at the foot
#: of the spaces bar, the Appearance pane's entry, and two choices of that pane: the message list's "Table view"
#: and "Auto hide tab bar".
SETTINGS, APPEARANCE, TABLE_VIEW, AUTO_HIDE_TABS = (22, 733), (133, 243), (574, 689), (345, 430)
#: What shows once each click's target is drawn: the selected space's blue (the spaces bar), the selected settings
#: category's grey (the Settings tab), the selected view style's pale blue (the Appearance pane).
SPACES_DRAWN, SETTINGS_DRAWN, APPEARANCE_DRAWN = "#3584e4", "#e4e4e7", "#eef5fd"


def _click(at: tuple[int, int], drawn: str) -> dict[str, Any]:
    """A click at ``at`` once the screen shows ``drawn`` (the scripted model waits up to 60 looks for it)."""
    return {"actions": [{"type": "click", "button": "left", "x": at[0], "y": at[1]}],
            "until": {"color": drawn, "looks": 60}}


def setting(choice: tuple[int, int]) -> list[dict[str, Any]]:
    """Thunderbird's Settings, its Appearance pane, and a click on ``choice`` there."""
    return [
        {"actions": [{"type": "screenshot"}]},
        _click(SETTINGS, SPACES_DRAWN),
        _click(APPEARANCE, SETTINGS_DRAWN),
        _click(choice, APPEARANCE_DRAWN),
        {"actions": [{"type": "wait"}]},
        {"message": "Done: the message list is a table now."},
    ]


SCENARIOS = {
    "multi_apps-right": {"name": "multi_apps-right", "steps": merging("\\0")},
    "multi_apps-wrong": {"name": "multi_apps-wrong", "steps": merging(" ")},
    "vlc-right": {"name": "vlc-right", "steps": snapshot()},
    "vlc-wrong": {"name": "vlc-wrong", "steps": snapshot("c")},
    "thunderbird-right": {"name": "thunderbird-right", "steps": setting(TABLE_VIEW)},
    "thunderbird-wrong": {"name": "thunderbird-wrong", "steps": setting(AUTO_HIDE_TABS)},
}


def window_up(text: str) -> dict[str, Any]:
    """An ``execute`` that waits (up to two minutes) until a window whose class or title holds ``text`` is mapped."""
    return {"type": "execute", "parameters": {"command": [
        "/bin/sh", "-c", 'for i in $(seq 240); do wmctrl -lx | grep -qF -- "$1" && exit 0; sleep 0.5; done; exit 1',
        "window_up", text]}}


def multi_apps_task(base: str) -> dict[str, Any]:
    return task(
        "libreoffice_calc",
        "first.txt and second.txt on my Desktop each hold one column. Using only the command line, join each row "
        "of the first with the same row of the second into one string, save the column as ~/Desktop/output.csv and "
        "open it in LibreOffice Calc from the terminal.",
        [{"type": "download", "parameters": {"files": [
            {"url": f"{base}/multi/first.txt", "path": "/home/user/Desktop/first.txt"},
            {"url": f"{base}/multi/second.txt", "path": "/home/user/Desktop/second.txt"}]}},
         # OSWorld: gnome-terminal --maximize --working-directory=/home/user/Desktop; the seat has xterm.
         {"type": "launch", "parameters": {"command": "cd /home/user/Desktop && exec xterm -maximized",
                                           "shell": True}},
         window_up("xterm.XTerm")],
        {"func": ["check_include_exclude", "compare_csv"], "conj": "and",
         "result": [
             {"type": "vm_command_line", "command": [
                 "/bin/bash", "-c",
                 "output=$(ps aux | grep \"[s]office\" | awk '{print $7}' | grep -E \"pts/|tty\"); "
                 "if [ -z \"$output\" ]; then echo \"use no terminal\"; else echo \"use terminal\"; fi;"]},
             {"type": "vm_file", "path": "/home/user/Desktop/output.csv", "dest": "output.csv"}],
         "expected": [
             {"type": "rule", "rules": {"include": ["use terminal"]}},
             {"type": "cloud_file", "path": f"{base}/multi/output_gold.csv", "dest": "output_gold.csv"}]},
        ["libreoffice_calc", "terminal"])


def vlc_task(base: str) -> dict[str, Any]:
    return task(
        "base_setup", "Snap a photo of the scene the video stopped on and keep it on the Desktop as scene.png.",
        [{"type": "download", "parameters": {"files": [{"url": f"{base}/vlc/scenes.mp4", "path": CLIP}]}},
         {"type": "launch", "parameters": {
             "command": "VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show --start-time=1 --stop-time=2 "
                        f"--play-and-pause --snapshot-path=/home/user/Desktop/scene.png '{CLIP}'",
             "shell": True}},
         window_up("scenes.mp4 - VLC media player"),
         {"type": "activate_window", "parameters": {"window_name": "scenes.mp4 - VLC media player"}}],
        {"func": "compare_images",
         "expected": {"type": "cloud_file", "path": f"{base}/vlc/scene_gold.png", "dest": "scene_gold.png"},
         "result": {"type": "vm_file", "path": "/home/user/Desktop/scene.png", "dest": "scene.png"}},
        ["vlc"])


def thunderbird_task() -> dict[str, Any]:
    return task(
        "thunderbird",
        "In Thunderbird, list my messages as a table, one line each, not as cards.",
        # The window's first title is the bare "Mozilla Thunderbird"; its tab's name comes first once the tab is up.
        [{"type": "launch", "parameters": {"command": ["/usr/bin/thunderbird"]}}, window_up(" - Mozilla Thunderbird")],
        {"postconfig": [
            # Not strict, unlike OSWorld's: Debian's Thunderbird's class is Mail.thunderbird-default.
            {"type": "close_window", "parameters": {"window_name": "Mail.thunderbird", "strict": False,
                                                    "by_class": True}},
            # OSWorld sleeps 0.5 s here; Thunderbird writes prefs.js as it exits, so wait for the exit.
            {"type": "execute", "parameters": {"command": [
                "/bin/sh", "-c",
                "for i in $(seq 120); do pgrep -u \"$(id -u)\" thunderbird >/dev/null || exit 0; sleep 0.5; done"]}}],
         "func": "check_thunderbird_prefs",
         "result": {"type": "vm_file", "path": f"{PROFILE}/prefs.js", "dest": "thunder-prefs.js"},
         "expected": {"type": "rule", "rules": {"expect": {
             "mail.threadpane.listview": {"method": "eq", "ref": 1}}}}},
        ["thunderbird"])


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serve_files({"/multi/first.txt": FIRST, "/multi/second.txt": SECOND,
                      "/multi/output_gold.csv": GOLD_CSV, "/vlc/scenes.mp4": clip(),
                      "/vlc/scene_gold.png": png(scene(32))}) as s:
        yield s


@pytest.fixture(scope="module")
def judge(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, judge: SeatUser) -> Iterator[SpecSeat]:
    with osworld_seat(seat_users, judge, SCENARIOS, "multi_apps-wrong") as s:
        yield s


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory, served: Served) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("osworld") / "evaluation_examples"
    return {
        "multi_apps": write_index(root, {"multi_apps": {"merge-columns": multi_apps_task(served.base)}}, "multi_apps"),
        "vlc": write_index(root, {"vlc": {"scene-snapshot": vlc_task(served.base)}}, "vlc"),
        "thunderbird": write_index(root, {"thunderbird": {"table-view": thunderbird_task()}}, "thunderbird"),
    }


def checks(run: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each check's outcome and why, by name."""
    return {c["name"]: (c["outcome"], c["why"]) for c in run["checks"]}


def test_multi_apps_merged_in_a_terminal_and_opened_from_it_passes(
        seat: SpecSeat, indexes: dict[str, Path], served: Served, tmp_path: Path) -> None:
    runs = run(seat, indexes["multi_apps"], tmp_path / "out", "scripted:multi_apps-right")
    merged = runs["multi_apps/merge-columns"]
    assert (merged["state"], merged["outcome"]) == ("succeeded", "passed"), json.dumps(merged, indent=1)
    assert "/multi/first.txt" in served.requested and "/multi/output_gold.csv" in served.requested


def test_multi_apps_joined_with_a_space_fails_on_compare_csv(
        seat: SpecSeat, indexes: dict[str, Path], tmp_path: Path) -> None:
    merged = run(seat, indexes["multi_apps"], tmp_path / "out", "scripted:multi_apps-wrong")["multi_apps/merge-columns"]
    assert (merged["state"], merged["outcome"]) == ("succeeded", "failed"), json.dumps(merged, indent=1)
    by_name = checks(merged)
    assert by_name["check_include_exclude on vm_command_line"][0] == "passed", by_name  # Calc was opened from it
    outcome, why = by_name["compare_csv on vm_file"]
    assert outcome == "failed" and "OSWorld's compare_csv scored 0" in why, by_name


def test_vlc_snapshot_of_the_scene_passes(seat: SpecSeat, indexes: dict[str, Path], served: Served,
                                          tmp_path: Path) -> None:
    shot = run(seat, indexes["vlc"], tmp_path / "out", "scripted:vlc-right")["vlc/scene-snapshot"]
    assert (shot["state"], shot["outcome"]) == ("succeeded", "passed"), json.dumps(shot, indent=1)
    assert "/vlc/scenes.mp4" in served.requested and "/vlc/scene_gold.png" in served.requested


def test_vlc_snapshot_of_a_cropped_picture_fails_on_compare_images(
        seat: SpecSeat, indexes: dict[str, Path], tmp_path: Path) -> None:
    shot = run(seat, indexes["vlc"], tmp_path / "out", "scripted:vlc-wrong")["vlc/scene-snapshot"]
    assert (shot["state"], shot["outcome"]) == ("succeeded", "failed"), json.dumps(shot, indent=1)
    outcome, why = checks(shot)["compare_images on vm_file"]
    assert outcome == "failed" and "OSWorld's compare_images scored 0." in why, why


def test_thunderbird_table_view_passes_on_its_prefs(seat: SpecSeat, indexes: dict[str, Path], tmp_path: Path) -> None:
    table = run(seat, indexes["thunderbird"], tmp_path / "out", "scripted:thunderbird-right")["thunderbird/table-view"]
    assert (table["state"], table["outcome"]) == ("succeeded", "passed"), json.dumps(table, indent=1)


def test_thunderbird_another_setting_fails_on_check_thunderbird_prefs(
        seat: SpecSeat, indexes: dict[str, Path], tmp_path: Path) -> None:
    table = run(seat, indexes["thunderbird"], tmp_path / "out", "scripted:thunderbird-wrong")["thunderbird/table-view"]
    assert (table["state"], table["outcome"]) == ("succeeded", "failed"), json.dumps(table, indent=1)
    outcome, why = checks(table)["check_thunderbird_prefs on vm_file"]
    assert outcome == "failed" and "OSWorld's check_thunderbird_prefs scored 0" in why, why
