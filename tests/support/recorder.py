"""Drive the recording Tk window (recorder_app.py) from a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .xserver import stop_process

__all__ = ("Recorder", "wait_until", "presses", "events_before_marker")

Event = dict[str, Any]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll with backoff until ``predicate()`` is truthy; return its value or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)


class Recorder:
    """A Tk window covering ``geometry`` on ``display`` that records what reaches it."""

    def __init__(self, display: str, workdir: Path, geometry: str) -> None:
        self.display = display
        self.events_path = workdir / "events.jsonl"
        self.text_path = workdir / "text.txt"
        self.events_path.write_text("")
        env = {**os.environ, "DISPLAY": display}
        app = Path(__file__).with_name("recorder_app.py")
        with open(workdir / "recorder.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(app), str(self.events_path), str(self.text_path), geometry],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            )
        ready = self.wait_for(lambda e: e["type"] == "ready", what="the recorder window to map", timeout=30)
        self.geometry = ready

    def events(self, since: int = 0) -> list[Event]:
        lines = self.events_path.read_text(encoding="utf-8").splitlines()
        # The last line may still be being written; only complete JSON counts.
        out = []
        for line in lines[since:]:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return out

    def mark(self) -> int:
        """The number of events so far; pass it to ``events(since=...)``."""
        return len(self.events())

    def wait_for(self, predicate: Callable[[Event], bool], since: int = 0, timeout: float = 10.0,
                 what: str = "an event") -> Event:
        def find() -> Event | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"recorder exited with {self.proc.returncode}")
            return next((e for e in self.events(since) if predicate(e)), None)

        return wait_until(find, timeout, what)

    def text(self) -> str:
        try:
            return self.text_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def wait_text(self, expected: str, timeout: float = 15.0) -> str:
        """Wait until the text area holds ``expected``; on timeout, show what it holds."""
        try:
            wait_until(lambda: self.text() == expected, timeout, f"text {expected!r}")
        except AssertionError:
            raise AssertionError(f"text area holds {self.text()!r}, expected {expected!r}") from None
        return expected

    def fenced(self, since: int = 0) -> list[Event]:
        """Every event since ``since`` that was sent before now: a marker sent now has arrived.

        For tests whose own input went through a daemon: "nothing reached the window"
        means nothing, including a late event still on its way.
        """
        from cud.drivers.x11 import X11Driver

        driver = X11Driver(self.display)
        try:
            driver.move({"type": "move", "x": 2, "y": 2})  # the marker needs motion to (1, 1)
            return events_before_marker(driver, self, since)
        finally:
            driver.close()

    def stop(self) -> None:
        stop_process(self.proc)


def presses(events: list[Event], kind: str = "ButtonPress") -> list[tuple[int, int, int]]:
    """(button, x, y) of each button event of ``kind``."""
    return [(e["button"], e["x"], e["y"]) for e in events if e["type"] == kind]


def events_before_marker(driver: Any, recorder: Recorder, since: int) -> list[Event]:
    """Move ``driver``'s pointer to a marker point; every event between ``since`` and its arrival.

    A rejected action must have sent nothing: this is how a test proves it, as events
    reach the window in order.
    """
    def is_marker(e: Event) -> bool:
        return e["type"] == "Motion" and (e["x"], e["y"]) == (1, 1)

    driver.move({"type": "move", "x": 1, "y": 1})
    recorder.wait_for(is_marker, since=since, what="the marker")
    events = recorder.events(since)
    return events[: next(i for i, e in enumerate(events) if is_marker(e))]
