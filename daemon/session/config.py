"""``[sessions]``: how much the seats' sessions move through the socket (``cp``, a spec's files), for how long
a command may run, and the user a ``metric`` check's judge runs as."""

from __future__ import annotations

import dataclasses
from typing import Any

from cud.daemon.config_values import int_in_range, string
from cud.daemon.config_values import table as checked_table
from cud.daemon.session.user import judge_account
from cud.protocol import MAX_CLIPBOARD_TEXT, MAX_EXEC_SECONDS, MAX_FILE_LIMIT

__all__ = ("MAX_OUTPUT_LIMIT", "MAX_SPEC_FILE_LIMIT", "SESSIONS_KEYS", "SessionLimits", "load_session_limits")

#: An ``exec`` reply carries stdout and stderr in base64 (4/3 larger) under the 1 MiB message cap.
MAX_OUTPUT_LIMIT = 256 * 1024
#: The largest a spec's file may be set to: a file is one SQLite value, whose limit is 1e9 bytes.
MAX_SPEC_FILE_LIMIT = 512 << 20
#: The keys of ``[sessions]``.
SESSIONS_KEYS = frozenset({"max_file_bytes", "max_output_bytes", "max_clipboard_bytes", "max_exec_seconds",
                           "max_spec_file_bytes", "max_spec_total_bytes", "judge_user"})


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
    #: The largest file a spec sends from the submitter's side (a ``files`` setup's ``src``, an ``equals`` fixture).
    max_spec_file_bytes: int = 64 << 20
    #: All of one spec's files together (they are kept in the database with the task until it is pruned).
    max_spec_total_bytes: int = 256 << 20
    #: Who a ``metric`` check's judge runs as (cud.daemon.spec.metric): it parses what the model made, so never
    #: root and never the daemon (a daemon that is not root can only run it as itself).
    judge_user: str = "nobody"


def load_session_limits(value: object) -> SessionLimits:
    table = checked_table("sessions", value, SESSIONS_KEYS)
    bounds = {"max_file_bytes": MAX_FILE_LIMIT, "max_output_bytes": MAX_OUTPUT_LIMIT,
              "max_clipboard_bytes": MAX_CLIPBOARD_TEXT, "max_exec_seconds": MAX_EXEC_SECONDS,
              "max_spec_file_bytes": MAX_SPEC_FILE_LIMIT, "max_spec_total_bytes": 1 << 40}
    limits: dict[str, Any] = {key: int_in_range(f"sessions.{key}", table[key], 1, bounds[key])
                              for key in table if key in bounds}
    if "judge_user" in table:
        limits["judge_user"] = user = string("sessions.judge_user", table["judge_user"])
        judge_account("sessions.judge_user", user)  # refused now, not at the first metric check
    return SessionLimits(**limits)
