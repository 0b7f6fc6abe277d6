"""What the daemon's replies contain: tasks, approvals, events, seats, and their states.

Part of the socket protocol (:mod:`cud.protocol` exports every name here).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, get_args

__all__ = [
    "APPROVAL_MODES",
    "EVENT_KINDS",
    "FINAL_STATES",
    "LIVE_STATES",
    "APPROVAL_MODE_STRICTNESS",
    "SEAT_STATES",
    "TASK_STATES",
    "USAGE_KEYS",
    "VERDICTS",
    "ApprovalKind",
    "ApprovalMode",
    "ApprovalState",
    "ApprovalView",
    "ArtifactView",
    "CheckResultView",
    "CostView",
    "ErrorInfo",
    "EventView",
    "FailedStepView",
    "GuardView",
    "Person",
    "PingResult",
    "PriceView",
    "RecordFile",
    "RecordResult",
    "ScreenshotResult",
    "SeatState",
    "SeatView",
    "Target",
    "TaskState",
    "TaskView",
    "UsageView",
    "Verdict",
    "VerdictView",
]

TaskState = Literal[
    "queued", "running", "awaiting_approval", "paused", "succeeded", "failed", "cancelled", "interrupted",
    "budget_exceeded", "stuck",
]
TASK_STATES: tuple[TaskState, ...] = get_args(TaskState)
#: budget_exceeded: a task ended at one of its budgets (docs/budgets.md), on_budget "fail" or a person's no.
#: stuck: the model repeated itself on an unchanged screen (docs/stuck.md), on_stuck "fail" or a person's no.
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "interrupted", "budget_exceeded",
                                          "stuck"})
#: A task under way: it holds a seat (and a dead daemon leaves it interrupted).
LIVE_STATES: frozenset[str] = frozenset({"running", "awaiting_approval", "paused"})

ApprovalMode = Literal["safety", "actions"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)
#: Stricter modes come later: a submitter may only move right in this tuple.
APPROVAL_MODE_STRICTNESS = {"safety": 0, "actions": 1}

#: budget: a task reached a budget and asks for more (docs/budgets.md); stuck: the model repeats itself (docs/stuck.md).
ApprovalKind = Literal["safety", "action", "budget", "stuck"]
ApprovalState = Literal["pending", "approved", "denied", "timed_out", "cancelled", "interrupted"]

# -- what results contain ----------------------------------------------------------------
class ErrorInfo(TypedDict):
    kind: str
    message: str
    details: dict[str, Any]


class Person(TypedDict):
    uid: int
    name: str


#: What a task sent to the model and what the model counted, per step (in each ``step``
#: event) and summed per task (``TaskView.usage``).
USAGE_KEYS: tuple[str, ...] = ("requests", "request_bytes", "images", "image_bytes", "input_tokens",
                               "cached_tokens", "output_tokens")


class UsageView(TypedDict):
    requests: int  # HTTP attempts, retries included
    request_bytes: int  # request bodies as sent, every attempt
    images: int  # images in the requests (an old screenshot's placeholder counts)
    image_bytes: int  # the images' decoded data
    input_tokens: int  # the model's usage: its input, of which cached, and its output
    cached_tokens: int
    output_tokens: int


class CostView(TypedDict):
    """What a task (or a step) cost, priced by the daemon's [budget.prices] (docs/budgets.md)."""

    #: The exact decimal amount ("0.003125"), never a float; null when unknown.
    amount: str | None
    currency: str
    #: Why the amount is unknown ("no price for model X"); null when it is known.
    unknown: str | None


class PriceView(TypedDict):
    """The price a task was accepted with (daemon/budget/accepted.py): its model's [budget.prices] entry
    and the [budget] currency at submit, per million tokens, each an exact decimal string. The task's
    cost is counted by it, whatever the config says later."""

    currency: str
    input: str
    cached_input: str
    output: str


#: failed: a check looked and disagreed; error: none failed, but one or more could not look (cud.outcome).
Verdict = Literal["passed", "failed", "error"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)


class FailedStepView(TypedDict):
    """A spec's ``postconfig`` step that failed, so that no check looked (as a ``setup_failed`` error's details)."""

    step: int  # its index in the spec's postconfig
    key: str  # postconfig[INDEX].KIND
    what: str  # the step in words
    #: The step's kind, or ``wait_for`` when the wait ran out: whether why it failed quotes the seat's session.
    part: str


class CheckResultView(TypedDict):
    """One check of a spec as it was judged: what it expected, what was there, and why it passed or not."""

    index: int  # its place in the spec's checks
    name: str
    kind: str  # command, file, element, window, answer
    weight: float
    passed: bool  # outcome == "passed" (kept for readers from before outcomes)
    #: passed, failed (it looked and the seat disagreed) or error (it could not look: cud.outcome.check_outcome).
    outcome: Literal["passed", "failed", "error"]
    expected: str  # in words
    observed: Any  # what was seen (text cut to a bound, a number, a list), null if nothing was
    why: str  # one line: why it passed or failed
    ms: float
    #: Set when a postconfig step failed and so the check did not look (its outcome is then error).
    postconfig_failed: NotRequired[FailedStepView]


class VerdictView(TypedDict):
    #: By ``pass_if`` (cud.outcome.verdict_outcome). all: passed when every check passed, failed when one
    #: failed, else error; any: passed when one passed, else failed when one failed, else error.
    verdict: Verdict
    #: all: the weighted fraction of checks that passed, 0 to 1; any: the best single check's own score,
    #: 1.0 when one passed, else 0.0.
    score: float
    passed: int
    failed: int  # checks that looked and disagreed
    errors: int  # checks that could not look
    #: The state the model's part ended in (succeeded, failed, cancelled): what state the checks saw.
    state: str
    checks: list[CheckResultView]
    at: str
    #: The spec's pass_if ("all" or "any"); absent in a verdict recorded before it was: "all".
    pass_if: NotRequired[str]
    #: Present when the final message matched the spec's fail_if_answer, which failed the verdict whatever
    #: its checks say: why, in words.
    answer_failed: NotRequired[str]


class ArtifactView(TypedDict):
    """A file the spec's ``collect`` kept: ``path`` in the seat's home, also its name in the record
    (``artifacts/PATH``); ``error`` says why it was not kept (then ``bytes`` is 0 and ``sha256`` null)."""

    path: str
    bytes: int
    sha256: str | None
    error: str | None


class GuardView(TypedDict):
    repeat_limit: int
    cycle_limit: int
    on_stuck: Literal["ask", "fail"]


class TaskView(TypedDict):
    id: int
    state: TaskState
    prompt: str
    model: str
    max_steps: int
    #: Seconds the task may run, approvals included (null: the daemon's max_duration).
    max_duration: int | None
    #: The task's budgets (docs/budgets.md): money (an exact decimal string) and tokens; null: none.
    #: A person's approval at the line raises them.
    max_cost: str | None
    max_input_tokens: int | None
    max_output_tokens: int | None
    approval: ApprovalMode
    #: The seat it runs or ran on; while queued, the seat it is pinned to (null: any).
    seat: str | None
    #: Whether the submitter named the seat.
    pinned: bool
    #: The screen size its seat must have ("WxH"; null: any) and the tags it must carry (cud.seat_needs).
    screen: str | None
    seat_tags: list[str]
    steps: int
    final_message: str | None
    error: ErrorInfo | None
    reason: str | None
    submitter: Person
    created_at: str
    started_at: str | None
    finished_at: str | None
    #: What the task sent the model so far (null: it has made no request yet).
    usage: UsageView | None
    #: What the model's answers cost so far (null: none yet), updated with each answer.
    cost: CostView | None
    #: The price the task was accepted with (null: its model had none, or it was submitted before cud kept one).
    price: PriceView | None
    #: Why a queued task waits although a seat may be free (the day's cap, [budget] daily_cost); else null.
    held: str | None
    #: The submitter's policy rules for this task ([] if none), as submitted.
    rules: list[dict[str, Any]]
    #: The stuck guard the task runs with (docs/stuck.md); None for tasks from before it: the daemon's [guard].
    guard: GuardView | None
    #: A spec's tags, reset, setup, postconfig, checks, pass_if and collect in their normal form (docs/specs.md); null:
    #: a prompt only.
    spec: dict[str, Any] | None
    #: How the spec's checks judged the task; null until judged, and for a task without checks.
    verdict: VerdictView | None
    #: The files the spec's ``collect`` kept, in the task's record ([] if none).
    artifacts: list[ArtifactView]
    #: The submission's idempotency key (``submit``'s ``key``); null: none was given.
    key: str | None


class Target(TypedDict):
    """What an action touches (see cud.daemon.targets.lookup): the window and the accessibility element."""

    kind: Literal["point", "focus"]
    x: NotRequired[int]
    y: NotRequired[int]
    #: {"id", "class", "instance", "title", "pid", "process"}; None if unknown (see note).
    window: dict[str, Any] | None
    #: {"role", "name", "description", "states", "bounds", "application", "depth"}; None if unknown.
    element: dict[str, Any] | None
    #: Why part of it is unknown (no bus, an app not on it, a bus too slow), else None.
    note: str | None
    ms: float


class ApprovalView(TypedDict):
    id: int
    task_id: int
    #: The seat of the task (whose screen the approval is about).
    seat: str | None
    kind: ApprovalKind
    state: ApprovalState
    checks: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    #: What each action touches, in the order of ``actions`` (None where it touches nothing).
    targets: list[Target | None]
    step: int
    screenshot: str | None
    created_at: str
    deadline_at: str | None
    decided_at: str | None
    decided_by: Person | None
    reason: str | None


#: Every kind of event a task's record holds, in the order a task meets them; the store
#: writes no other (docs/report.md describes each).
EVENT_KINDS: tuple[str, ...] = (
    "queued",
    "reset",
    "requeued",
    "running",
    "video_started",
    "action",
    "step",
    "model_retry",
    "diagnostic",
    "stuck",
    "approval_requested",
    "approval_decided",
    "budget_warning",
    "budget_reached",
    "budget_extended",
    "pause_requested",
    "paused",
    "human_action",
    "resumed",
    "cancel_requested",
    "interrupt_requested",
    "video_finished",
    "video_failed",
    "setup",
    "postconfig",
    "check",
    "collected",
    "end",
)


class EventView(TypedDict):
    task_id: int
    seq: int
    at: str
    #: One of EVENT_KINDS.
    kind: str
    data: dict[str, Any]


class PingResult(TypedDict):
    protocol: int
    version: str
    pid: int
    peer: Person
    may_submit: bool
    may_approve: bool
    #: May run code and move files on seats' sessions ([access] operate_users/operate_groups).
    may_operate: bool


class ScreenshotResult(TypedDict):
    width: int
    height: int
    bytes: int
    format: Literal["png"]


class RecordFile(TypedDict):
    name: str
    bytes: int


SeatState = Literal["idle", "busy", "unavailable"]
SEAT_STATES: tuple[SeatState, ...] = get_args(SeatState)


class SeatView(TypedDict):
    """One seat as ``seats`` shows it; exactly one of ``display`` and ``vnc`` is present."""

    name: str
    display: NotRequired[str]
    vnc: NotRequired[str]
    state: SeatState
    task: int | None
    #: The screen's (width, height) when the display last answered; null while unavailable.
    size: list[int] | None
    #: Its labels for a task's ``seat_tags``: its ``[[seats]] tags``, then the node's ``[fleet] tags``.
    tags: list[str]
    #: What its session keeps to itself (docs/sessions.md#a-seat-of-its-own): its network (``host``, ``none``,
    #: ``allow``: only to ``allowed``), whether its temp directories are its own, where it sees its home (null: at
    #: the home's own path).
    network: str
    allowed: list[str]
    private_tmp: bool
    home_path: str | None
    #: Why the seat is unavailable; null otherwise.
    error: str | None
    #: The process id of the seat's driver process (it grabs, encodes and sends input for this seat alone);
    #: null while none runs. A new one starts when the seat next needs its display.
    driver_pid: int | None


class RecordResult(TypedDict):
    """Ends a ``record`` stream: what was sent, so the client can check it got all of it."""

    task: TaskView
    events: int
    files: list[RecordFile]
    #: The collected files (``artifacts/PATH``) not sent: the peer may not read them
    #: (``AccessRights.may_read_collected``, docs/protocol.md); [] when all were sent.
    withheld: list[str]
