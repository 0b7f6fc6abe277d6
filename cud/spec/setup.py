"""The setup steps of a spec (``[[setup]]``, in order before the model starts, and ``[[postconfig]]``, after
it ends and before the checks): their kinds and checks.

Each step is a table with exactly one kind key:

* ``files = [{src, dest, mode}]``: files from the submitter's side (``src``, relative to
  the spec's folder) written into the seat's home (``dest``);
* ``run = [argv]``: a command as the seat's user, in its session; ``timeout`` (s) and the
  ``exit_code`` it must end with (default 0);
* ``launch = [argv]``: a program started detached in the session; ``wait_for`` a window
  or an accessibility element before the next step;
* ``open = "URL or path"``: the desktop's opener (``xdg-open``) as the seat's user; ``wait_for`` too;
* ``clipboard = "text"``: the seat's clipboard holds it;
* ``sleep = seconds``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar, Literal

from cud.spec import values as v
from cud.spec.matching import Match

__all__ = ("SETUP_KINDS", "FileCopy", "SetupKind", "SetupStep", "WaitFor", "failure_message", "parse_step",
           "unlooked_why")

SetupKind = Literal["files", "run", "launch", "open", "clipboard", "sleep"]
SETUP_KINDS: tuple[SetupKind, ...] = ("files", "run", "launch", "open", "clipboard", "sleep")
#: Files one ``files`` step may copy.
MAX_FILES = 64
#: Seconds a ``run`` may take by default, and at most.
RUN_TIMEOUT, MAX_RUN_TIMEOUT = 30.0, 600.0
#: Seconds a ``wait_for`` waits by default, and at most.
WAIT_TIMEOUT, MAX_WAIT_TIMEOUT = 15.0, 300.0
#: The longest ``sleep``.
MAX_SLEEP = 60.0
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_WINDOW_KEYS = ("window_class", "window_title")
_ELEMENT_KEYS = ("app", "role", "name")


@dataclasses.dataclass(frozen=True)
class FileCopy:
    src: str  # on the submitter's side; the daemon knows it by this name (its bytes came with the spec)
    dest: str  # in the seat's home
    mode: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dest": self.dest, **({"mode": self.mode} if self.mode is not None else {})}


@dataclasses.dataclass(frozen=True)
class WaitFor:
    """A window (by class and/or title) or an accessibility element (by app, role, name) to appear."""

    window_class: Match | None = None
    window_title: Match | None = None
    app: Match | None = None
    role: Match | None = None
    name: Match | None = None
    timeout: float = WAIT_TIMEOUT

    @property
    def is_window(self) -> bool:
        return self.window_class is not None or self.window_title is not None

    def describe(self) -> str:
        keys = _WINDOW_KEYS if self.is_window else _ELEMENT_KEYS
        return ", ".join(f"{k} {m.describe()}" for k in keys if (m := getattr(self, k)) is not None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: m.text for k in (*_WINDOW_KEYS, *_ELEMENT_KEYS)
                               if (m := getattr(self, k)) is not None}
        return {**out, "timeout": self.timeout}


@dataclasses.dataclass(frozen=True)
class SetupStep:
    """One setup step; the fields its kind does not use keep their defaults."""

    kind: SetupKind
    files: tuple[FileCopy, ...] = ()
    argv: tuple[str, ...] = ()  # run, launch
    target: str = ""  # open: a URL, or a path in the home
    text: str = ""  # clipboard
    seconds: float = 0.0  # sleep
    timeout: float = RUN_TIMEOUT  # run
    exit_code: int = 0  # run
    wait_for: WaitFor | None = None  # launch, open

    #: The kinds that only wait, and so need neither a seat's session nor the operate right. The
    #: list is of what is harmless, not of what acts: a kind added to SETUP_KINDS acts in the
    #: session (and needs the right) until it is named here.
    ONLY_WAITS: ClassVar[frozenset[str]] = frozenset({"sleep"})
    #: The parts of a step (its kind, or ``wait_for``) whose failure says only what everyone who may
    #: read the task may see: a wait, or the windows on the display when a ``wait_for`` ran out (as
    #: a ``window`` check's). Any other part's failure may quote the seat's session (a ``run``'s
    #: output, a path or link of its home), so what it says is read with the operate right
    #: (docs/protocol.md, "Who may read collected files"). Deny by default, as ONLY_WAITS.
    FAILS_ONLY_LOOKING: ClassVar[frozenset[str]] = frozenset({"sleep", "wait_for"})

    @property
    def acts_in_session(self) -> bool:
        """Whether the step acts in the seat's session: it needs a seat with one, and the operate right."""
        return self.kind not in self.ONLY_WAITS

    @property
    def is_url(self) -> bool:
        return self.kind == "open" and _URL.match(self.target) is not None

    def describe(self) -> str:
        """The step in words, for events and errors."""
        if self.kind == "files":
            return "files " + ", ".join(f"{f.src} -> {f.dest}" for f in self.files)
        if self.kind in ("run", "launch"):
            return f"{self.kind} {' '.join(self.argv)[:200]}"
        if self.kind == "open":
            return f"open {self.target}"
        if self.kind == "clipboard":
            return f"clipboard ({len(self.text)} characters)"
        return f"sleep {self.seconds:g} s"

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "files":
            return {"files": [f.to_dict() for f in self.files]}
        if self.kind == "run":
            return {"run": list(self.argv), "timeout": self.timeout, "exit_code": self.exit_code}
        wait = {"wait_for": self.wait_for.to_dict()} if self.wait_for is not None else {}
        if self.kind == "launch":
            return {"launch": list(self.argv), **wait}
        if self.kind == "open":
            return {"open": self.target, **wait}
        if self.kind == "clipboard":
            return {"clipboard": self.text}
        return {"sleep": self.seconds}


def failure_message(step: int, key: str, what: str | None, why: str) -> str:
    """A failed setup (or postconfig) step in words, for its task's error or its checks' why: which step, its
    key (``setup[1].run``, ``postconfig[0].files``: the list it is in names the stage), the step, and why it failed.

    The one wording, for the daemon and for a reader from whom ``why`` is withheld.
    """
    stage = "postconfig" if key.startswith("postconfig[") else "setup"
    return f"{stage} step {step + 1} ({key}{'' if what is None else ': ' + what}) failed: {why}"


def unlooked_why(failure: str) -> str:
    """A check's why when it did not look because a postconfig step failed (``failure``: :func:`failure_message`)."""
    return f"could not look: {failure}"


_STEP_KEYS: dict[str, frozenset[str]] = {
    "files": frozenset({"files"}),
    "run": frozenset({"run", "timeout", "exit_code"}),
    "launch": frozenset({"launch", "wait_for"}),
    "open": frozenset({"open", "wait_for"}),
    "clipboard": frozenset({"clipboard"}),
    "sleep": frozenset({"sleep"}),
}


def parse_step(path: str, value: object) -> SetupStep:
    raw = v.table(path, value, frozenset().union(*_STEP_KEYS.values()))
    kind: SetupKind = v.one_of_keys(path, raw, SETUP_KINDS, "the step's kind")  # type: ignore[assignment]  # one of SETUP_KINDS
    v.table(path, raw, _STEP_KEYS[kind])  # a key of another kind is as unknown here as a typo
    at = v.join(path, kind)
    if kind == "files":
        return SetupStep(kind, files=tuple(_file(v.join(at, i), f) for i, f in enumerate(v.items(at, raw[kind],
                                                                                                  MAX_FILES))))
    if kind == "run":
        timeout = v.number(v.join(path, "timeout"), raw.get("timeout", RUN_TIMEOUT), 0, MAX_RUN_TIMEOUT, " of seconds")
        exit_code = v.integer(v.join(path, "exit_code"), raw.get("exit_code", 0), 0, 255)
        return SetupStep(kind, argv=v.argv(at, raw[kind]), timeout=timeout, exit_code=exit_code)
    wait_for = _wait_for(v.join(path, "wait_for"), raw["wait_for"]) if "wait_for" in raw else None
    if kind == "launch":
        return SetupStep(kind, argv=v.argv(at, raw[kind]), wait_for=wait_for)
    if kind == "open":
        target = v.text(at, raw[kind], v.MAX_PATH)
        if _URL.match(target) is None:
            v.home_path(at, target)
        return SetupStep(kind, target=target, wait_for=wait_for)
    if kind == "clipboard":
        return SetupStep(kind, text=v.text(at, raw[kind], blank=True))
    return SetupStep(kind, seconds=v.number(at, raw[kind], 0, MAX_SLEEP, " of seconds"))


def _file(path: str, value: object) -> FileCopy:
    raw = v.table(path, value, {"src", "dest", "mode"})
    for key in ("src", "dest"):
        if key not in raw:
            raise v.bad(v.join(path, key), None, "given (a file copy needs src and dest)")
    mode = v.file_mode(v.join(path, "mode"), raw["mode"]) if "mode" in raw else None
    return FileCopy(v.local_path(v.join(path, "src"), raw["src"]), v.home_path(v.join(path, "dest"), raw["dest"]), mode)


def _wait_for(path: str, value: object) -> WaitFor:
    raw = v.table(path, value, {*_WINDOW_KEYS, *_ELEMENT_KEYS, "timeout"})
    window = [k for k in _WINDOW_KEYS if k in raw]
    element = [k for k in _ELEMENT_KEYS if k in raw]
    if bool(window) == bool(element):
        raise v.bad(path, value, "a window (window_class, window_title) or an element (app, role, name), not "
                                 + ("both" if window else "neither"))
    matches = {k: v.match(v.join(path, k), raw[k]) for k in (*window, *element)}
    timeout = v.number(v.join(path, "timeout"), raw.get("timeout", WAIT_TIMEOUT), 0, MAX_WAIT_TIMEOUT, " of seconds")
    return WaitFor(**matches, timeout=timeout)
