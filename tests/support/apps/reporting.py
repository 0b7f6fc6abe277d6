"""Applications that report through files: the GTK, Qt and xterm probes.

The program under test (a small script on a third-party toolkit, run by the
system's Python where the toolkit's bindings are Debian packages) gets three
paths in its environment:

- ``PROBE_EVENTS``: it appends one normalised event (``apps.base``) per line, as
  JSON, flushed at once;
- ``PROBE_STATE``: it rewrites this JSON object atomically (write a temp file,
  ``os.replace``) whenever something changes: ``{"ready": bool, "pad": [x, y, w, h],
  "field": [x, y, w, h], "value": str, "selection": str, "scroll": [left, top],
  "done": N, ...}`` (``done``: how many commands it has carried out);
- ``PROBE_COMMANDS``: it polls this file (every ~20 ms) for new lines, each a
  command it carries out *from the application's side* (no input is sent):
  ``clear`` (empty the text input), ``reset_scroll`` (scroll area back to its
  middle), then bumps ``done``.

The state may also hold ``"drag": [[x0, y0], [x1, y1], text]``: the points of a
left drag that selects ``text`` (``selection_drag``), and ``"dnd": [source, target]``:
the rectangles a drag-and-drop starts in and drops onto (``dnd_regions``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ..recorder import wait_until
from ..xserver import stop_process
from .base import App, Event, Rect

__all__ = ("ReportingApp", "SYSTEM_PYTHON")

#: Debian's Python, which has the Debian-packaged bindings (python3-gi, python3-pyqt5).
SYSTEM_PYTHON = "/usr/bin/python3"


class ReportingApp(App):
    """An ``App`` whose program speaks the file protocol above."""

    ready_timeout = 30.0
    #: The probe program beside this module, run by ``SYSTEM_PYTHON``.
    probe: str

    def argv(self) -> list[str]:
        """The command line that starts the program."""
        return [SYSTEM_PYTHON, str(Path(__file__).with_name(self.probe))]

    def start(self) -> None:
        workdir = self.desktop.workdir / self.name
        workdir.mkdir(exist_ok=True)
        self.events_path = workdir / "events.jsonl"
        self.state_path = workdir / "state.json"
        self.commands_path = workdir / "commands.txt"
        for path in (self.events_path, self.commands_path):
            path.write_text("")
        self.state_path.unlink(missing_ok=True)
        self._commands = 0
        env = {**self.app_env(), "PROBE_EVENTS": str(self.events_path), "PROBE_STATE": str(self.state_path),
               "PROBE_COMMANDS": str(self.commands_path)}
        self.proc: subprocess.Popen[bytes] = self.desktop.spawn(self.argv(), f"{self.name}.log", env=env)
        state = wait_until(lambda: self._state().get("ready") and self._state(), self.ready_timeout,
                           f"{self.name} to map its window and report ready")
        self.pad = tuple(state["pad"])
        self.field = tuple(state["field"])

    def app_env(self) -> dict[str, str]:
        """The environment the program starts with (besides the PROBE_ paths)."""
        return self.desktop.env

    def stop(self) -> None:
        stop_process(self.proc)

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            log = (self.desktop.workdir / f"{self.name}.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}; its log ends: {log}")

    def _state(self) -> dict[str, Any]:
        self._check_alive()
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return state

    def events(self, since: int = 0) -> list[Event]:
        self._check_alive()
        out = []
        for line in self.events_path.read_text(encoding="utf-8").splitlines()[since:]:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # the last line may still be being written
        return out

    def command(self, name: str) -> dict[str, Any]:
        """Have the program carry out ``name`` itself; the state once it has."""
        self._commands += 1
        with open(self.commands_path, "a", encoding="utf-8") as f:
            f.write(name + "\n")
        wanted = self._commands
        return wait_until(lambda: self._state().get("done", 0) >= wanted and self._state(), 10,
                          f"{self.name} to carry out {name!r}")

    def value(self) -> str:
        return str(self._state().get("value", ""))

    def clear(self) -> None:
        self.command("clear")

    def selection(self) -> str:
        return str(self._state().get("selection", ""))

    def selection_drag(self) -> tuple[tuple[int, int], tuple[int, int], str]:
        (x0, y0), (x1, y1), text = self._state()["drag"]
        return (x0, y0), (x1, y1), text

    def dnd_regions(self) -> tuple[Rect, Rect]:
        source, target = self._state()["dnd"]
        return tuple(source), tuple(target)

    def scroll_position(self) -> tuple[int, int]:
        left, top = self._state().get("scroll", (0, 0))
        return int(left), int(top)

    def reset_scroll(self) -> None:
        self.command("reset_scroll")
