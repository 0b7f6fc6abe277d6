"""The socket protocol's framing: one JSON object per line, its version, and the messages around replies.

Framing: one JSON object per line (UTF-8, ``\\n``-terminated), at most
:data:`MAX_MESSAGE_BYTES` including the newline. Every message carries ``"v":``
:data:`PROTOCOL_VERSION`. The requests are in :mod:`cud.protocol.requests`, their
fields' checks and limits in :mod:`cud.protocol.request_checks`, what replies contain
in :mod:`cud.protocol.replies`; :mod:`cud.protocol` exports all of them.

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
from typing import Any, Literal, TypedDict, cast

import cud
from cud.errors import ProtocolError
from cud.protocol.replies import ErrorInfo, EventView
from cud.protocol.request_checks import RECORD_FILE_NAME, parse_request

__all__ = [
    "CHUNK_BYTES",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "ChunkMessage",
    "DaemonMessage",
    "EncodedItems",
    "ErrorReply",
    "EventMessage",
    "FileMessage",
    "OkReply",
    "ReadyMessage",
    "Reply",
    "VersionMismatch",
    "chunk_message",
    "decode",
    "encode",
    "encode_json",
    "encode_ok",
    "error_reply",
    "event_message",
    "file_message",
    "ok_reply",
    "parse_message",
    "parse_upload_chunk",
    "ready_message",
    "request",
    "version_mismatch_reply",
]

#: 2: seats (the ``seats`` request, ``seat`` in submit, screenshot and every task).
PROTOCOL_VERSION = 2
#: Largest message either side accepts, newline included.
MAX_MESSAGE_BYTES = 1 << 20
#: Raw bytes per ``chunk`` message (base64 makes it 4/3 larger, well under the cap).
CHUNK_BYTES = 512 * 1024


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
    """The daemon takes the client's ``chunk`` messages now (after a ``put`` or a spec's ``submit`` it has checked)."""

    v: int
    type: Literal["ready"]


class FileMessage(TypedDict):
    """Part of a named file of a record: base64 of at most CHUNK_BYTES bytes starting at ``offset``."""

    v: int
    type: Literal["file"]
    name: str
    offset: int
    data: str


Reply = OkReply | ErrorReply
DaemonMessage = OkReply | ErrorReply | EventMessage | ChunkMessage | FileMessage | ReadyMessage


# -- framing ---------------------------------------------------------------------------------
def encode(message: dict[str, Any]) -> bytes:
    """One line of JSON for ``message``; raises ProtocolError if it exceeds the cap."""
    line = encode_json(message) + b"\n"
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"message of {len(line)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
            size=len(line),
            limit=MAX_MESSAGE_BYTES,
        )
    return line


class EncodedItems:
    """A result that is a JSON array whose items are encoded already (each as :func:`encode` writes JSON):
    a reply that measured its items to fit the cap sends those bytes, never encodes them twice."""

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]) -> None:
        self.items = items


def encode_ok(result: Any) -> bytes:
    """:func:`encode` of ``ok_reply(result)``, the same bytes; an :class:`EncodedItems` result is spliced in."""
    if not isinstance(result, EncodedItems):
        return encode(dict(ok_reply(result)))
    line = b"".join((b'{"v":%d,"ok":true,"result":[' % PROTOCOL_VERSION, b",".join(result.items), b"]}\n"))
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(line)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
                            size=len(line), limit=MAX_MESSAGE_BYTES)
    return line


def encode_json(value: Any) -> bytes:
    """``value`` as the protocol writes JSON (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


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
