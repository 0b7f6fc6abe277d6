"""``[sessions]``: how much the seats' sessions move through the socket, and for how long a command may run."""

from __future__ import annotations

import dataclasses

from cud.daemon.config_values import int_in_range
from cud.daemon.config_values import table as checked_table
from cud.protocol import MAX_CLIPBOARD_TEXT, MAX_EXEC_SECONDS, MAX_FILE_LIMIT

__all__ = ("MAX_OUTPUT_LIMIT", "SessionLimits", "load_session_limits")

#: An ``exec`` reply carries stdout and stderr in base64 (4/3 larger) under the 1 MiB message cap.
MAX_OUTPUT_LIMIT = 256 * 1024
_KEYS = {"max_file_bytes", "max_output_bytes", "max_clipboard_bytes", "max_exec_seconds"}


@dataclasses.dataclass(frozen=True)
class SessionLimits:
    #: The largest file ``cuctl cp`` moves into or out of a seat's home.
    max_file_bytes: int = 64 << 20
    #: What ``cuctl exec`` keeps of a command's stdout and of its stderr (each); the rest is dropped.
    max_output_bytes: int = MAX_OUTPUT_LIMIT
    #: The most text ``cuctl clipboard`` reads or sets.
    max_clipboard_bytes: int = MAX_CLIPBOARD_TEXT
    #: How long ``cuctl exec`` may let a command run (its default, and the ceiling of ``--timeout``).
    max_exec_seconds: int = 300


def load_session_limits(value: object) -> SessionLimits:
    table = checked_table("sessions", value, _KEYS)
    bounds = {"max_file_bytes": MAX_FILE_LIMIT, "max_output_bytes": MAX_OUTPUT_LIMIT,
              "max_clipboard_bytes": MAX_CLIPBOARD_TEXT, "max_exec_seconds": MAX_EXEC_SECONDS}
    return SessionLimits(**{key: int_in_range(f"sessions.{key}", table[key], 1, bounds[key]) for key in table})
