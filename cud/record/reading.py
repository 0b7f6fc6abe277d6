"""A task's record as cuctl receives it, and the steps a person reads it by.

The daemon keeps a task as its rows and events plus its screenshot files; the
``record`` request streams exactly that, and :class:`Record` holds it. The
events are the truth; :func:`steps` only groups them: every event between one
``step`` event and the next belongs to the later step (a step is recorded when
it ends), and what follows the last ``step`` event is a step that never ended
(the task is still running, or it failed or was stopped mid-step).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from cud.protocol import USAGE_KEYS

__all__ = ("Approval", "Record", "Step", "describe_usage", "is_video", "seconds_between", "steps")


def is_video(name: str) -> bool:
    """Whether a record file is the task's video (``video.mp4``, ``video.webm``)."""
    return name.startswith("video.")


def is_artifact(name: str) -> bool:
    """Whether a record file is one a spec's ``[collect]`` kept (``artifacts/PATH``); the rest are screenshots."""
    return name.startswith("artifacts/")


@dataclasses.dataclass
class Record:
    task: dict[str, Any]  # a TaskView
    events: list[dict[str, Any]]  # EventViews in seq order
    files: dict[str, bytes]  # trajectory file name -> bytes
    #: Collected files (``artifacts/PATH``) the daemon did not send: the reader may not read them.
    withheld: tuple[str, ...] = ()

    def contents(self) -> str:
        """What the record holds, in words: ``3 screenshots, the video, 1 collected file; verdict passed (1.00)``."""
        videos = sum(1 for name in self.files if is_video(name))
        artifacts = sum(1 for name in self.files if is_artifact(name))
        shots = len(self.files) - videos - artifacts
        verdict = self.task.get("verdict")
        return (f"{shots} screenshot{'s' * (shots != 1)}" + (", the video" if videos else "")
                + (f", {artifacts} collected file{'s' * (artifacts != 1)}" if artifacts else "")
                + (f", {len(self.withheld)} collected file{'s' * (len(self.withheld) != 1)} withheld (reading "
                   "them needs the operate right)" if self.withheld else "")
                + (f"; verdict {verdict['verdict']} (score {verdict['score']:.2f})" if verdict else ""))


@dataclasses.dataclass
class Approval:
    id: int
    kind: str
    checks: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    screenshot: str | None
    requested_at: str
    targets: list[Any] = dataclasses.field(default_factory=list)  # what each action touches
    deadline_at: str | None = None
    outcome: str | None = None  # None while pending
    by: dict[str, Any] | None = None
    reason: str | None = None
    decided_at: str | None = None


@dataclasses.dataclass
class Step:
    number: int
    ended: bool  # False for a step the record stops in the middle of
    saw: str | None  # screenshot file the model was sent for this step
    screenshot: str | None  # screenshot file this step produced
    messages: list[str]
    actions: list[dict[str, Any]]  # {"action": {...}, "ms": float}
    approvals: list[Approval]
    diagnostics: list[dict[str, Any]]
    timings: dict[str, float]  # total_ms, model_ms, driver_ms, approval_ms, overhead_ms (ended steps)
    at: str | None  # when the step ended (or its last event)
    usage: dict[str, int] = dataclasses.field(default_factory=dict)  # see cud.protocol.UsageView (ended steps)
    cost: dict[str, Any] | None = None  # what its answers cost (cud.protocol.CostView; ended steps)
    #: Its budget events (budget_warning, budget_reached, budget_extended), each {"kind", **data}.
    budgets: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def steps(record: Record) -> list[Step]:
    """The record's steps in order, with their approvals and diagnostics attached."""
    out: list[Step] = []
    approvals: dict[int, Approval] = {}
    pending_actions: list[dict[str, Any]] = []
    pending_approvals: list[Approval] = []
    pending_diagnostics: list[dict[str, Any]] = []
    pending_budgets: list[dict[str, Any]] = []
    last_at: str | None = None
    last_screenshot: str | None = None
    for event in record.events:
        kind, data = event["kind"], event["data"]
        if kind == "action":
            pending_actions.append({"action": data.get("action", {}), "ms": data.get("ms"), "target": data.get("target")})
        elif kind == "approval_requested":
            approval = Approval(
                id=data["approval_id"], kind=data.get("kind", "?"), checks=list(data.get("checks") or []),
                actions=list(data.get("actions") or []), screenshot=data.get("screenshot"),
                requested_at=event["at"], deadline_at=data.get("deadline_at"),
                targets=list(data.get("targets") or []),
            )
            approvals[approval.id] = approval
            pending_approvals.append(approval)
        elif kind == "approval_decided":
            decided = approvals.get(data.get("approval_id", -1))
            if decided is not None:
                decided.outcome, decided.by = data.get("outcome"), data.get("by")
                decided.reason, decided.decided_at = data.get("reason"), event["at"]
        elif kind == "diagnostic":
            pending_diagnostics.append(data)
        elif kind.startswith("budget_"):
            pending_budgets.append({"kind": kind, **data})
        elif kind == "step":
            out.append(Step(
                number=int(data["step"]), ended=True, saw=data.get("saw"), screenshot=data.get("screenshot"),
                messages=[str(m) for m in data.get("messages") or []],
                actions=list(data.get("actions") or []),
                approvals=pending_approvals, diagnostics=pending_diagnostics,
                timings={k: float(data[k]) for k in ("total_ms", "model_ms", "driver_ms", "approval_ms",
                                                     "overhead_ms") if isinstance(data.get(k), (int, float))},
                at=event["at"],
                usage={k: int(data[k]) for k in USAGE_KEYS if isinstance(data.get(k), int)},
                cost=data.get("cost") if isinstance(data.get("cost"), dict) else None, budgets=pending_budgets,
            ))
            last_screenshot = data.get("screenshot") or last_screenshot
            pending_actions, pending_approvals, pending_diagnostics, pending_budgets = [], [], [], []
        elif kind == "end":
            for approval in approvals.values():  # the store cancels pending approvals without an event
                if approval.outcome is None:
                    approval.outcome, approval.decided_at = "cancelled", event["at"]
                    approval.reason = f"the task ended ({data.get('state')})"
        last_at = event["at"]
    if pending_actions or pending_approvals or pending_diagnostics or pending_budgets:
        out.append(Step(
            number=(out[-1].number if out else 0) + 1, ended=False, saw=last_screenshot, screenshot=None,
            messages=[], actions=pending_actions, approvals=pending_approvals,
            diagnostics=pending_diagnostics, timings={}, at=last_at, budgets=pending_budgets,
        ))
    return out


def describe_usage(usage: Any) -> str:
    """What a step or a task sent the model and what the model counted, in one line."""
    if not isinstance(usage, dict) or not usage.get("requests"):
        return "no model request"
    requests, images = int(usage.get("requests", 0)), int(usage.get("images", 0))
    return (f"{_bytes(int(usage.get('request_bytes', 0)))} sent in {requests} request{'s' * (requests != 1)} "
            f"({images} image{'s' * (images != 1)}, {_bytes(int(usage.get('image_bytes', 0)))} of images); "
            f"tokens: {int(usage.get('input_tokens', 0)):,} in ({int(usage.get('cached_tokens', 0)):,} cached), "
            f"{int(usage.get('output_tokens', 0)):,} out")


def _bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds between two ISO timestamps of the daemon, or None if either is missing."""
    if not start or not end:
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (b - a).total_seconds()
