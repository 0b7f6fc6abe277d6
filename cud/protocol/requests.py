"""The requests a client may send the daemon, one TypedDict per type (checked by cud.protocol.request_checks).

Part of the socket protocol: :mod:`cud.protocol` exports every name here.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from cud.protocol.replies import ApprovalMode

__all__ = [
    "PingRequest",
    "SubmitRequest",
    "ListRequest",
    "ShowRequest",
    "FollowRequest",
    "CancelRequest",
    "InterruptRequest",
    "ApprovalsRequest",
    "ApproveRequest",
    "DenyRequest",
    "ScreenshotRequest",
    "InspectRequest",
    "TreeRequest",
    "SeatsRequest",
    "PauseRequest",
    "ResumeRequest",
    "ActRequest",
    "ImageRequest",
    "ArtifactRequest",
    "RecordRequest",
    "VideoRequest",
    "MetricsRequest",
    "ExecRequest",
    "PutRequest",
    "GetRequest",
    "ClipboardRequest",
    "ResetRequest",
    "Request",
]


class PingRequest(TypedDict):
    v: int
    type: Literal["ping"]


class SubmitRequest(TypedDict):
    v: int
    type: Literal["submit"]
    prompt: str
    model: NotRequired[str]
    max_steps: NotRequired[int]
    max_duration: NotRequired[int]
    #: The task's budgets (docs/budgets.md); the daemon's config keys of the same names are the default and ceiling.
    max_cost: NotRequired[str | float | int]  # an exact decimal string, or a number
    max_input_tokens: NotRequired[int]
    max_output_tokens: NotRequired[int]
    approval: NotRequired[ApprovalMode]
    #: Pin the task to this seat; without it the first free seat takes it.
    seat: NotRequired[str]
    #: The seat's screen must be this size, WIDTHxHEIGHT (cud.seat_needs); a task waits for such a seat.
    screen: NotRequired[str]
    #: The seat must carry every one of these tags (its ``[[seats]] tags`` and the node's ``[fleet] tags``).
    seat_tags: NotRequired[list[str]]
    #: Policy rules for this task, ``ask``/``deny`` only (cud.daemon.targets.rules): stricter than the daemon's.
    rules: NotRequired[list[dict[str, Any]]]
    #: The stuck guard for this task (docs/stuck.md); each the daemon's [guard] value if not given.
    repeat_limit: NotRequired[int]
    cycle_limit: NotRequired[int]
    on_stuck: NotRequired[Literal["ask", "fail"]]
    #: A task spec's setup, postconfig, checks, pass_if and collect (docs/specs.md; checked by cud.spec.wire on
    #: both sides).
    spec: NotRequired[dict[str, Any]]
    #: The sizes of the spec's files from the submitter's side, {name as the spec writes it: bytes}; their
    #: bytes follow, in this order, as ``chunk`` messages once the daemon says ``ready`` (as for ``put``).
    files: NotRequired[dict[str, int]]
    #: The idempotency key: a submit whose key is already recorded queues nothing and replies with that
    #: task (``"existing": true``); the key decides, whatever the rest of the request says.
    key: NotRequired[str]


class ListRequest(TypedDict):
    v: int
    type: Literal["list"]
    #: Only the task with this idempotency key / the tasks whose key starts with this.
    key: NotRequired[str]
    key_prefix: NotRequired[str]
    #: One page: the newest ``limit`` tasks (LIST_PAGE if not given) whose id is below ``before``
    #: (any, if not given), oldest first; the next page is ``before`` the first one's id.
    limit: NotRequired[int]
    before: NotRequired[int]


class ShowRequest(TypedDict):
    v: int
    type: Literal["show"]
    id: int


class FollowRequest(TypedDict):
    v: int
    type: Literal["follow"]
    id: int


class CancelRequest(TypedDict):
    v: int
    type: Literal["cancel"]
    id: int


class InterruptRequest(TypedDict):
    """End a task that has not ended ``interrupted``, with ``reason`` kept (e.g. "retried as attempt 2 on
    host-b"): a running one is stopped as ``cancel`` stops it, a queued one never runs."""

    v: int
    type: Literal["interrupt"]
    id: int
    reason: str


class ApprovalsRequest(TypedDict):
    v: int
    type: Literal["approvals"]


class ApproveRequest(TypedDict):
    v: int
    type: Literal["approve"]
    id: int


class DenyRequest(TypedDict):
    v: int
    type: Literal["deny"]
    id: int
    reason: NotRequired[str]


class ScreenshotRequest(TypedDict):
    v: int
    type: Literal["screenshot"]
    #: Required when the daemon has more than one seat.
    seat: NotRequired[str]


class InspectRequest(TypedDict):
    """What is at a point of a seat's screen: the window and the chain of accessibility elements."""

    v: int
    type: Literal["inspect"]
    x: int
    y: int
    seat: NotRequired[str]


class TreeRequest(TypedDict):
    """A seat's accessibility tree (every application, or those named ``app``), bounded in depth and count."""

    v: int
    type: Literal["tree"]
    seat: NotRequired[str]
    app: NotRequired[str]
    depth: NotRequired[int]
    count: NotRequired[int]


class SeatsRequest(TypedDict):
    v: int
    type: Literal["seats"]


class PauseRequest(TypedDict):
    """Pause a task at the next boundary between the model's action batches (state ``paused``)."""

    v: int
    type: Literal["pause"]
    id: int


class ResumeRequest(TypedDict):
    v: int
    type: Literal["resume"]
    id: int


class ActRequest(TypedDict):
    """A person's action on a paused task's seat: a model-style action, checked by the driver."""

    v: int
    type: Literal["act"]
    id: int
    action: dict[str, Any]


class ImageRequest(TypedDict):
    """One screenshot of a task's trajectory, streamed as ``chunk`` messages."""

    v: int
    type: Literal["image"]
    id: int
    name: str


class ArtifactRequest(TypedDict):
    """One file a finished spec's ``[collect]`` kept (``cuctl cp task/ID:PATH``), streamed as ``chunk`` messages."""

    v: int
    type: Literal["artifact"]
    id: int
    #: Its path in the seat's home, as the task's ``artifacts`` list names it.
    path: str


class RecordRequest(TypedDict):
    """A task's whole record: its events, then its screenshots as ``file`` messages."""

    v: int
    type: Literal["record"]
    id: int


class VideoRequest(TypedDict):
    """A task's video (docs/video.md) as ``chunk`` messages: as much as is on disk when asked."""

    v: int
    type: Literal["video"]
    id: int


class MetricsRequest(TypedDict):
    """The daemon's metrics; the reply is the Prometheus text exposition as one string."""

    v: int
    type: Literal["metrics"]


class ExecRequest(TypedDict):
    """Run ``argv`` as a seat's user in its session (docs/sessions.md); the reply carries its status and output."""

    v: int
    type: Literal["exec"]
    seat: str
    argv: list[str]
    #: Seconds it may run (default and ceiling: [sessions] max_exec_seconds).
    timeout: NotRequired[int]
    #: Its working directory, in the seat's home (default: the home).
    cwd: NotRequired[str]


class PutRequest(TypedDict):
    """Write a file into a seat's home: the daemon answers ``ready``, then the client sends ``size`` bytes as
    ``chunk`` messages, then the daemon replies."""

    v: int
    type: Literal["put"]
    seat: str
    path: str
    size: int
    mode: NotRequired[int]


class GetRequest(TypedDict):
    """A file of a seat's home, streamed as ``chunk`` messages."""

    v: int
    type: Literal["get"]
    seat: str
    path: str


class ClipboardRequest(TypedDict):
    """A seat's clipboard: with ``text``, set it; without, read it."""

    v: int
    type: Literal["clipboard"]
    seat: str
    text: NotRequired[str]


class ResetRequest(TypedDict):
    """Return an idle seat's session to a clean state now (what happens before a spec's task)."""

    v: int
    type: Literal["reset"]
    seat: str


Request = (
    PingRequest
    | SubmitRequest
    | ListRequest
    | ShowRequest
    | FollowRequest
    | CancelRequest
    | InterruptRequest
    | ApprovalsRequest
    | ApproveRequest
    | DenyRequest
    | ScreenshotRequest
    | SeatsRequest
    | InspectRequest
    | TreeRequest
    | PauseRequest
    | ResumeRequest
    | ActRequest
    | ImageRequest
    | ArtifactRequest
    | RecordRequest
    | VideoRequest
    | MetricsRequest
    | ExecRequest
    | PutRequest
    | GetRequest
    | ClipboardRequest
    | ResetRequest
)
