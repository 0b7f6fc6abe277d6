"""One attempt of a fleet task on this machine's daemon: submit it by its key, follow it to the end, bring
its record back. Needs no Ray: a fleet's Ray task calls :func:`run_attempt` (cud.fleet's other modules),
and so may anything else that wants exactly-once submission to a local daemon.

Exactly once, through the daemon's idempotency key (docs/protocol.md, ``submit``'s ``key``):

* The submit carries ``key``. A daemon that has the key recorded (for this node's user: a key is its
  submitter's) queues nothing and answers with that task (``"existing": true``), so sending the same
  submit again is always safe. What comes back is checked to be this user's, under this key
  (:func:`~cud.cuctl.client.check_own_task`): another user's task is refused, never followed.
* The connection lost (the daemon restarted, was killed, its reply never came): dial again for up to
  ``restart_wait`` seconds, then send the SAME submit again, which re-attaches to the task the key
  names, and follow it again. Events already passed to ``on_progress`` are not passed again.
* What a restart does to the task is the daemon's: a task still queued stays queued and runs; one
  that was under way is ended ``interrupted`` at start-up ("the daemon stopped while the task was
  running"), and :func:`run_attempt` returns that. It is not retried here under the same key (the
  key names that ended task for good): the fleet retries it as a new attempt, with a new key.

The record comes back inline when small, else as a reference (:class:`RecordRef`): see
:data:`INLINE_RECORD_LIMIT`.

Errors are cud.errors types: the daemon's refusal (a spec it rejects, a right the node's user lacks)
is the :class:`~cud.cuctl.client.RemoteError` it replied with, unchanged, so a suite says why; a
daemon away for longer than ``restart_wait`` is :class:`~cud.errors.ConnectionFailed`.
"""

from __future__ import annotations

import base64
import binascii
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cud.cuctl.client import Client, check_own_task
from cud.cuctl.dial import UnixDialer
from cud.cuctl.export import fetch_record
from cud.errors import ConnectionFailed, SpecError
from cud.protocol import EventView, TaskView, check_field
from cud.record.html import render
from cud.record.reading import is_artifact, is_video
from cud.spec import parse_spec
from cud.spec.schema import ANY_SEAT
from cud.spec.wire import file_pieces, submit_fields

__all__ = ("INLINE_RECORD_LIMIT", "AttemptOutcome", "RecordRef", "run_attempt")

#: The most bytes of record (report page + collected files + video) that come back with the outcome.
#: 8 MiB holds what a short task leaves (a report of tens of screenshots, a few collected files, a
#: short low-rate video), so a suite over a fleet writes the same reports as a local ``cuctl eval``
#: without asking the nodes again; a long task's video (tens to hundreds of MiB) stays on its node,
#: where ``cuctl --host ssh://HOST record|report|video ID`` fetches it when someone wants it, so a
#: suite of hundreds of tasks does not pull gigabytes through Ray into its driver. The report embeds
#: the video too, so a video counts about 2.3 times (its bytes and the page's base64 of them).
INLINE_RECORD_LIMIT = 8 * 1024 * 1024
#: Waits between dialling a daemon that is away: from the first to the last, doubling.
_FIRST_RETRY, _LAST_RETRY = 0.05, 1.0
_R = TypeVar("_R")


@dataclass(frozen=True)
class RecordRef:
    """A finished task's record: inline (``inline``: the report, collected files and video as bytes) or
    a reference to it on its node (``reference``: what ``cuctl --host ssh://HOST record ID`` and
    ``cuctl --host ssh://HOST cp task/ID:PATH`` need)."""

    host: str
    task: int
    inline: bool
    #: The report (``cuctl report``'s page, self-contained) when inline.
    report_html: bytes | None = None
    #: Each file the spec's ``collect`` kept, by its path in the seat's home, when inline.
    artifacts: Mapping[str, bytes] = field(default_factory=dict)
    #: The task's video file name (``video.mp4``/``video.webm``) and bytes, when inline and recorded.
    video_name: str | None = None
    video: bytes | None = None
    #: What came back inline (0 for a reference).
    bytes: int = 0

    @property
    def reference(self) -> dict[str, Any]:
        return {"host": self.host, "task": self.task}


@dataclass(frozen=True)
class AttemptOutcome:
    #: The task's final view (state, verdict, usage, error, reason, key).
    task: TaskView
    #: True when the first answer to the submit said the key was already recorded: this call queued
    #: no task (a reply lost before that answer also makes it True: the key was recorded by then).
    reattached: bool
    #: The daemon's host (this machine's name: the daemon is reached through its local socket).
    host: str
    record: RecordRef


def run_attempt(socket_path: str | Path, *, spec: Mapping[str, Any], files: Mapping[str, str], key: str,
                seat: str | None = None, on_progress: Callable[[EventView], None] | None = None,
                inline_limit: int = INLINE_RECORD_LIMIT, restart_wait: float = 120.0) -> AttemptOutcome:
    """Submit ``spec`` (as a spec file gives it, docs/specs.md; its ``files`` as ``{name: base64}``) under
    ``key`` to the daemon at ``socket_path``, or re-attach to the task the key names; follow it to its end
    (``on_progress`` gets each event once); return it with its record. ``seat`` pins it to that seat
    (``"any"`` or None: the spec's own seat, if it names one, else the first free seat)."""
    check_field("submit", "key", key)  # a bad key is the caller's mistake: said here, before any dialling
    contents = _decoded(files)
    fields = _submit_fields(spec, contents, seat, key)
    link = _Link(UnixDialer(Path(socket_path)), restart_wait)
    host = socket.gethostname()
    first: list[bool] = []  # the first submit answer's "existing"
    last_seq = 0

    def on_event(message: Any) -> None:
        nonlocal last_seq
        event = message["event"]
        if event["seq"] > last_seq:  # a re-attached follow replays the task's events from the first
            last_seq = event["seq"]
            if on_progress is not None:
                on_progress(event)

    def attach(client: Client) -> TaskView:
        reply = client.upload("submit", file_pieces(contents), **fields)  # the files follow as chunks, as cuctl's
        own = check_own_task(reply, key, client.uid)  # never another user's task that holds our key
        if not first:
            first.append(bool(reply["existing"]))
        task: TaskView = client.call("follow", on_event, wait_forever=True, id=own["id"])
        return task

    task = link.run(attach)
    record = link.run(lambda client: _bring_back(client, task["id"], host, inline_limit))
    return AttemptOutcome(task=task, reattached=first[0], host=host, record=record)


def _decoded(files: Mapping[str, str]) -> dict[str, bytes]:
    """The spec's files from their base64 (how a fleet carries them), each refused by name if it is not."""
    contents = {}
    for name, text in files.items():
        try:
            contents[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise SpecError(f"spec file {name!r} is not base64", key=f"files.{name}", value=str(text)[:40]) from None
    return contents


def _submit_fields(spec: Mapping[str, Any], files: Mapping[str, bytes], seat: str | None, key: str) -> dict[str, Any]:
    """``submit``'s fields for the spec, as ``cuctl submit --spec`` sends them (cud.spec.wire), with the key."""
    parsed = parse_spec(dict(spec))  # SpecError names a bad key here, as cuctl would
    fields: dict[str, Any] = {**submit_fields(parsed, files), "key": key}
    if seat is not None and seat != ANY_SEAT:  # "any", as a spec writes it (Spec.to_dict), pins nothing
        fields["seat"] = seat
    return fields


def _bring_back(client: Client, task_id: int, host: str, limit: int) -> RecordRef:
    """The record inline if report, collected files and video come to at most ``limit`` bytes, else a reference."""
    reference = RecordRef(host=host, task=task_id, inline=False)
    record = fetch_record(client, task_id, max_bytes=limit)  # stops reading past the limit: no use for it
    if record is None:
        return reference
    page = render(record).encode()
    artifacts = {name.removeprefix("artifacts/"): data for name, data in record.files.items() if is_artifact(name)}
    video_name, video = next(((name, data) for name, data in record.files.items() if is_video(name)), (None, None))
    total = len(page) + sum(len(data) for data in artifacts.values()) + len(video or b"")
    if total > limit:
        return reference
    return RecordRef(host=host, task=task_id, inline=True, report_html=page, artifacts=artifacts,
                     video_name=video_name, video=video, bytes=total)


class _Link:
    """Calls on the daemon that survive it restarting: each is made again, on a new connection, until it
    completes, as long as the daemon is not away for longer than ``restart_wait`` seconds at a time."""

    def __init__(self, dialer: UnixDialer, restart_wait: float) -> None:
        self.dialer = dialer
        self.restart_wait = restart_wait

    def run(self, call: Callable[[Client], _R]) -> _R:
        """``call`` on a connection; made again after a lost connection (so it must be safe to repeat)."""
        away_since: float | None = None
        pause = _FIRST_RETRY
        while True:
            try:
                with Client(self.dialer) as client:
                    away_since, pause = None, _FIRST_RETRY  # it answers: the next loss gets the whole wait
                    return call(client)
            except ConnectionFailed as exc:
                now = time.monotonic()
                away_since = now if away_since is None else away_since
                if now - away_since >= self.restart_wait:
                    raise ConnectionFailed(f"{exc.message}; gave up after {self.restart_wait:g} s without the "
                                           "daemon (restart_wait)", **exc.details) from None
                time.sleep(min(pause, max(0.0, away_since + self.restart_wait - now)))
                pause = min(pause * 2, _LAST_RETRY)
