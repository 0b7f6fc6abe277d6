"""A task worth a report: every kind of mark, an approval, and model text that looks like HTML.

Shared by the report and export tests: :func:`run_rich_task` runs it through a
real daemon (started with :data:`RICH` as its scenario) and approves its safety
check with ``cuctl approve`` as a person would.
"""

from __future__ import annotations

import os
import pwd
from typing import Any

from .daemon import Daemon, cuctl

__all__ = ("FINAL", "HOSTILE", "PROMPT", "RICH", "TYPED", "run_rich_task", "whoami")

PROMPT = 'Fill in the form <b>"now"</b> & press Enter'
HOSTILE = "<script>alert('x')</script> & <img src=x onerror=alert(1)>"
TYPED = "Grüße <b>€</b> ✓"
FINAL = f"Done: typed {TYPED!r} </p><script>alert(2)</script>"

RICH: dict[str, Any] = {
    "name": "rich",
    "steps": [
        {"message": "Let me look at the screen first.", "actions": [{"type": "screenshot"}]},
        {"message": f"I'll click the field. {HOSTILE}",
         "actions": [{"type": "click", "button": "left", "x": 200, "y": 150}]},
        {
            "message": "Now I'll type the text and press Enter.",
            "safety_checks": [{"code": "confirm_typing", "message": "About to type <into> the focused window."}],
            "actions": [{"type": "type", "text": TYPED}, {"type": "keypress", "keys": ["ENTER"]}],
        },
        {
            "actions": [
                {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 3},
                {"type": "drag", "path": [{"x": 100, "y": 600}, {"x": 300, "y": 650}, {"x": 500, "y": 600}]},
                {"type": "double_click", "x": 900, "y": 300},
                {"type": "click", "button": "right", "x": 1000, "y": 500},
            ]
        },
        {"message": FINAL},
    ],
}


def whoami() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def run_rich_task(daemon: Daemon) -> dict[str, Any]:
    """Submit, approve the safety check with cuctl, wait for success; return the task."""
    task_id = daemon.call("submit", prompt=PROMPT)["id"]
    approval = daemon.wait_approval(task_id)
    approved = cuctl(daemon.socket, "approve", str(approval["id"]))
    assert approved.returncode == 0, approved.stderr
    return daemon.wait_state(task_id, "succeeded", "failed")
