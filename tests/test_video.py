"""Each task on an X11 seat recorded by ffmpeg: the real daemon, Xvfb, the scripted model, ffprobe, Chromium.

The scene is a full-screen window that changes to the next of a list of random
colours (seed printed on failure) at every click, so each step leaves a screen
unlike the one before it, and a video frame from the wrong moment cannot pass
for the right one.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cud.daemon.config import load_config
from cud.daemon.video.config import VideoConfig, load_video
from cud.daemon.video.recorder import FIRST_FRAME_SECONDS, ffmpeg_command
from cud.errors import ConfigError
from tests.support.daemon import Daemon, cuctl, json_out
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, stop_process

FPS = 5
VIDEO = f"[video]\nenabled = true\nfps = {FPS}\n"
#: Seconds the scripted model takes to answer each turn: the screen stays as the step's
#: screenshot shows it for that long, so a frame from inside that window must match it.
THINK = 1.0
CLICKS = 3
#: Mean absolute difference (0-255, per channel) a lossy frame may have from the PNG of the
#: same flat colour: x264's crf 30 in yuv420p moves a flat colour by a few levels at most.
SAME = 12.0
#: Two of the scene's colours differ by at least this much (they are drawn that way).
APART = 60.0


def _colours(rng: random.Random, count: int) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    while len(out) < count:
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        if all(sum(abs(a - b) for a, b in zip(colour, other, strict=True)) / 3 >= APART for other in out):
            out.append(colour)
    return out


class Board:
    def __init__(self, xvfb: XServer, workdir: Path, colours: list[tuple[int, int, int]]) -> None:
        self.colours = colours
        ready = workdir / "board.ready"
        app = Path(__file__).parent / "support" / "colour_board.py"
        self.proc = subprocess.Popen(
            [sys.executable, str(app), str(ready), f"{xvfb.width}x{xvfb.height}+0+0",
             *("#{:02x}{:02x}{:02x}".format(*c) for c in colours)],
            env={**os.environ, "DISPLAY": xvfb.display}, stdin=subprocess.DEVNULL,
        )
        wait_until(ready.exists, 30, "the colour board to map")

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("CUD_TEST_SEED", random.randrange(1 << 30)))
    print(f"video test seed {value} (CUD_TEST_SEED={value} repeats it)")
    return value


@pytest.fixture
def board(xvfb: XServer, tmp_path: Path, seed: int) -> Iterator[Board]:
    made = Board(xvfb, tmp_path, _colours(random.Random(seed), CLICKS + 1))
    yield made
    made.stop()


def _clicks(rng: random.Random, xvfb: XServer) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"actions": [{"type": "screenshot"}]}]
    for _ in range(CLICKS):
        x, y = rng.randrange(xvfb.width), rng.randrange(xvfb.height)
        steps.append({"actions": [{"type": "click", "button": "left", "x": x, "y": y}], "delay": THINK})
    steps.append({"message": "done", "delay": THINK})
    return {"name": "colours", "steps": steps}


def _probe(path: Path) -> dict[str, Any]:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_entries",
                          "format=duration,format_name:stream=codec_name,width,height,nb_read_frames", "-of", "json",
                          str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def _seconds_on_disk(path: Path) -> float:
    """How much of a growing video ffprobe can read now (0 if nothing yet)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60)
    try:
        return float(json.loads(out.stdout)["format"]["duration"])
    except (ValueError, KeyError):
        return 0.0


def _frame(path: Path, seconds: float) -> Image.Image:
    out = subprocess.run(["ffmpeg", "-v", "error", "-ss", f"{seconds:.3f}", "-i", str(path), "-frames:v", "1",
                          "-f", "image2pipe", "-c:v", "png", "-"], capture_output=True, timeout=60)
    assert out.returncode == 0 and out.stdout, out.stderr
    return Image.open(io.BytesIO(out.stdout)).convert("RGB")


def _difference(a: Image.Image, b: Image.Image, box: tuple[int, int, int, int]) -> float:
    """Mean absolute difference per channel of ``box`` in both pictures, 0-255."""
    pa, pb = a.crop(box).tobytes(), b.crop(box).tobytes()
    return sum(abs(x - y) for x, y in zip(pa, pb, strict=True)) / len(pa)


def _epoch(at: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def _kind(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def test_a_recorded_task_plays_for_its_duration_and_its_frames_show_each_step(
        start_daemon, board: Board, xvfb: XServer, seed: int, tmp_path: Path) -> None:
    daemon: Daemon = start_daemon(_clicks(random.Random(seed), xvfb), config=VIDEO)
    task_id = daemon.call("submit", prompt="click through the colours")["id"]
    task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "succeeded", task
    events = daemon.events(task_id)
    started, = _kind(events, "video_started")
    finished, = _kind(events, "video_finished")
    assert _kind(events, "video_failed") == []
    assert finished["data"]["how"] == "q"
    folder = daemon.state_dir / "trajectories" / str(task_id)
    video = folder / "video.mp4"
    assert oct(video.stat().st_mode & 0o777) == oct(0o600)
    assert finished["data"]["bytes"] == video.stat().st_size

    probe = _probe(video)
    stream, = probe["streams"]
    assert (stream["codec_name"], stream["width"], stream["height"]) == ("h264", xvfb.width, xvfb.height)
    duration = float(probe["format"]["duration"])
    # The video runs from its first frame to the moment it was stopped, right before the
    # task's end; frames come every 1/fps, so either end may be off by a frame, and
    # ffmpeg's stop after `q` finishes within the recorder's bound.
    recorded = _epoch(task["finished_at"]) - started["data"]["start_epoch"]
    assert abs(duration - recorded) <= 2 / FPS + 0.5, (duration, recorded)
    # ...and its first frame comes after the task's start, no later than the recorder's own
    # allowance for ffmpeg's load and x11grab's first grab (a literal tighter than that fails
    # a loaded machine the recorder itself accepts), give or take a frame.
    first_frame = started["data"]["start_epoch"] - _epoch(task["started_at"])
    assert -1 / FPS <= first_frame <= FIRST_FRAME_SECONDS + 1 / FPS, (first_frame, FIRST_FRAME_SECONDS)
    assert int(stream["nb_read_frames"]) >= (duration - 1) * FPS

    steps = _kind(events, "step")
    shots = [s for s in steps if s["data"]["screenshot"]]
    assert len(shots) == CLICKS + 1
    box = (xvfb.width // 4, xvfb.height // 4, 3 * xvfb.width // 4, 3 * xvfb.height // 4)
    for number, step in enumerate(shots):
        screenshot = Image.open(folder / step["data"]["screenshot"]).convert("RGB")
        # The step's screenshot was taken just before its event; the model then "thinks"
        # for THINK seconds, so the frame half-way into that shows the same screen.
        at = _epoch(step["at"]) - started["data"]["start_epoch"] + THINK / 2
        frame = _frame(video, at)
        assert frame.size == screenshot.size
        near = _difference(frame, screenshot, box)
        assert near <= SAME, (number, at, near, seed)
        # And it is not any other step's screen: the check can tell moments apart.
        for other in shots:
            if other is not step:
                picture = Image.open(folder / other["data"]["screenshot"]).convert("RGB")
                assert _difference(frame, picture, box) >= APART / 2, (number, other["data"]["step"], seed)

    out = tmp_path / "out.mp4"
    written = json_out(cuctl(daemon.socket, "--json", "video", str(task_id), "-o", str(out)))
    assert written["complete"] is True and written["bytes"] == video.stat().st_size
    assert out.read_bytes() == video.read_bytes()
    again = cuctl(daemon.socket, "video", str(task_id), "-o", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr


def _running(proc_pid: int) -> bool:
    try:
        with open(f"/proc/{proc_pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_kill_9_of_the_daemon_mid_recording_leaves_no_ffmpeg_and_a_playable_marked_file(
        start_daemon, board: Board, xvfb: XServer, tmp_path: Path) -> None:
    long = {"name": "long", "steps": [{"actions": [{"type": "screenshot"}]},
                                       {"actions": [{"type": "click", "button": "left", "x": 5, "y": 5}]},
                                       {"message": "never", "delay": 120}]}
    daemon: Daemon = start_daemon(long, config=VIDEO)
    task_id = daemon.call("submit", prompt="wait a long time")["id"]
    started = wait_until(lambda: _kind(daemon.events_now(task_id), "video_started"), 30, "the video to start")
    pid = started[0]["data"]["pid"]
    assert _running(pid)
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert b"ffmpeg" in fh.read()
    # Past the first fragments: what a killed recorder leaves must hold some seconds.
    wait_until(lambda: _kind(daemon.events_now(task_id), "step"), 30, "the first step")
    video = daemon.state_dir / "trajectories" / str(task_id) / "video.mp4"
    wait_until(lambda: _seconds_on_disk(video) >= 2, 30, "two seconds of fragments on disk")
    daemon.kill9()
    wait_until(lambda: not _running(pid), 10, f"ffmpeg (pid {pid}) to end with the daemon")

    decoded = subprocess.run(["ffmpeg", "-v", "error", "-i", str(video), "-f", "null", "-"],
                             capture_output=True, text=True, timeout=60)
    assert decoded.returncode == 0 and decoded.stderr == "", decoded.stderr
    assert float(_probe(video)["format"]["duration"]) > 0
    daemon.start()  # the task is marked interrupted; its video stays, marked as cut short
    task = daemon.wait_state(task_id, "interrupted")
    events = daemon.events_now(task_id)
    assert _kind(events, "video_finished") == []
    written = json_out(cuctl(daemon.socket, "--json", "video", str(task_id), "-o", str(tmp_path / "cut.mp4")))
    assert written["complete"] is False and task["state"] == "interrupted"
    plain = cuctl(daemon.socket, "video", str(task_id), "-o", str(tmp_path / "cut2.mp4"))
    assert "cut short" in plain.stdout


def test_a_recorder_that_cannot_start_is_an_event_and_the_task_still_succeeds(
        start_daemon, xvfb: XServer, tmp_path: Path) -> None:
    # A PATH with setpriv but no ffmpeg: the recorder fails, the task does not.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink("/usr/bin/setpriv", bin_dir / "setpriv")
    daemon: Daemon = start_daemon({"name": "t", "steps": [{"actions": [{"type": "screenshot"}]}, {"message": "ok"}]},
                                  config=VIDEO, extra_env={"PATH": f"{bin_dir}:{os.path.dirname(sys.executable)}"})
    task_id = daemon.call("submit", prompt="look")["id"]
    assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"
    failed, = _kind(daemon.events(task_id), "video_failed")
    assert failed["data"]["stage"] == "start" and "ffmpeg not found" in failed["data"]["message"]
    missing = cuctl(daemon.socket, "video", str(task_id))
    assert missing.returncode == 2 and f"task {task_id} has no video" in missing.stderr


@pytest.mark.parametrize("table, key", [
    ({"enabled": "yes"}, "video.enabled"), ({"fps": 0}, "video.fps"), ({"fps": 2.5}, "video.fps"),
    ({"fps": 16}, "video.fps"), ({"size": "1280*800"}, "video.size"), ({"size": "8x8"}, "video.size"),
    ({"scale": 0}, "video.scale"), ({"scale": 1.5}, "video.scale"), ({"scale": 0.5, "size": "640x400"}, "video.size"),
    ({"codec": "hevc"}, "video.codec"), ({"crf": 52}, "video.crf"), ({"codec": "vp9", "crf": 64}, "video.crf"),
    ({"preset": "placebo"}, "video.preset"), ({"codec": "vp8", "preset": "fast"}, "video.preset"),
    ({"tune": "grain"}, "video.tune"), ({"keyframe_seconds": 0}, "video.keyframe_seconds"),
    ({"colour": "red"}, "video.colour"),
])
def test_a_bad_video_value_is_a_config_error_naming_key_and_value(table: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_video(table)
    assert caught.value.details["key"] == key
    assert repr(key) in caught.value.message
    if len(table) == 1 and key != "video.colour":  # the value itself is named too
        assert repr(next(iter(table.values()))) in caught.value.message


def test_video_config_through_the_config_file_and_its_frame_sizes(tmp_path: Path) -> None:
    path = tmp_path / "cud.toml"
    path.write_text('display = ":9"\n[video]\nenabled = true\nfps = 3\nscale = 0.5\n')
    config = load_config(path, env={"XDG_RUNTIME_DIR": str(tmp_path)})
    assert config.video == VideoConfig(enabled=True, fps=3, scale=0.5)
    assert config.video.frame_size((1280, 800)) == (640, 400)
    assert config.video.frame_size((1279, 799)) == (640, 400)  # even: yuv420p needs it
    assert load_config(None, {"display": ":9"}, env={"XDG_RUNTIME_DIR": str(tmp_path)}).video.enabled is False
    rng = random.Random(5)
    for _ in range(200):  # any accepted size gives even dimensions and a scale filter only when needed
        w, h = rng.randrange(16, 4000), rng.randrange(16, 3000)
        video = load_video({"size": f"{w}x{h}"})
        argv = ffmpeg_command(video, ":9", (1280, 800), tmp_path / "v.mp4", 60, 1 << 20)
        fw, fh = video.frame_size((1280, 800))
        assert fw % 2 == 0 and fh % 2 == 0
        assert ("-vf" in argv) == ((fw, fh) != (1280, 800))
        assert argv[:5] == ["setpriv", "--pdeathsig", "KILL", "--", "ffmpeg"]


PLAY = """(async () => {
  const video = document.getElementById("video");
  if (video.readyState < 1) await new Promise((ok, bad) => {
    video.addEventListener("loadedmetadata", ok, { once: true });
    video.addEventListener("error", () => bad(new Error("video error " + (video.error && video.error.message))));
  });
  video.muted = true;
  await video.play();
  await new Promise((ok) => { const tick = () => video.currentTime > 0.3 ? ok() : setTimeout(tick, 50); tick(); });
  video.pause();
  const marks = [...document.querySelectorAll(".timeline a")];
  const last = marks[marks.length - 1];
  const seeked = new Promise((ok) => video.addEventListener("seeked", ok, { once: true }));
  last.click();  // the page's own script seeks
  await seeked;
  return {
    width: video.videoWidth, height: video.videoHeight, duration: video.duration, played: video.played.length,
    error: video.error && video.error.message, time: video.currentTime, wanted: Number(last.dataset.t),
    marks: marks.map((a) => a.textContent), links: [...document.querySelectorAll("a.seek")].length,
    scripts: document.scripts.length,
  };
})()"""


CONSOLE_PLAY = """(async () => {
  const video = document.getElementById("task-video");
  if (video.readyState < 1) await new Promise((ok) => video.addEventListener("loadedmetadata", ok, { once: true }));
  const buttons = [...document.querySelectorAll("#events button.seek")];
  const last = buttons[buttons.length - 1];
  const wanted = Number(last.textContent.split(":")[0].slice(2)) * 60 + Number(last.textContent.split(":")[1]);
  const seeked = new Promise((ok) => video.addEventListener("seeked", ok, { once: true }));
  last.click();
  await seeked;
  return { error: video.error && video.error.message, width: video.videoWidth, height: video.videoHeight,
           time: video.currentTime, wanted };
})()"""


def test_the_report_plays_the_video_in_chromium_and_its_marks_seek(
        start_daemon, board: Board, xvfb: XServer, seed: int, tmp_path: Path) -> None:
    from tests.support.browser import Browser
    from tests.support.console import Console

    daemon: Daemon = start_daemon(_clicks(random.Random(seed), xvfb), config=VIDEO)
    task_id = daemon.call("submit", prompt="click through the colours")["id"]
    assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"
    page_path = tmp_path / "report.html"
    made = cuctl(daemon.socket, "report", str(task_id), "-o", str(page_path))
    assert made.returncode == 0, made.stderr
    page = page_path.read_text()
    # report and export count the record's files alike: its screenshots, and the video apart.
    shots = len(list((daemon.state_dir / "trajectories" / str(task_id)).glob("step-*.png")))
    assert shots > 1
    assert f"(succeeded, {shots} screenshots, the video, {len(page.encode())} bytes)" in made.stdout, made.stdout
    assert page.count('<video id="video"') == 1 and 'src="data:video/mp4;base64,' in page
    browser = Browser(tmp_path)
    console = Console(daemon.socket, daemon.dir)
    try:
        seen = browser.inspect(page_path.as_uri(), PLAY)
        watched = browser.open(console.url, width=1400, height=1000)
        try:
            watched.page.wait_for_selector("#status.ok")
            watched.page.click(f'#tasks tr[data-id="{task_id}"]')
            watched.page.wait_for_selector("#task-video-box:not([hidden])")
            buttons = watched.page.locator("#events button.seek")
            # Every step's line seeks the console's player; the lines arrive as the page reads the events.
            wait_until(lambda: buttons.count() == CLICKS + 2, 15, f"{CLICKS + 2} seek buttons")
            in_console = watched.page.evaluate(CONSOLE_PLAY)
            assert watched.report.problems() == [] and watched.report.foreign(console.origin) == []
        finally:
            watched.close()
    finally:
        browser.close()
        assert console.stop() == 0, console.log_text()
    assert in_console["error"] is None and (in_console["width"], in_console["height"]) == (xvfb.width, xvfb.height)
    assert abs(in_console["time"] - in_console["wanted"]) <= 1 / FPS, in_console
    assert seen.problems() == [], seen.problems()
    assert seen.foreign("file://") == []
    value = seen.value
    assert value["error"] is None and value["played"] >= 1
    assert (value["width"], value["height"]) == (xvfb.width, xvfb.height)
    # A mark per step (the first screenshot, the clicks, the final message) under the video.
    assert value["marks"] == [str(n) for n in range(1, CLICKS + 3)]
    assert value["links"] == CLICKS + 2  # and each step's heading links to its moment
    assert abs(value["time"] - value["wanted"]) <= 1 / FPS  # seeking lands on the step's frame
    assert value["scripts"] == 1

    export = tmp_path / "export"
    exported = cuctl(daemon.socket, "export", str(task_id), "-o", str(export))
    assert exported.returncode == 0 and exported.stdout.endswith(f" events, {shots} screenshots, the video\n"), exported
    manifest = json.loads((export / "manifest.json").read_text())
    assert "video.mp4" in [f["name"] for f in manifest["files"]]
    assert (export / "video.mp4").read_bytes() == (daemon.state_dir / "trajectories" / str(task_id)
                                                   / "video.mp4").read_bytes()
