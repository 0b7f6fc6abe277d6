"""An exported run as a scenario for the scripted model: a desktop workflow as a regression test.

One ``actions`` step per model turn, with the actions exactly as the driver
received them (absolute x/y: a colour target the original model aimed at was
already resolved), the turn's messages as commentary and its safety checks
again, then the final message. Replaying it through the daemon drives the same
actions on the screen; where the screen no longer lets them happen (an action
off the smaller screen, a refused approval) the replay fails where the original
would have.

A turn whose only action was a screenshot left no driver call in the record;
it replays as ``{"type": "screenshot"}``. A run that did not succeed has no
final message: its scenario ends after the last recorded turn, so the scripted
model answers a further request with an error, as a diverging run should.

    python -m cud.record replay EXPORT > scenario.json
    python -m cud.scripted --scenario scenario.json
"""

from __future__ import annotations

import os
from typing import Any

from cud.record.export import load_export
from cud.record.reading import Record, steps

__all__ = ("scenario_from_export", "scenario_from_record")


def scenario_from_record(record: Record, *, safety_checks: bool = True) -> dict[str, Any]:
    """The scenario (the format of :mod:`cud.scripted.scenario`) that plays ``record`` again."""
    task = record.task
    turns = steps(record)
    succeeded = task.get("state") == "succeeded" and task.get("final_message") is not None
    if succeeded and turns and turns[-1].ended and not turns[-1].actions and not turns[-1].screenshot:
        turns = turns[:-1]  # the final answer: replayed as the closing message below
    out: list[dict[str, Any]] = []
    for turn in turns:
        actions = [dict(entry["action"]) for entry in turn.actions if isinstance(entry.get("action"), dict)]
        step: dict[str, Any] = {"actions": actions or [{"type": "screenshot"}]}
        if turn.messages:
            step["message"] = "\n\n".join(turn.messages)
        checks = [
            {"code": str(c.get("code")), "message": str(c.get("message"))}
            for approval in turn.approvals if approval.kind == "safety"
            for c in approval.checks
        ]
        if safety_checks and checks:
            step["safety_checks"] = checks
        out.append(step)
    if succeeded:
        out.append({"message": str(task["final_message"])})
    if not out:
        raise ValueError(f"task {task.get('id')} has no model turns to replay")
    return {
        "name": f"replay-of-task-{task.get('id')}",
        "description": f"Replay of cud task {task.get('id')} ({task.get('state')}): {str(task.get('prompt'))[:200]}",
        "steps": out,
    }


def scenario_from_export(source: str | os.PathLike[str], *, safety_checks: bool = True) -> dict[str, Any]:
    """:func:`scenario_from_record` of an export directory or archive."""
    return scenario_from_record(load_export(source), safety_checks=safety_checks)
