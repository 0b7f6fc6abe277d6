"""A desktop like the sandbox's for the conformance suite: an X server, openbox, and a way to act on it.

Four kinds, one per way input reaches a real application:

- ``x11``: Xvfb, driven by ``X11Driver``;
- ``x11vnc``: Xvfb shared by x11vnc, driven by ``VNCDriver``;
- ``xvnc``: TigerVNC's Xvnc, driven by ``VNCDriver``;
- ``xdotool``: Xvfb driven by xdotool, the control. Where it can do the same
  action, a failure in its cell means the harness (or the app) is wrong, not
  a cud driver.

Every server is started here on a display number it picks itself and stopped
by pid; input only ever goes to it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cud.drivers.base import Driver
from cud.drivers.vnc import VNCDriver
from cud.drivers.x11 import X11Driver

from .control import Xdotool
from .recorder import wait_until
from .vnc import start_x11vnc, start_xvnc
from .xserver import reset_xlib_event_codes, start_xvfb, stop_process

__all__ = ("KINDS", "Desktop", "start_desktop")

KINDS = ("x11", "x11vnc", "xvnc", "xdotool")
WIDTH, HEIGHT = 1280, 800


@dataclass
class Desktop:
    kind: str
    display: str
    workdir: Path
    #: What acts: a cud driver, or the xdotool control (same nine methods).
    driver: Driver | Xdotool
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def env(self) -> dict[str, str]:
        """The environment an application on this desktop starts with."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WAYLAND", "XDG_SESSION"))}
        return {**env, "DISPLAY": self.display, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_AT_BRIDGE": "1",
                "GDK_BACKEND": "x11", "QT_QPA_PLATFORM": "xcb"}

    @property
    def is_vnc(self) -> bool:
        return self.kind in ("x11vnc", "xvnc")

    def spawn(self, argv: list[str], log_name: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this desktop; it is stopped by pid with the desktop (or earlier by the caller)."""
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(argv, env=kwargs.pop("env", self.env), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        finally:
            log.close()
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.driver.close()
        for proc in reversed(self.procs):
            stop_process(proc)


def _openbox_running(display: str) -> bool:
    """openbox has taken the screen: it owns the WM_S0 selection."""
    from Xlib.display import Display

    dpy = Display(display)
    try:
        return bool(dpy.get_selection_owner(dpy.intern_atom("WM_S0")) != 0)
    finally:
        dpy.close()


@contextlib.contextmanager
def start_desktop(kind: str, workdir: Path, width: int = WIDTH, height: int = HEIGHT) -> Iterator[Desktop]:
    """A running ``width`` x ``height`` desktop of ``kind`` with openbox; everything stopped on exit."""
    if kind not in KINDS:
        raise ValueError(f"unknown desktop kind {kind!r}; one of {KINDS}")
    procs: list[subprocess.Popen[bytes]] = []
    desktop: Desktop | None = None
    reset_xlib_event_codes()  # the previous desktop may have been another kind of server
    try:
        if kind == "xvnc":
            vnc = start_xvnc(workdir, width=width, height=height)
            procs.append(vnc.proc)
            display = vnc.display
        else:
            xvfb = start_xvfb(workdir, width, height)
            procs.append(xvfb.proc)
            display = xvfb.display
            if kind == "x11vnc":
                vnc = start_x11vnc(display, workdir)
                procs.append(vnc.proc)
        driver: Driver | Xdotool
        if kind == "x11":
            driver = X11Driver(display, wait_seconds=0.05)
        elif kind == "xdotool":
            driver = Xdotool(display)
        else:
            driver = VNCDriver(vnc.server, vnc.password, wait_seconds=0.05)
        desktop = Desktop(kind, display, workdir, driver, procs, width, height)
        desktop.spawn(["openbox", "--sm-disable"], "openbox.log")
        wait_until(lambda: _openbox_running(display), 30, "openbox to manage the screen")
        driver.release_all()
        yield desktop
    finally:
        if desktop is not None:
            desktop.stop()
        else:
            for proc in reversed(procs):
                stop_process(proc)
        reset_xlib_event_codes()
