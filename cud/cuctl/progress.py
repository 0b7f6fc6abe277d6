"""cuctl follow on a terminal: a log of finished steps and notices above one redrawn status line.

The status line shows the step counter, what is happening now (the last
action, waiting for the model, waiting for approval with the command that
answers it) and the elapsed time, which keeps ticking while nothing happens.
When stdout is not a terminal (a pipe, a file, ``TERM=dumb``) or ``--json`` is
given, ``follow`` prints one plain line per event instead (:func:`cud.cuctl.tasks.follow`).

The socket is read on a helper thread; only the main thread writes to the
terminal, so a redraw never interleaves with a notice.

:class:`WaitNotice` is ``cuctl eval``'s word on why it waits (a seat unavailable, a queue, no fleet
node free) where no status line is redrawn: said at once, again when it changes, and every
:data:`WAIT_REPEAT_SECONDS` while it lasts, so a log never goes quiet for minutes.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

from cud.cuctl import tasks
from cud.cuctl.client import Client
from cud.cuctl.output import printable, short, terminal_columns
from cud.phrases.actions import describe_action, describe_approval
from cud.protocol import FINAL_STATES
from cud.record.reading import describe_usage

__all__ = ("WAIT_REPEAT_SECONDS", "WaitNotice", "follow")

#: How often the elapsed time is redrawn while no event arrives.
TICK = 1.0
#: While ``cuctl eval`` waits for the same reason, it says so again this often (stderr not a terminal).
WAIT_REPEAT_SECONDS = 60.0


def follow(client: Client, args: argparse.Namespace) -> int:
    if args.json or not live_terminal(sys.stdout):
        return tasks.follow(client, args)
    task = client.call("show", id=args.id)
    return Progress(sys.stdout, task).run(client)


def live_terminal(stream: TextIO) -> bool:
    return stream.isatty() and os.environ.get("TERM", "") != "dumb"


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class WaitNotice:
    """Says why something waits: when a reason first appears or changes, and again every ``every`` seconds while
    it stays the same (``clock``: seconds, monotonic). ``None`` is "not waiting": the next reason is new."""

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 every: float = WAIT_REPEAT_SECONDS) -> None:
        self.say, self.clock, self.every = say, clock, every
        self.reason: str | None = None
        self.said_at = 0.0

    def update(self, reason: str | None) -> None:
        if reason is None:
            self.reason = None
            return
        now = self.clock()
        if reason != self.reason or now - self.said_at >= self.every:
            self.say(reason)
            self.reason, self.said_at = reason, now


class Progress:
    def __init__(self, out: TextIO, task: dict[str, Any]) -> None:
        self.out = out
        self.task = task
        self.id = task["id"]
        self.state = task["state"]
        self.done = task["steps"]  # steps finished; the one in progress is done + 1
        self.max_steps = task["max_steps"]
        self.doing = "queued" if self.state == "queued" else "waiting for the model"
        self.since = _epoch(task["started_at"]) or _epoch(task["created_at"]) or time.time()
        self.colour = not os.environ.get("NO_COLOR")  # no-color.org: set and non-empty
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.words = tasks.TaskEventWords()

    # -- the loop ----------------------------------------------------------------------------
    def run(self, client: Client) -> int:
        reader = threading.Thread(target=self._read, args=(client,), name="cuctl-follow", daemon=True)
        reader.start()
        self._redraw()
        try:
            while True:
                try:
                    kind, value = self._events.get(timeout=TICK)
                except queue.Empty:
                    self._redraw()
                    continue
                if kind == "event":
                    self._on_event(value)
                    self._redraw()
                elif kind == "error":
                    self._clear()
                    raise value
                else:  # "done": the follow reply, the task as it ended
                    self._clear()
                    return tasks._ended(value, False, quiet=True)
        except KeyboardInterrupt:
            self._clear()
            raise

    def _read(self, client: Client) -> None:
        try:
            def on_event(message: Any) -> None:  # follow streams event messages alone
                self._events.put(("event", message["event"]))

            task = client.call("follow", on_event, wait_forever=True, id=self.id)
            self._events.put(("done", task))
        except BaseException as exc:  # handed to the main thread, which owns the terminal
            self._events.put(("error", exc))

    # -- what events change ----------------------------------------------------------------------
    def _on_event(self, event: dict[str, Any]) -> None:
        kind, data = event["kind"], event["data"]
        if kind == "running":
            self.state, self.doing = "running", "waiting for the model"
            self.since = _epoch(event["at"]) or self.since
            self.task["seat"] = data.get("seat", self.task.get("seat"))
            self._line(f"task {self.id} started on seat {self.task['seat']}: {short(self.task['prompt'], 60)}")
        elif kind == "action":
            self.doing = describe_action(data.get("action"), data.get("target"), 60)
        elif kind == "step":
            self.done = data["step"]
            done = data.get("actions", [])
            what = ", ".join(describe_action(a.get("action"), a.get("target"), 40) for a in done[:3])
            what += f" (+{len(done) - 3} more)" if len(done) > 3 else ""
            what = what or ("took a screenshot" if data.get("screenshot") else "answered")
            cost = self.words.step_cost(data)
            self.words.said_step(event)
            self._line(f"step {data['step']}: {what} ({data.get('total_ms', 0) / 1000:.1f} s; {describe_usage(data)}; "
                       f"{cost})")
            self.doing = "waiting for the model"
        elif kind == "approval_requested":
            approval = data["approval_id"]
            self.state = "awaiting_approval"
            self.doing = f"waiting for approval {approval}: cuctl approve {approval}"
            what = describe_approval(data.get("checks", []), data.get("actions", []), data.get("targets"), 40)
            self._line(f"approval {approval} needed ({data.get('kind')}): {short(what, 200)}", em=True)
            self._line(f"  run: cuctl approve {approval}   or: cuctl deny {approval} --reason TEXT", em=True)
        elif kind == "approval_decided":
            self.state = "running" if data.get("outcome") == "approved" else self.state
            by = f" by {data['by']['name']}" if data.get("by") else ""
            self._line(f"approval {data['approval_id']} {data.get('outcome')}{by}")
            self.doing = "running the approved action" if data.get("outcome") == "approved" else self.doing
        elif kind in ("pause_requested", "paused", "resumed", "human_action"):
            self.state = {"paused": "paused", "resumed": "running"}.get(kind, self.state)
            self.doing = {"paused": f"paused: cuctl resume {self.id}", "resumed": "waiting for the model",
                          "pause_requested": "pausing before the next screenshot"}.get(kind, self.doing)
            self._line(tasks.describe_event(event).split(f"task {self.id} ", 1)[-1])
        elif kind == "cancel_requested":
            self._line(f"cancel requested by {data['by']['name']}")
            self.doing = "cancelling"
        elif kind == "interrupt_requested":
            self._line(tasks.describe_event(event).split(f"task {self.id} ", 1)[-1])
            self.doing = "interrupting"
        elif kind in ("setup", "postconfig", "check", "collected"):
            self.doing = {"setup": "setting up", "postconfig": "setting up for the checks",
                          "check": "checking"}.get(kind, self.doing)
            self._line(tasks.describe_event(event).split(f"task {self.id} ", 1)[-1],
                       em=kind in ("setup", "postconfig") and not data.get("ok"))
        elif kind == "end":
            self.state, self.doing = data["state"], "ended"
            took = _clock(time.time() - self.since)
            detail = data.get("final_message") or (data.get("error") or {}).get("message") or data.get("reason")
            self._line(f"task {self.id} {data['state']} after {self.done} steps in {took}"
                       + (f": {short(detail, 100)}" if detail else ""))
            if data.get("verdict"):
                self._line(f"verdict: {data['verdict']}, score {data['score']:.2f}", em=data["verdict"] != "passed")
        elif kind == "diagnostic":
            self._line(f"diagnostic: {short(str(data), 100)}")

    # -- drawing ----------------------------------------------------------------------------
    def _status(self) -> str:
        elapsed = _clock(time.time() - self.since)
        step = self.done if self.state in FINAL_STATES or self.state == "queued" else self.done + 1
        seat = f" · seat {self.task['seat']}" if self.task.get("seat") else ""
        return f"task {self.id}{seat} · step {step}/{self.max_steps} · {self.state} · {self.doing} · {elapsed}"

    def _width(self) -> int:
        columns = terminal_columns(self.out) or 0
        return columns if columns > 10 else 80

    def _redraw(self) -> None:
        # Cut to the width: a wrapped status line could not be redrawn in place.
        self.out.write("\r\x1b[K" + short(printable(self._status()), self._width() - 1))
        self.out.flush()

    def _clear(self) -> None:
        self.out.write("\r\x1b[K")
        self.out.flush()

    def _line(self, text: str, *, em: bool = False) -> None:
        """A line that stays, printed above the status line."""
        text = printable(text)
        if em and self.colour:
            text = f"\x1b[1;33m{text}\x1b[0m"
        self.out.write("\r\x1b[K" + text + "\n")
        self.out.flush()


