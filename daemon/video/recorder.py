"""One task's video: ffmpeg grabbing an X11 seat's display (x11grab) while the task runs.

The process is owned. It is started once per task (never per step), by pid, in a
process group of its own (a Ctrl-C at the daemon's terminal is the daemon's to
handle, not ffmpeg's), under ``setpriv --pdeathsig KILL``: the kernel kills it
if the daemon dies, even by ``kill -9``, so no ffmpeg outlives the daemon. It is
stopped by ``q`` on its stdin (ffmpeg then writes its trailer), then SIGINT, then
SIGKILL, each after a bounded wait.

The file is fragmented MP4 (or WebM): every second of video is a self-contained
fragment on disk, so a recorder killed at any moment leaves a file that plays up
to its last second. Such a file is marked in the record: its ``video_started``
event has no ``video_finished`` after it.

Events (the task's record; a failed recorder never fails the task):

* ``video_started`` {file, pid, started_at, start_epoch, fps, size, codec}: the
  wall-clock time of the video's first frame, as x11grab stamped it, so a moment
  of the task is ``at - start_epoch`` seconds into the video;
* ``video_finished`` {file, bytes, seconds, how}: ``how`` is ``q``, ``sigint``,
  ``sigkill`` or ``exited`` (it reached its size or time bound first);
* ``video_failed`` {file, stage, message}: it could not start, or died.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import logging
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cud.daemon.store.disk_reserve import free_bytes
from cud.daemon.video.config import VideoConfig

if TYPE_CHECKING:
    from cud.daemon.seats.seat import Seat
    from cud.daemon.store.database import Store
    from cud.protocol import TaskView

__all__ = ("FIRST_FRAME_SECONDS", "STOP_SECONDS", "Recorder", "ffmpeg_command", "recorder_for", "video_name")

log = logging.getLogger("cud.recorder")

#: Seconds ffmpeg gets to finish after ``q`` (it flushes the encoder, writes the trailer),
#: and after SIGINT; then it is killed. The measured stop takes well under a second.
STOP_SECONDS = 5.0
#: A fragment per second: what a killed recorder can lose at most.
FRAGMENT_MICROSECONDS = 1_000_000
#: At most this share of the disk's free room (above the database's reserve) per recording:
#: other seats' videos and every screenshot need room too.
DISK_SHARE = 4
_START = re.compile(rb"^\s*Duration: .*\bstart: ([0-9]+\.[0-9]+)")
_TAIL_LINES = 12
#: How long a task's first action waits for the recorder's first frame before it runs
#: anyway: long enough for ffmpeg to load and grab (0.3-0.9 s here, hidden behind the
#: first model request), short enough not to matter beside a task; past it the start
#: of the task is simply not in the video.
FIRST_FRAME_SECONDS = 3.0


def video_name(video: VideoConfig) -> str:
    return f"video.{video.extension}"


def ffmpeg_command(video: VideoConfig, display: str, screen: tuple[int, int], path: Path,
                   max_seconds: float, max_bytes: int) -> list[str]:
    """argv of the recorder: setpriv (death signal), then ffmpeg. No shell, no model text."""
    width, height = video.frame_size(screen)
    args = [
        "setpriv", "--pdeathsig", "KILL", "--",
        "ffmpeg", "-hide_banner", "-nostats", "-loglevel", "info",
        "-f", "x11grab", "-draw_mouse", "1", "-framerate", str(video.fps),
        "-video_size", f"{screen[0]}x{screen[1]}", "-i", display,
        "-t", f"{max_seconds:.0f}", "-fs", str(max_bytes),
    ]
    if (width, height) != screen:
        args += ["-vf", f"scale={width}:{height}:flags=bicubic"]
    # Every packet goes to the file as it is made (not in 32 KiB buffers): what is on disk
    # is the recording so far, for a kill and for `cuctl video` of a running task.
    args += ["-c:v", video.encoder, "-pix_fmt", "yuv420p", "-g", str(video.fps * video.keyframe_seconds),
             "-flush_packets", "1"]
    if video.codec == "h264":
        args += ["-preset", video.preset, "-crf", str(video.crf)]
        if video.tune != "none":
            args += ["-tune", video.tune]
        args += ["-movflags", "+frag_keyframe+empty_moov+default_base_moof",
                 "-frag_duration", str(FRAGMENT_MICROSECONDS), "-f", "mp4"]
    else:  # libvpx: real-time mode, quality-bound (crf) under a generous bitrate ceiling
        args += ["-deadline", "realtime", "-cpu-used", "8", "-crf", str(video.crf),
                 "-b:v", "0" if video.codec == "vp9" else "4M", "-cluster_time_limit", "1000", "-f", "webm"]
    return [*args, "-y", str(path)]


def _iso(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _wall_clock(stamp: float) -> float:
    """x11grab's first-frame stamp as wall-clock seconds (builds stamp frames by either clock)."""
    now, mono = time.time(), time.monotonic()
    return stamp if abs(stamp - now) < abs(stamp - mono) else now - (mono - stamp)


class Recorder:
    """Records one task on one X11 seat into ``folder``; every outcome becomes a task event."""

    def __init__(self, video: VideoConfig, display: str, screen: tuple[int, int], folder: Path,
                 task_id: int, store: Store, *, keep_free: int, max_seconds: float) -> None:
        self.video = video
        self.display = display
        self.screen = screen
        self.folder = folder
        self.name = video_name(video)
        self.path = folder / self.name
        self.task_id = task_id
        self.store = store
        self.keep_free = keep_free
        self.max_seconds = max_seconds
        self.pid: int | None = None
        self.start_epoch: float | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._first_frame = asyncio.Event()
        self._stopping = False
        self._reported = False

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.add_event(self.task_id, kind, {"file": self.name, **data})

    def _failed(self, stage: str, message: str) -> None:
        log.warning("task %d: video %s: %s", self.task_id, stage, message)
        self._event("video_failed", {"stage": stage, "message": message})

    async def start(self) -> bool:
        """Start ffmpeg; False (and a ``video_failed`` event) if it cannot be started."""
        missing = [tool for tool in ("setpriv", "ffmpeg") if shutil.which(tool) is None]
        if missing:
            self._failed("start", f"{' and '.join(missing)} not found on PATH (sandbox/deps.sh installs them)")
            return False
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            room = (free_bytes(self.folder) - self.keep_free) // DISK_SHARE
        except OSError as exc:
            self._failed("start", f"cannot prepare {str(self.folder)!r}: {exc.strerror}")
            return False
        if room < 1024 * 1024:
            self._failed("start", f"only {max(room, 0)} bytes of the disk may be used for the video")
            return False
        argv = ffmpeg_command(self.video, self.display, self.screen, self.path, self.max_seconds, room)
        try:
            # umask-independent 0600: the file is created by ffmpeg, so made here first.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, process_group=0,
            )
        except OSError as exc:
            self._failed("start", f"cannot run ffmpeg: {exc.strerror or exc}")
            return False
        self.pid = self._proc.pid
        self._watch = asyncio.create_task(self._read(self._proc), name=f"video-{self.task_id}")
        return True

    async def ready(self) -> None:
        """Until ffmpeg has grabbed its first frame, at most FIRST_FRAME_SECONDS.

        Awaited before the task's first action or approval, not at its start: ffmpeg loads while the
        model answers the first request, and every step is still in the video.
        """
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_frame.wait(), FIRST_FRAME_SECONDS)

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        """Drain ffmpeg's stderr: the first frame's time, then its last words; note an early death."""
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            self._tail.append(line.decode(errors="replace").rstrip())
            found = _START.match(line) if self.start_epoch is None else None
            if found:
                self.start_epoch = _wall_clock(float(found.group(1)))
                self._event("video_started", {
                    "pid": proc.pid, "started_at": _iso(self.start_epoch),
                    "start_epoch": round(self.start_epoch, 6), "fps": self.video.fps,
                    "size": list(self.video.frame_size(self.screen)), "codec": self.video.codec,
                })
                self._first_frame.set()
        self._first_frame.set()  # ffmpeg ended before a frame: nothing to wait for
        await proc.wait()
        if not self._stopping:  # it ended by itself: its time or size bound, or a crash
            self._report(proc, "exited")

    def _last_words(self) -> str:
        lines = [line for line in self._tail if line and not line.startswith(" ")]
        return " / ".join(lines[-3:]) or "no output"

    def _report(self, proc: asyncio.subprocess.Process, how: str) -> None:
        """The one event that ends the recording (``how``: who ended it)."""
        if self._reported:
            return
        self._reported = True
        if self.start_epoch is None:
            self._failed("start", f"ffmpeg (pid {proc.pid}) recorded no frame: {self._last_words()}")
        elif how == "exited" and proc.returncode != 0:
            self._failed("recording", f"ffmpeg (pid {proc.pid}) exited with status {proc.returncode}: "
                                      f"{self._last_words()}")
        else:
            try:
                size = self.path.stat().st_size
            except OSError:
                size = 0
            seconds = time.time() - self.start_epoch
            self._event("video_finished", {"bytes": size, "seconds": round(seconds, 3), "how": how})

    async def stop(self) -> None:
        """Finish the file: ``q``, then SIGINT, then SIGKILL; idempotent; never raises."""
        proc, watch = self._proc, self._watch
        if proc is None or watch is None or self._stopping:
            return
        self._stopping = True
        how = await self._end(proc) if proc.returncode is None else "exited"
        with contextlib.suppress(Exception):
            await watch
        self._report(proc, how)

    async def _end(self, proc: asyncio.subprocess.Process) -> str:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # it may have just exited: a broken pipe
            proc.stdin.write(b"q")
            await proc.stdin.drain()
            proc.stdin.close()
        for how, nudge in (("q", None), ("sigint", signal.SIGINT), ("sigkill", signal.SIGKILL)):
            if nudge is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(nudge)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), STOP_SECONDS)
                return how
        return "sigkill"  # not reaped within the bounds: the kernel has it, the seat goes on


def recorder_for(seat: Seat, task: TaskView) -> Recorder | None:
    """The recorder of ``task`` on ``seat``, or None: video is off, or the seat is VNC (docs/video.md)."""
    video = seat.config.video
    if not video.enabled or seat.seat_config.display is None or seat.size is None:
        return None
    limit = task["max_duration"] or seat.config.max_duration
    return Recorder(video, seat.seat_config.display, seat.size, seat.trajectories.task_dir(task["id"]), task["id"],
                    seat.store, keep_free=seat.trajectories.keep_free, max_seconds=limit + 60)
