"""The sandbox's demo app on a private Xvfb: the desktop both example pictures are made on."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.apps.reporting import SYSTEM_PYTHON
from tests.support.daemon import ROOT
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, start_xvfb, stop_process

__all__ = ("PROMPT", "demo_desktop")

PROMPT = "Type a greeting into the demo app's blue field and press Enter."


@contextlib.contextmanager
def demo_desktop(work: Path) -> Iterator[XServer]:
    """An Xvfb of its own with the demo app up and ready; both stopped by pid on the way out."""
    xvfb = start_xvfb(work)
    log = work / "demo.jsonl"
    app = subprocess.Popen(
        # GTK 3 under Debian's Python (PyGObject); no session bus here, so no accessibility bridge either.
        [SYSTEM_PYTHON, str(ROOT / "sandbox" / "demo_app.py"), "--log", str(log), "--geometry", "900x420+190+150"],
        env={"DISPLAY": xvfb.display, "PATH": "/usr/bin:/bin", "NO_AT_BRIDGE": "1"}, stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: log.exists() and '"ready"' in log.read_text(), 30, "the demo app")
        yield xvfb
    finally:
        stop_process(app)
        xvfb.stop()
