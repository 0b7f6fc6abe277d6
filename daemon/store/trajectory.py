"""What a task leaves on disk besides its rows: the screenshots the model saw, and step timings.

Layout under the state dir::

    trajectories/<task id>/step-0001.png   the screenshot sent to the model after step 1
    trajectories/<task id>/artifacts/PATH  a file a spec's ``collect`` kept (PATH as in the seat's home)

Directories are 0700 and files 0600 (screens can show anything). Step records
(actions, timings, file names) are ``step`` events in the database, so a task's
record is its events plus this directory. Retention removes both together.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any

from cud.daemon.store.disk_reserve import free_bytes, is_out_of_space
from cud.drivers.png import parse_data_url
from cud.errors import DriverError, StorageFull
from cud.protocol import USAGE_KEYS, UsageView

__all__ = ()

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(extension, bytes) of a ``data:image/...;base64,`` URL as drivers return screenshots."""
    try:
        media, data = parse_data_url(url)
    except ValueError as exc:
        raise DriverError(f"screenshot: {exc}", value=str(url)[:40]) from None
    if media not in _EXTENSIONS:
        raise DriverError(f"screenshot is a {media!r} image, not one of {sorted(_EXTENSIONS)}", value=media)
    return _EXTENSIONS[media], data


class Trajectories:
    def __init__(self, state_dir: Path, keep_free: int = 0) -> None:
        #: Bytes a screenshot may never eat into: the database's space reserve (see reserve.py).
        self.keep_free = keep_free
        self.root = state_dir / "trajectories"
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    def task_dir(self, task_id: int) -> Path:
        return self.root / str(task_id)

    def save_screenshot(self, task_id: int, step: int, data_url: str, suffix: str = "") -> str:
        """Write the screenshot; return its file name (relative to the task's directory)."""
        extension, data = decode_data_url(data_url)
        folder = self.task_dir(task_id)
        name = f"step-{step:04d}{suffix}.{extension}"
        free = free_bytes(self.root)
        if free - len(data) < self.keep_free:
            raise self._full(task_id, step, f"{free} bytes are free, and {self.keep_free} are kept for the database")
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            if not is_out_of_space(exc):
                raise
            (folder / name).unlink(missing_ok=True)  # never leave half a picture behind
            raise self._full(task_id, step, "no space left on device") from None
        return name

    def save_artifact(self, task_id: int, path: str, data: bytes) -> None:
        """Keep a collected file as ``artifacts/PATH`` in the task's directory (PATH checked by the spec)."""
        parts = path.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"not a plain relative path: {path!r}")
        free = free_bytes(self.root)
        if free - len(data) < self.keep_free:
            raise StorageFull(f"cannot keep the collected file {path!r} of task {task_id} in {str(self.root)!r}: "
                              f"{free} bytes are free, and {self.keep_free} are kept for the database",
                              path=str(self.root), task=task_id)
        folder = self.task_dir(task_id) / "artifacts"
        target = folder.joinpath(*parts)
        try:
            for directory in [self.task_dir(task_id), *reversed(target.parents[: len(parts)])]:
                directory.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            target.unlink(missing_ok=True)
            if not is_out_of_space(exc):
                raise
            raise StorageFull(f"cannot keep the collected file {path!r} of task {task_id}: no space left on device",
                              path=str(self.root), task=task_id) from None

    def _full(self, task_id: int, step: int, why: str) -> StorageFull:
        return StorageFull(f"cannot save the screenshot of task {task_id} step {step} in {str(self.root)!r}: {why}",
                           path=str(self.root), task=task_id, step=step)

    def remove(self, task_ids: list[int]) -> None:
        for task_id in task_ids:
            shutil.rmtree(self.task_dir(task_id), ignore_errors=True)


@dataclasses.dataclass
class StepTimings:
    """Timings of one step: a model response and the actions it asked for.

    ``overhead_ms`` is what remains when the model, the driver and the people
    (approvals, a pause and what was done in it) are taken out: the daemon's own
    cost (SDK bookkeeping, SQLite, files).
    """

    number: int
    started: float  # time.monotonic() when the step began (end of the previous one)
    saw: str | None  # screenshot file the model was sent with this step's request
    model_ms: float = 0.0
    driver_ms: float = 0.0
    approval_ms: float = 0.0
    paused_ms: float = 0.0
    actions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    messages: list[str] = dataclasses.field(default_factory=list)
    screenshot: str | None = None  # file of the screenshot this step produced
    #: What the step's model request sent and cost (see cud.protocol.UsageView).
    usage: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))

    def add_request(self, sent_bytes: int, attempts: int, images: int, image_bytes: int,
                    tokens: dict[str, int]) -> None:
        """One request to the model: what it sent, and its answer's token counts (:func:`tokens_of`; {}: none)."""
        counts = self.usage
        counts["requests"] += attempts
        counts["request_bytes"] += sent_bytes
        counts["images"] += images
        counts["image_bytes"] += image_bytes
        for key, count in tokens.items():
            counts[key] += count

    def finish(self, ended: float) -> dict[str, Any]:
        total = (ended - self.started) * 1000
        return {
            "step": self.number,
            "saw": self.saw,
            "screenshot": self.screenshot,
            "messages": self.messages,
            "actions": self.actions,
            "total_ms": round(total, 3),
            "model_ms": round(self.model_ms, 3),
            "driver_ms": round(self.driver_ms, 3),
            "approval_ms": round(self.approval_ms, 3),
            "paused_ms": round(self.paused_ms, 3),
            "overhead_ms": round(max(0.0, total - self.model_ms - self.driver_ms - self.approval_ms
                                     - self.paused_ms), 3),
            **self.usage,
        }


def tokens_of(usage: Any) -> dict[str, int]:
    """The token counts of one answer's ``usage`` (the SDK's object; None: no counts)."""
    details = getattr(usage, "input_tokens_details", None)
    return {"input_tokens": int(getattr(usage, "input_tokens", 0) or 0),
            "cached_tokens": int(getattr(details, "cached_tokens", 0) or 0),
            "output_tokens": int(getattr(usage, "output_tokens", 0) or 0)}


class TaskUsage:
    """A task's usage so far: the sum of its steps'."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(USAGE_KEYS, 0)

    def add(self, step: dict[str, Any]) -> None:
        for key in USAGE_KEYS:
            self._counts[key] += int(step.get(key, 0))

    def as_dict(self) -> UsageView | None:
        """The totals; None until the task has made a request."""
        return dict(self._counts) if self._counts["requests"] else None  # type: ignore[return-value]  # the counts have UsageView's keys


def ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000
