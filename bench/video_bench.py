"""Video (issue 23): what recording a seat costs. ffmpeg's CPU share, MB per minute, and steps/s with video on.

1. **One recorder alone**, at 1280x800 and 1920x1080: a private Xvfb with the
   benchmarks' busy scene (``bench/scene.py``) and a Tk entry that xdotool types
   into four times a second (so frames differ, as in a task), recorded for
   ``SECONDS`` by the daemon's own command line (``cud.daemon.video.recorder.ffmpeg_command``)
   with the default ``[video]`` and a few alternatives. CPU share = ffmpeg's CPU
   seconds (/proc) / wall seconds (1.00 = one core); MB/min from the file's size.
2. **Steps/s at 1, 4 and 8 seats** with video off and on (the defaults), alternating,
   ``REPEATS`` times each, medians reported: the seats
   bench's rounds (``bench/seats_bench.py``: its scene, scenario and counting),
   with a 0 s model (the machine's CPU ceiling, where video's cost shows most) and
   a 1 s model (a model that thinks). ffmpeg's CPU is the daemon's reaped
   children's (cutime + cstime), per recording seat over the round's wall time.

Issue 23's target: 8 recording seats within 10% of the steps/s of 8 seats without video.
Run alone: ``.venv/bin/python -m bench.video_bench [--seconds 10 --seats 1,8]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import seats_bench
from bench.procstat import cpu_seconds
from bench.scene import show_busy_scene, show_entry
from bench.stats import table
from cud.daemon.video.config import VideoConfig
from cud.daemon.video.recorder import ffmpeg_command
from cud.scripted import ScriptedModel
from tests.support.xserver import start_xvfb, stop_process

SECONDS = 20.0
SIZES = ((1280, 800), (1920, 1080))
DEFAULT = VideoConfig(enabled=True)
#: Alternatives measured at 1280x800 beside the default, to show what the default saves.
ALTERNATIVES = (("ultrafast", replace(DEFAULT, preset="ultrafast")), ("8 fps", replace(DEFAULT, fps=8)),
                ("scale 0.5", replace(DEFAULT, scale=0.5)), ("vp8", replace(DEFAULT, codec="vp8", crf=36)))
SEAT_COUNTS = (1, 4, 8)
LATENCIES = (0.0, 1.0)
TASKS_PER_SEAT = 2
TURNS = 10
TARGET_LOSS = 0.10
REPEATS = 3
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Alone:
    name: str
    size: tuple[int, int]
    cpu_share: float
    mb_per_minute: float
    frames: int


def _children_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / _TICKS  # cutime, cstime: reaped children's


def record_alone(name: str, video: VideoConfig, size: tuple[int, int], seconds: float) -> Alone:
    workdir = Path(tempfile.mkdtemp(prefix="cud-bench-video-"))
    xvfb = start_xvfb(workdir, *size)
    apps = [show_busy_scene(xvfb.display, *size), show_entry(xvfb.display, f"600x36+40+{size[1] - 80}")]
    path = workdir / f"v.{video.extension}"
    env = {**os.environ, "DISPLAY": xvfb.display}
    try:
        argv = ffmpeg_command(video, xvfb.display, size, path, seconds + 30, 1 << 34)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)  # past start-up: the share is of steady recording
            before, started = cpu_seconds(proc.pid), time.monotonic()
            end = started + seconds
            n = 0
            while time.monotonic() < end:  # a letter at a time, as a task types
                subprocess.run(["xdotool", "type", "--delay", "0", "abcdefghijklmnopqrstuvwxyz "[n % 27]],
                               env=env, check=True)
                n += 1
                time.sleep(0.25)
            cpu, wall = cpu_seconds(proc.pid) - before, time.monotonic() - started
            assert proc.stdin is not None
            proc.stdin.write(b"q")
            proc.stdin.close()
            proc.wait(30)
        finally:
            stop_process(proc)
        probe = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_entries",
                                "format=duration:stream=nb_read_packets", "-of", "csv=p=0", str(path)],
                               capture_output=True, text=True, check=True).stdout.split()
        frames, duration = int(probe[0].strip(",")), float(probe[-1].strip(","))
        return Alone(name, size, cpu / wall, path.stat().st_size / 1e6 / duration * 60, frames)
    finally:
        for app in apps:
            stop_process(app)  # type: ignore[arg-type]
        xvfb.stop()
        for child in workdir.iterdir():
            child.unlink()
        workdir.rmdir()


@dataclass(frozen=True)
class WithVideo:
    seats: int
    latency: float
    off: float  # steps/s
    on: float
    ffmpeg_share: float  # per recording seat, of one core


def measure_seats(counts: tuple[int, ...], tasks: int, turns: int, latencies: tuple[float, ...],
                  on_config: str = "[video]\nenabled = true\n") -> list[WithVideo]:
    model = ScriptedModel(seats_bench.scenario(turns), record=False)
    url = model.start()
    out = []
    try:
        with seats_bench.screens(max(counts)) as shown:
            for count in counts:
                print(f"  video: {count} seats ...", file=sys.stderr, flush=True)
                # Off and on alternate, REPEATS times each, and the medians count: a machine whose
                # other load drifts over minutes then weighs on both alike.
                offs, ons = [], []
                for _ in range(REPEATS):
                    offs.append(seats_bench.measure_seats(shown[:count], model, url, tasks, turns, latencies))
                    ons.append(_measure_on(shown[:count], model, url, tasks, turns, latencies, on_config))
                for n, latency in enumerate(latencies):
                    off = statistics.median(r.rounds[n].rate for r in offs)
                    on = statistics.median(r.rounds[n].rate for r, _ in ons)
                    share = statistics.median(shares[latency] for _, shares in ons)
                    out.append(WithVideo(count, latency, off, on, share))
    finally:
        model.stop()
    return out


def _measure_on(shown: list[seats_bench.Screen], model: ScriptedModel, url: str, tasks: int, turns: int,
                latencies: tuple[float, ...], config: str) -> tuple[seats_bench.SeatCount, dict[float, float]]:
    """The seats bench's rounds with video on; ffmpeg's share from the daemon's reaped children per round."""
    shares: dict[float, float] = {}
    original = seats_bench.run_round

    def timed_round(daemon, model_, seats, tasks_, turns_, latency, x_pids):
        before = _children_cpu(daemon.proc.pid)
        result = original(daemon, model_, seats, tasks_, turns_, latency, x_pids)
        shares[latency] = (_children_cpu(daemon.proc.pid) - before) / result.wall / seats
        return result

    seats_bench.run_round = timed_round
    try:
        result = seats_bench.measure_seats(shown, model, url, tasks, turns, latencies, config=config)
    finally:
        seats_bench.run_round = original
    return result, shares


def report(alone: list[Alone], rounds: list[WithVideo], seconds: float, turns: int = TURNS) -> str:
    d = DEFAULT
    rows = [(a.name, f"{a.size[0]}x{a.size[1]}", f"{a.cpu_share:.3f}", f"{a.mb_per_minute:.2f}", a.frames)
            for a in alone]
    first = table(("settings", "screen", "ffmpeg CPU share (1.00 = one core)", "MB per minute", "frames"), rows)
    loss_rows = [(r.seats, f"{r.latency:g} s", f"{r.off:.2f}", f"{r.on:.2f}", f"{(r.on / r.off - 1) * 100:+.1f}%",
                  f"{r.ffmpeg_share:.3f}") for r in rounds]
    second = table(("seats", "model latency", "steps/s, video off", "steps/s, video on", "change",
                    "ffmpeg CPU share per recording seat"), loss_rows)
    lines = []
    for r in rounds:
        if r.seats == 8:
            met = "met" if r.on >= (1 - TARGET_LOSS) * r.off else "MISSED"
            lines.append(f"- 8 seats, {r.latency:g} s model: video on keeps {r.on / r.off * 100:.0f}% of the steps/s "
                         f"(target >= {(1 - TARGET_LOSS) * 100:.0f}%): {met}")
    return (f"### Video (ffmpeg x11grab per task; default: {d.codec} {d.preset}, tune {d.tune}, crf {d.crf}, "
            f"{d.fps} fps, full size, keyframe every {d.keyframe_seconds} s)\n\n"
            f"One recorder alone for {seconds:g} s on the busy scene, typed into 4 times a second:\n\n{first}\n\n"
            f"The seats bench's rounds ({TASKS_PER_SEAT} tasks per seat of {turns} turns) with video off and on:\n\n"
            f"{second}\n\n" + "\n".join(lines))


def measure(seconds: float = SECONDS, counts: tuple[int, ...] = SEAT_COUNTS,
            latencies: tuple[float, ...] = LATENCIES) -> str:
    alone = [record_alone("default", DEFAULT, size, seconds) for size in SIZES]
    alone += [record_alone(name, video, SIZES[0], seconds) for name, video in ALTERNATIVES]
    return report(alone, measure_seats(counts, TASKS_PER_SEAT, TURNS, latencies), seconds)


def run() -> str:
    """The video section of ``make bench`` (markdown)."""
    return measure()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=SECONDS, help="seconds each lone recorder records")
    parser.add_argument("--seats", default=",".join(map(str, SEAT_COUNTS)), help="seat counts, e.g. 1,8")
    parser.add_argument("--latencies", default=",".join(f"{x:g}" for x in LATENCIES), help="model latencies, s")
    parser.add_argument("--seats-only", action="store_true", help="only the steps/s rounds")
    parser.add_argument("--turns", type=int, default=TURNS, help="model turns per task in the rounds")
    parser.add_argument("--video", default="enabled = true", help="the [video] table's body for 'video on'")
    args = parser.parse_args()
    counts = tuple(int(n) for n in args.seats.split(","))
    latencies = tuple(float(x) for x in args.latencies.split(","))
    if args.seats_only:
        rounds = measure_seats(counts, TASKS_PER_SEAT, args.turns, latencies, f"[video]\n{args.video}\n")
        print(report([], rounds, args.seconds, args.turns))
    else:
        print(measure(args.seconds, counts, latencies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
