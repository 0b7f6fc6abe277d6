"""Where a task's moments are in its video: one mapping for the report and the console.

The recorder's ``video_started`` event holds the wall-clock time of the video's
first frame (``start_epoch``), so any event's ``at`` is ``at - start_epoch``
seconds into the video. A step's moment is when its actions began: its event is
written when it ends, ``total_ms`` after it began, and its model turn
(``model_ms``) came first. An approval's moment is when it was asked for.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from cud.record.reading import Record, Step

__all__ = ("VIDEO_TYPES", "Video", "event_moment", "find_video", "moment", "step_moment")

#: The media type of a video file, by its extension.
VIDEO_TYPES = {"mp4": "video/mp4", "webm": "video/webm"}


@dataclasses.dataclass(frozen=True)
class Video:
    name: str
    media_type: str
    start_epoch: float | None  # None: the recorder never stamped a first frame
    seconds: float  # how long it runs, as recorded (an estimate when it was cut short)
    complete: bool  # False: cut short (the daemon or ffmpeg died); it plays up to its last whole second
    failure: str | None  # the recorder's own words when it failed


def _epoch(at: object) -> float | None:
    if not isinstance(at, str):
        return None
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def find_video(record: Record) -> Video | None:
    """The record's video and what its events say about it; None if there is neither."""
    name = next((n for n in ("video.mp4", "video.webm") if n in record.files), None)
    started = next((e for e in record.events if e["kind"] == "video_started"), None)
    ended = next((e for e in reversed(record.events) if e["kind"] in ("video_finished", "video_failed")), None)
    failure = None
    if ended is not None and ended["kind"] == "video_failed":
        failure = str(ended["data"].get("message") or "the recorder failed")
    if name is None and failure is None:
        return None
    start = started["data"].get("start_epoch") if started is not None else None
    start = float(start) if isinstance(start, (int, float)) and not isinstance(start, bool) else None
    seconds = 0.0
    if ended is not None and ended["kind"] == "video_finished":
        seconds = float(ended["data"].get("seconds") or 0.0)
    elif start is not None:  # cut short: up to the last thing the record knows of
        last = max((t for t in (_epoch(e.get("at")) for e in record.events) if t is not None), default=start)
        seconds = max(0.0, last - start)
    extension = (name or "video.mp4").rsplit(".", 1)[1]
    complete = ended is not None and ended["kind"] == "video_finished"
    return Video(name=name or "", media_type=VIDEO_TYPES[extension], start_epoch=start, seconds=seconds,
                 complete=complete, failure=failure)


def moment(video: Video | None, at: str | None, *, before_ms: float = 0.0) -> float | None:
    """Seconds into the video of the instant ``before_ms`` before ``at``; None if it cannot be placed."""
    if video is None or video.start_epoch is None or not video.name:
        return None
    when = _epoch(at)
    if when is None:
        return None
    seconds = when - before_ms / 1000 - video.start_epoch
    return min(max(0.0, seconds), video.seconds) if video.seconds else max(0.0, seconds)


def step_moment(video: Video | None, step: Step) -> float | None:
    """When the step's actions began (for a step that never ended: its last event)."""
    before = step.timings.get("total_ms", 0.0) - step.timings.get("model_ms", 0.0) if step.ended else 0.0
    return moment(video, step.at, before_ms=max(0.0, before))


def event_moment(start_epoch: float, event: dict[str, Any]) -> float | None:
    """Seconds into a video that began at ``start_epoch`` of a ``step`` (its actions) or ``approval_requested``."""
    when = _epoch(event.get("at"))
    if when is None or event.get("kind") not in ("step", "approval_requested"):
        return None
    data = event.get("data") or {}
    before = 0.0
    if event["kind"] == "step":
        total, model = data.get("total_ms"), data.get("model_ms")
        if isinstance(total, (int, float)) and isinstance(model, (int, float)):
            before = max(0.0, float(total) - float(model)) / 1000
    return max(0.0, when - before - start_epoch)
