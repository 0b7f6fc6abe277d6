"""``[guard]``: when a task's model counts as stuck, and what then (docs/stuck.md).

The daemon's values are each task's defaults; a task may set its own (``cuctl submit
--repeat-limit``, a spec's keys), within the protocol's limits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cud.daemon.config_values import bad, int_in_range
from cud.daemon.config_values import table as checked_table
from cud.protocol import MAX_CYCLE_LIMIT, MAX_REPEAT_LIMIT, ON_STUCK, GuardView

__all__ = ("GUARD_KEYS", "GuardConfig", "load_guard")

GUARD_KEYS = frozenset({"repeat_limit", "cycle_limit", "on_stuck"})


@dataclasses.dataclass(frozen=True)
class GuardConfig:
    #: The same action on an unchanged screen this many times in a row is stuck (0: never).
    repeat_limit: int = 5
    #: The same few screens coming back this many rounds is stuck (0: never).
    cycle_limit: int = 4
    #: "ask": an approval of kind ``stuck`` lets a person decide; "fail": the task ends ``stuck``.
    on_stuck: str = "ask"

    def for_task(self, given: dict[str, Any]) -> GuardView:
        """The task's guard: what it gives (checked by the protocol), the daemon's values for the rest."""
        return {"repeat_limit": int(given.get("repeat_limit", self.repeat_limit)),
                "cycle_limit": int(given.get("cycle_limit", self.cycle_limit)),
                "on_stuck": given.get("on_stuck", self.on_stuck)}


def load_guard(value: object) -> GuardConfig:
    table = checked_table("guard", value, GUARD_KEYS)
    values: dict[str, Any] = {}
    if "repeat_limit" in table:
        values["repeat_limit"] = int_in_range("guard.repeat_limit", table["repeat_limit"], 0, MAX_REPEAT_LIMIT)
    if "cycle_limit" in table:
        values["cycle_limit"] = int_in_range("guard.cycle_limit", table["cycle_limit"], 0, MAX_CYCLE_LIMIT)
    if "on_stuck" in table:
        if table["on_stuck"] not in ON_STUCK:
            raise bad("guard.on_stuck", table["on_stuck"], " or ".join(repr(v) for v in ON_STUCK))
        values["on_stuck"] = table["on_stuck"]
    return GuardConfig(**values)
