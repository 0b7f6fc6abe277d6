"""The socket protocol between ``cud`` and ``cuctl``: every message, its framing and its checks.

Framing: one JSON object per line (UTF-8, ``\\n``-terminated), at most
:data:`MAX_MESSAGE_BYTES` including the newline. Every message carries ``"v":``
:data:`PROTOCOL_VERSION`. The requests are in :mod:`cud.requests`, what replies
contain in :mod:`cud.views`; both are re-exported here.

A client sends one request and reads zero or more streamed messages (``event``
for ``follow``, ``chunk`` for ``screenshot``, ``event`` then ``file`` for
``record``) and then exactly one reply:
``{"v": 2, "ok": true, "result": ...}`` or
``{"v": 2, "ok": false, "error": {"kind", "message", "details"}}``.
A connection may carry several requests one after another.

Both sides validate at the boundary: :func:`parse_request` and
:func:`parse_message` turn untrusted JSON into the typed dicts below or raise
:class:`~cud.errors.ProtocolError` naming the bad field and value.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any, Literal, TypedDict, Union, cast

import cud
from cud.errors import ProtocolError
from cud.requests import (  # noqa: F401 (re-exported, as below)
    ActRequest,
    ApprovalsRequest,
    ApproveRequest,
    CancelRequest,
    DenyRequest,
    ClipboardRequest,
    ExecRequest,
    FollowRequest,
    GetRequest,
    PutRequest,
    ResetRequest,
    ImageRequest,
    ArtifactRequest,
    ListRequest,
    MetricsRequest,
    PauseRequest,
    PingRequest,
    RecordRequest,
    Request,
    ResumeRequest,
    ScreenshotRequest,
    InspectRequest,
    TreeRequest,
    SeatsRequest,
    ShowRequest,
    SubmitRequest,
    VideoRequest,
)
from cud.views import (  # noqa: F401 (re-exported: the protocol is one import for both sides)
    APPROVAL_POLICIES,
    EVENT_KINDS,
    FINAL_STATES,
    LIVE_STATES,
    POLICY_STRICTNESS,
    SEAT_NAME,
    SEAT_STATES,
    STATE_NAMES,
    TASK_STATES,
    ApprovalKind,
    ApprovalPolicy,
    ApprovalState,
    ApprovalView,
    ErrorInfo,
    EventView,
    Person,
    PingResult,
    RecordFile,
    RecordResult,
    ScreenshotResult,
    SeatState,
    SeatView,
    Target,
    TaskState,
    TaskView,
    USAGE_KEYS,
    UsageView,
    CostView,
    VERDICTS,
    ArtifactView,
    CheckResultView,
    Verdict,
    VerdictView,
)

__all__ = [
    "APPROVAL_POLICIES",
    "CHUNK_BYTES",
    "EVENT_KINDS",
    "FINAL_STATES",
    "LIVE_STATES",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "ARTIFACT_FILE_NAME",
    "RECORD_FILE_NAME",
    "SCREENSHOT_FILE_NAME",
    "REQUEST_TYPES",
    "check_field",
    "SEAT_NAME",
    "SEAT_STATES",
    "TASK_STATES",
    "decode",
    "encode",
    "error_reply",
    "ok_reply",
    "parse_message",
    "parse_request",
]

#: 2: seats (the ``seats`` request, ``seat`` in submit, screenshot and every task).
PROTOCOL_VERSION = 2
#: The largest file ``put``/``get`` may move (the daemon's [sessions] max_file_bytes caps it further).
MAX_FILE_LIMIT = 1 << 30
#: The longest clipboard text a request may carry (JSON may escape a character into 6 bytes).
MAX_CLIPBOARD_TEXT = 128 * 1024
#: The most arguments, and bytes of them, an ``exec`` may carry.
MAX_ARGV_ITEMS = 4096
MAX_ARGV_BYTES = 128 * 1024
#: The longest path in a seat's home a request may name (Linux's PATH_MAX).
MAX_PATH_TEXT = 4096
#: The longest an ``exec`` may be asked to run, in seconds (the daemon's config caps it further).
MAX_EXEC_SECONDS = 24 * 3600
#: Largest message either side accepts, newline included.
MAX_MESSAGE_BYTES = 1 << 20
#: Raw bytes per ``chunk`` message (base64 makes it 4/3 larger, well under the cap).
CHUNK_BYTES = 512 * 1024
#: Longest prompt or reason accepted; the message cap bounds it anyway, this keeps records sane.
MAX_TEXT = 64 * 1024
MAX_ID = (1 << 63) - 1
#: Upper bound a submitter may ask for; the daemon's config caps it further.
MAX_STEPS_LIMIT = 10_000
#: The longest wall-clock limit a task may have, in seconds (a week).
MAX_DURATION_LIMIT = 7 * 24 * 3600


# -- messages from the daemon ------------------------------------------------------------
class OkReply(TypedDict):
    v: int
    ok: Literal[True]
    result: Any


class ErrorReply(TypedDict):
    v: int
    ok: Literal[False]
    error: ErrorInfo


class EventMessage(TypedDict):
    v: int
    type: Literal["event"]
    event: EventView


class ChunkMessage(TypedDict):
    v: int
    type: Literal["chunk"]
    data: str


class ReadyMessage(TypedDict):
    """The daemon takes the client's ``chunk`` messages now (after a ``put`` it has checked)."""

    v: int
    type: Literal["ready"]


class FileMessage(TypedDict):
    """Part of a named file of a record: base64 of at most CHUNK_BYTES bytes starting at ``offset``."""

    v: int
    type: Literal["file"]
    name: str
    offset: int
    data: str


Reply = Union[OkReply, ErrorReply]
DaemonMessage = Union[OkReply, ErrorReply, EventMessage, ChunkMessage, FileMessage, ReadyMessage]
#: What a person may do on a paused task's seat (``act``): the model's input actions.
HUMAN_ACTIONS = ("click", "double_click", "drag", "keypress", "move", "scroll", "type")
#: What a record's screenshot may be called: the trajectory's own names, never a path.
SCREENSHOT_FILE_NAME = re.compile(r"step-[0-9]{4,}[A-Za-z0-9_-]{0,32}\.(?:png|jpg|webp)")
#: A file a spec's ``collect`` kept: ``artifacts/`` and its path in the seat's home, each part a plain name.
ARTIFACT_FILE_NAME = re.compile(r"artifacts(?:/(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f]{1,255}){1,64}")
#: What a record's file may be called: a screenshot, the task's video (docs/video.md), a collected file.
RECORD_FILE_NAME = re.compile(rf"{SCREENSHOT_FILE_NAME.pattern}|video\.(?:mp4|webm)|{ARTIFACT_FILE_NAME.pattern}")


# -- framing ---------------------------------------------------------------------------------
def encode(message: dict[str, Any]) -> bytes:
    """One line of JSON for ``message``; raises ProtocolError if it exceeds the cap."""
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"message of {len(line)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
            size=len(line),
            limit=MAX_MESSAGE_BYTES,
        )
    return line


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def decode(line: bytes) -> dict[str, Any]:
    """Parse one framed line into a JSON object with the right protocol version."""
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"message of {len(line)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
            size=len(line),
            limit=MAX_MESSAGE_BYTES,
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"message is not UTF-8 (bad byte at offset {exc.start})", offset=exc.start) from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ProtocolError("message is nested too deeply") from None
    except ValueError as exc:
        raise ProtocolError(f"message is not valid JSON: {exc}", excerpt=text[:80]) from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"message must be a JSON object, not {type(obj).__name__}", got=type(obj).__name__)
    version = obj.get("v")
    if type(version) is not int:
        raise ProtocolError(f"message needs an integer protocol version 'v', got {version!r}", field="v", value=version)
    if version != PROTOCOL_VERSION:
        raise VersionMismatch(version)
    return cast(dict[str, Any], obj)


class VersionMismatch(ProtocolError):
    """A message of another protocol version; ``version`` is the other side's."""

    def __init__(self, version: int, message: str | None = None) -> None:
        super().__init__(
            message or f"unsupported protocol version {version}; this side speaks {PROTOCOL_VERSION}",
            field="v", value=version, supported=PROTOCOL_VERSION,
        )
        self.version = version


def version_mismatch_reply(version: int) -> dict[str, Any] | None:
    """The daemon's answer to an older client, framed in the client's own version so it can show why.

    Every version so far frames an error reply the same way. A newer client gets
    None here (an ordinary reply in our version) and words the mismatch itself.
    """
    if not 1 <= version < PROTOCOL_VERSION:
        return None
    error = VersionMismatch(
        version,
        f"this client speaks protocol version {version} and the daemon (cud {cud.__version__}) speaks "
        f"{PROTOCOL_VERSION}: use the cuctl that came with the daemon",
    )
    return {"v": version, "ok": False, "error": error.to_dict()}


# -- request validation ------------------------------------------------------------------
Check = Callable[[str, str, object], None]


def _text(limit: int = MAX_TEXT, *, blank: bool = False) -> Check:
    def check(kind: str, name: str, value: object) -> None:
        if not isinstance(value, str):
            raise _bad(kind, name, value, "a string")
        if not blank and not value.strip():
            raise _bad(kind, name, value, "a non-blank string")
        if len(value) > limit:
            raise ProtocolError(
                f"{kind!r} field {name!r} is {len(value)} characters long; the limit is {limit}",
                field=name,
                length=len(value),
                limit=limit,
            )
        if "\x00" in value:
            raise _bad(kind, name, value, "text without NUL characters")

    return check


def _integer(low: int, high: int) -> Check:
    def check(kind: str, name: str, value: object) -> None:
        if type(value) is not int or not low <= value <= high:
            raise _bad(kind, name, value, f"an integer from {low} to {high}")

    return check


def _choice(*choices: str) -> Check:
    def check(kind: str, name: str, value: object) -> None:
        if value not in choices:
            raise _bad(kind, name, value, "one of " + ", ".join(repr(c) for c in choices))

    return check


def _seat_name(kind: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not SEAT_NAME.fullmatch(value):
        raise _bad(kind, name, value, "a seat name (letters, digits, '_', '.', '-'; at most 32)")


def _action(kind: str, name: str, value: object) -> None:
    # The shape only: the driver checks the rest (bounds, keys, text) and names what is wrong.
    if not isinstance(value, dict) or value.get("type") not in HUMAN_ACTIONS:
        raise _bad(kind, name, value, "an action object whose 'type' is one of " + ", ".join(HUMAN_ACTIONS))


#: How deep and how many elements ``cuctl tree`` may ask for (its defaults are less).
MAX_TREE_DEPTH = 32
MAX_TREE_COUNT = 5000
#: Rules a submitter may add to a task (the daemon checks each one: cud.daemon.targets.rules).
MAX_TASK_RULES = 64


def _rules(kind: str, name: str, value: object) -> None:
    if not isinstance(value, list) or len(value) > MAX_TASK_RULES or not all(isinstance(r, dict) for r in value):
        raise _bad(kind, name, value, f"a list of at most {MAX_TASK_RULES} rule objects")


def _spec(kind: str, name: str, value: object) -> None:
    # The shape only: cud.spec parses the spec (both sides, the same code) and names a bad key.
    if not isinstance(value, dict):
        raise _bad(kind, name, value, "a spec object (docs/specs.md)")


def _spec_files(kind: str, name: str, value: object) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(d, str) for k, d in value.items()):
        raise _bad(kind, name, value, "an object of file names to base64 contents")


def _argv(kind: str, name: str, value: object) -> None:
    if (not isinstance(value, list) or not 1 <= len(value) <= MAX_ARGV_ITEMS
            or not all(isinstance(a, str) and "\x00" not in a for a in value)):
        raise _bad(kind, name, value, f"a list of 1 to {MAX_ARGV_ITEMS} strings without NUL characters")
    size = sum(len(a.encode("utf-8", "surrogatepass")) + 1 for a in value)
    if size > MAX_ARGV_BYTES:
        raise ProtocolError(f"{kind!r} field {name!r} is {size} bytes long; the limit is {MAX_ARGV_BYTES}",
                            field=name, size=size, limit=MAX_ARGV_BYTES)


def _file_name(kind: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not SCREENSHOT_FILE_NAME.fullmatch(value):
        raise _bad(kind, name, value, "a trajectory file name like 'step-0003.png'")


def _artifact_path(kind: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not ARTIFACT_FILE_NAME.fullmatch(f"artifacts/{value}"):
        raise _bad(kind, name, value, "a collected file's path like 'Desktop/notes.txt' (no '..', no control characters)")


def _bad(kind: str, name: str, value: object, wanted: str) -> ProtocolError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ProtocolError(f"{kind!r} field {name!r} must be {wanted}, got {shown}", field=name, value=shown)


_ID = _integer(1, MAX_ID)
# Per request type: field -> (check, required). "v" and "type" are checked before.
_REQUEST_FIELDS: dict[str, dict[str, tuple[Check, bool]]] = {
    "ping": {},
    "submit": {
        "prompt": (_text(), True),
        "model": (_text(200), False),
        "max_steps": (_integer(1, MAX_STEPS_LIMIT), False),
        "max_duration": (_integer(1, MAX_DURATION_LIMIT), False),
        "approval": (_choice(*APPROVAL_POLICIES), False),
        "seat": (_seat_name, False),
        "rules": (_rules, False),
        "spec": (_spec, False),
        "files": (_spec_files, False),
    },
    "list": {},
    "show": {"id": (_ID, True)},
    "follow": {"id": (_ID, True)},
    "cancel": {"id": (_ID, True)},
    "approvals": {},
    "approve": {"id": (_ID, True)},
    "deny": {"id": (_ID, True), "reason": (_text(4096, blank=True), False)},
    "screenshot": {"seat": (_seat_name, False)},
    "seats": {},
    "inspect": {"seat": (_seat_name, False), "x": (_integer(0, 1 << 16), True), "y": (_integer(0, 1 << 16), True)},
    "tree": {"seat": (_seat_name, False), "app": (_text(200), False), "depth": (_integer(1, MAX_TREE_DEPTH), False),
             "count": (_integer(1, MAX_TREE_COUNT), False)},
    "pause": {"id": (_ID, True)},
    "resume": {"id": (_ID, True)},
    "act": {"id": (_ID, True), "action": (_action, True)},
    "image": {"id": (_ID, True), "name": (_file_name, True)},
    "artifact": {"id": (_ID, True), "path": (_artifact_path, True)},
    "record": {"id": (_ID, True)},
    "video": {"id": (_ID, True)},
    "metrics": {},
    "exec": {"seat": (_seat_name, True), "argv": (_argv, True), "timeout": (_integer(1, MAX_EXEC_SECONDS), False),
             "cwd": (_text(MAX_PATH_TEXT), False)},
    "put": {"seat": (_seat_name, True), "path": (_text(MAX_PATH_TEXT), True),
            "size": (_integer(0, MAX_FILE_LIMIT), True), "mode": (_integer(0, 0o7777), False)},
    "get": {"seat": (_seat_name, True), "path": (_text(MAX_PATH_TEXT), True)},
    "clipboard": {"seat": (_seat_name, True), "text": (_text(MAX_CLIPBOARD_TEXT, blank=True), False)},
    "reset": {"seat": (_seat_name, True)},
}
REQUEST_TYPES: frozenset[str] = frozenset(_REQUEST_FIELDS)


def check_field(kind: str, name: str, value: object) -> None:
    """Check one field of a ``kind`` request as :func:`parse_request` does (a spec reuses ``submit``'s)."""
    _REQUEST_FIELDS[kind][name][0](kind, name, value)


def parse_request(obj: dict[str, Any]) -> Request:
    """Check a decoded message against the request schema; return it typed."""
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _REQUEST_FIELDS:
        raise ProtocolError(
            f"unknown request type {kind!r}; expected one of {', '.join(sorted(REQUEST_TYPES))}",
            field="type",
            value=repr(kind)[:80],
        )
    fields = _REQUEST_FIELDS[kind]
    for name in obj:
        if name not in fields and name not in ("v", "type"):
            raise ProtocolError(f"{kind!r} request has unknown field {name[:80]!r}", field=name[:80])
    for name, (check, required) in fields.items():
        if name in obj:
            check(kind, name, obj[name])
        elif required:
            raise ProtocolError(f"{kind!r} request is missing field {name!r}", field=name)
    return cast(Request, obj)


def request(kind: str, **fields: Any) -> dict[str, Any]:
    """Build a request (the client validates its own requests too, so usage errors stay local)."""
    message = {"v": PROTOCOL_VERSION, "type": kind, **{k: v for k, v in fields.items() if v is not None}}
    parse_request(message)
    return message


# -- daemon messages ---------------------------------------------------------------------
def ok_reply(result: Any) -> OkReply:
    return {"v": PROTOCOL_VERSION, "ok": True, "result": result}


def error_reply(error: ErrorInfo | dict[str, Any]) -> ErrorReply:
    return {"v": PROTOCOL_VERSION, "ok": False, "error": cast(ErrorInfo, error)}


def event_message(event: EventView) -> EventMessage:
    return {"v": PROTOCOL_VERSION, "type": "event", "event": event}


def chunk_message(data: str) -> ChunkMessage:
    return {"v": PROTOCOL_VERSION, "type": "chunk", "data": data}


def ready_message() -> ReadyMessage:
    return {"v": PROTOCOL_VERSION, "type": "ready"}


def parse_upload_chunk(obj: dict[str, Any]) -> bytes:
    """A ``chunk`` message a client sends after ``ready``: its bytes (at most CHUNK_BYTES), or ProtocolError."""
    data = obj.get("data")
    if obj.get("type") != "chunk" or not isinstance(data, str) or set(obj) - {"v", "type", "data"}:
        raise ProtocolError(f"expected a 'chunk' message with string 'data', got {str(obj)[:80]}", field="type")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise ProtocolError("a 'chunk' message's 'data' is not base64", field="data") from None
    if len(raw) > CHUNK_BYTES:
        raise ProtocolError(f"a 'chunk' message carries {len(raw)} bytes; the limit is {CHUNK_BYTES}",
                            field="data", size=len(raw), limit=CHUNK_BYTES)
    return raw


def file_message(name: str, offset: int, data: str) -> FileMessage:
    return {"v": PROTOCOL_VERSION, "type": "file", "name": name, "offset": offset, "data": data}


def parse_message(obj: dict[str, Any]) -> DaemonMessage:
    """Check a decoded message from the daemon (the client side of the boundary)."""
    if obj.get("type") == "event":
        event = obj.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str) or type(event.get("seq")) is not int:
            raise ProtocolError(f"event message has a malformed 'event': {str(event)[:80]}", field="event")
        return cast(EventMessage, obj)
    if obj.get("type") == "ready":
        return cast(ReadyMessage, obj)
    if obj.get("type") == "chunk":
        if not isinstance(obj.get("data"), str):
            raise ProtocolError("chunk message needs a string 'data'", field="data")
        return cast(ChunkMessage, obj)
    if obj.get("type") == "file":
        name, offset = obj.get("name"), obj.get("offset")
        if not isinstance(name, str) or not RECORD_FILE_NAME.fullmatch(name):
            raise ProtocolError(f"file message has a bad 'name': {str(name)[:80]!r}", field="name")
        if type(offset) is not int or offset < 0:
            raise ProtocolError(f"file message has a bad 'offset': {str(offset)[:80]!r}", field="offset")
        if not isinstance(obj.get("data"), str):
            raise ProtocolError("file message needs a string 'data'", field="data")
        return cast(FileMessage, obj)
    ok = obj.get("ok")
    if ok is True:
        if "result" not in obj:
            raise ProtocolError("reply with ok=true has no 'result'", field="result")
        return cast(OkReply, obj)
    if ok is False:
        error = obj.get("error")
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("kind"), str)
            or not isinstance(error.get("message"), str)
            or not isinstance(error.get("details", {}), dict)
        ):
            raise ProtocolError(f"reply with ok=false has a malformed 'error': {str(error)[:80]}", field="error")
        error.setdefault("details", {})
        return cast(ErrorReply, obj)
    raise ProtocolError(f"message from the daemon is neither a reply, an event nor a chunk: {str(obj)[:80]}")
