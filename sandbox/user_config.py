"""``CONFIG=my.toml`` and ``SCENARIOS=dir/``: the user's config and scenarios in the sandbox.

The daemon's config (``cud.toml`` in the sandbox directory) is written at every start of the
daemon: the sandbox's own keys (the seats' displays, session buses, users and homes), then the
user's config as it is, comments and all, then ``[video] enabled = true`` unless the user's
config has a ``[video]`` of its own. So the user's config is merged with the sandbox's: every
key of it counts, and the keys the sandbox sets itself (:data:`SANDBOX_KEYS`) are refused by
name before anything starts, since two values for one key would leave one of them unused.

``SCENARIOS`` is a folder of ``NAME.json`` scenarios the scripted model plays for a task whose
model is ``scripted:NAME``, besides the example suite's (a name in both: the user's).
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

from parts import Settings
from procs import SandboxError

__all__ = ("SANDBOX_KEYS", "check_user_files", "fingerprint", "merged_config")

#: The top-level keys the sandbox's config sets (or its daemon's flags do), with what the sandbox puts there.
SANDBOX_KEYS = {
    "socket": "the daemon's socket, .sandbox/cud.sock (--socket)",
    "state_dir": "the daemon's state, .sandbox/state (--state-dir)",
    "display": "the seat's X display",
    "vnc": "the seat's VNC server (SANDBOX=xvnc)",
    "vnc_password_file": "the sandbox's VNC password",
    "x_display": "the X display a VNC seat shows",
    "session_bus": "the seat's session bus",
    "user": "the seat's user",
    "home": "the seat's home, .sandbox/homes/SEAT",
    "home_template": "the seat's home template, .sandbox/home-template",
    "empty_existing_home": "true: the home is the sandbox's own, made under .sandbox/homes",
    "session_unit": "none: the sandbox's sessions run without systemd",
    "private_tmp": "true as root: each seat's own /tmp, /var/tmp, /dev/shm, /run/lock",
    "home_path": "/home/user as root: where each seat's session sees its home",
    "seats": "one [[seats]] table per seat (SEATS=N)",
}


def _read_config(path: Path) -> tuple[str, dict[str, object]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SandboxError(f"CONFIG {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    try:
        return text, tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SandboxError(f"CONFIG {str(path)!r} is not TOML: {exc}") from None


def check_user_files(settings: Settings) -> None:
    """Refuse, before anything starts, a CONFIG that cannot be read or sets a key of the sandbox's, and a
    SCENARIOS that is not a folder."""
    if settings.config is not None:
        _, data = _read_config(settings.config)
        for key in data:
            if key in SANDBOX_KEYS:
                raise SandboxError(f"CONFIG {str(settings.config)!r} sets {key!r}, which the sandbox sets itself "
                                   f"({SANDBOX_KEYS[key]}): remove {key!r} from it; the rest of it is merged with "
                                   "the sandbox's config (docs/sandbox.md)")
    if settings.scenarios is not None and not settings.scenarios.is_dir():
        raise SandboxError(f"SCENARIOS {str(settings.scenarios)!r} is not a folder (of NAME.json scenarios "
                           "the scripted model plays as scripted:NAME)")


def merged_config(settings: Settings, top: list[str], tables: list[str]) -> str:
    """The daemon's config: ``top`` (top-level keys), the user's CONFIG as it is, ``tables``, and video on
    unless the user's config says otherwise."""
    lines = ["# Written by `make sandbox-up` at every start of the daemon.", "", *top]
    has_video = False
    if settings.config is not None:
        text, data = _read_config(settings.config)
        has_video = "video" in data
        lines += ["", f"# CONFIG={settings.config}, as it is:", text.rstrip("\n"),
                  f"# The end of CONFIG={settings.config}."]
    lines += ["", *tables]
    if not has_video:
        lines += ["", "# Every task on an X11 seat is recorded as video (VNC seats are not: docs/video.md).",
                  "[video]", "enabled = true"]
    text = "\n".join(lines) + "\n"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SandboxError(f"CONFIG {str(settings.config)!r} does not merge with the sandbox's config: {exc}") from None
    return text


def fingerprint(settings: Settings) -> dict[str, str | None]:
    """What the model and the daemon started with, to tell a changed CONFIG or SCENARIOS at the next up."""
    config = None
    if settings.config is not None:
        config = f"{settings.config} {hashlib.sha256(settings.config.read_bytes()).hexdigest()}"
    scenarios = None
    if settings.scenarios is not None:
        listing = sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
                         for entry in os.scandir(settings.scenarios) if entry.name.endswith(".json"))
        scenarios = f"{settings.scenarios} {hashlib.sha256(repr(listing).encode()).hexdigest()}"
    return {"config": config, "scenarios": scenarios}
