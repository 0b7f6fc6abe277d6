"""How to tell that a running part of the sandbox answers: one quick probe each, no waiting."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from buses import a11y_answers, session_answers
from parts import Settings, kind_of, prefix_of
from procs import Record

__all__ = ("answers", "daemon_answers", "rfb_answers", "tcp_answers", "x_connects")


def x_connects(display: str, xauthority: Path) -> bool:
    from Xlib import display as xdisplay  # the venv's python-xlib
    from Xlib import error as xerror

    os.environ["XAUTHORITY"] = str(xauthority)
    try:
        connection = xdisplay.Display(display)
    except (xerror.DisplayError, OSError):
        return False
    connection.close()
    return True


def _x_query(display: str, xauthority: Path, query: str) -> bool:
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    os.environ["XAUTHORITY"] = str(xauthority)
    try:
        connection = xdisplay.Display(display)
    except (xerror.DisplayError, OSError):
        return False
    try:
        root = connection.screen().root
        if query == "wm":
            prop = root.get_full_property(connection.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType)
            return bool(prop and prop.value)
        # query == "demo-app": a window titled like the demo app, at any depth (the WM reparents).
        pending = [root]
        while pending:
            window = pending.pop()
            try:
                if window.get_wm_name() == "cud demo":
                    return True
                pending.extend(window.query_tree().children)
            except xerror.XError:  # a window that vanished meanwhile
                continue
        return False
    finally:
        connection.close()


def rfb_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as conn:
            return conn.recv(12).startswith(b"RFB ")
    except OSError:
        return False


def tcp_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


def daemon_answers(settings: Settings) -> bool:
    cuctl = settings.venv / "bin" / "cuctl"
    if not cuctl.exists():
        return False
    result = subprocess.run(
        [str(cuctl), "--socket", str(settings.socket), "ping"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
    )
    return result.returncode == 0


def answers(settings: Settings, record: Record, records: dict[str, Record]) -> bool:
    """Whether a running part does its job right now (one quick probe, no waiting)."""
    xauthority = settings.path("Xauthority")
    xserver = records.get(prefix_of(record.name) + "xserver")
    display = xserver.info.get("display", "") if xserver is not None else ""
    name = kind_of(record.name)
    if name == "xserver":
        ok = x_connects(record.info["display"], xauthority)
        return ok and ("vnc_port" not in record.info or rfb_answers(int(record.info["vnc_port"])))
    if name == "session-bus":
        return session_answers(record)
    if name == "a11y-bus":
        return a11y_answers(record, records.get(prefix_of(record.name) + "session-bus"))
    if name == "openbox":
        return bool(display) and _x_query(display, xauthority, "wm")
    if name == "x11vnc":
        return rfb_answers(int(record.info["vnc_port"]))
    if name == "demo-app":
        return bool(display) and _x_query(display, xauthority, "demo-app")
    if name == "model":
        return tcp_answers(int(record.info["port"]))
    if name == "daemon":
        return daemon_answers(settings)
    raise AssertionError(name)
