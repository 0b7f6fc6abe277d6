"""The wire protocol: framing, the size cap, the version, and request validation."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.errors import ProtocolError
from cud.protocol import (
    CHUNK_BYTES,
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    REQUEST_TYPES,
    VersionMismatch,
    decode,
    encode,
    error_reply,
    ok_reply,
    parse_message,
    parse_request,
    parse_upload_chunk,
    request,
    version_mismatch_reply,
)


def test_encode_is_one_line_with_version_and_utf8() -> None:
    line = encode(request("submit", prompt="tippe „Grüße“ ✓"))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"v": PROTOCOL_VERSION, "type": "submit", "prompt": "tippe „Grüße“ ✓"}
    assert "„Grüße“".encode() in line  # raw UTF-8, not \\u escapes


def test_round_trip_of_every_request_type() -> None:
    samples = {
        "ping": {}, "list": {"key_prefix": "run-7/"}, "approvals": {}, "screenshot": {"seat": "left-1"}, "seats": {},
        "pause": {"id": 1}, "resume": {"id": 2}, "image": {"id": 3, "name": "step-0001.png"},
        "artifact": {"id": 3, "path": "Desktop/notes.txt"},
        "act": {"id": 4, "action": {"type": "type", "text": "Grüße"}},
        "submit": {"prompt": "p", "model": "m", "max_steps": 3, "approval": "actions", "seat": "a",
                   "key": "run-7/login.toml/1#2"},
        "show": {"id": 1}, "follow": {"id": 2}, "cancel": {"id": 3}, "approve": {"id": 4},
        "interrupt": {"id": 8, "reason": "retried as attempt 2 on host-b, task 17"},
        "deny": {"id": 5, "reason": "no"}, "record": {"id": 6}, "video": {"id": 7}, "metrics": {},
        "inspect": {"x": 10, "y": 20, "seat": "left"}, "tree": {"app": "gedit", "depth": 3, "count": 50},
        "exec": {"seat": "s1", "argv": ["/bin/echo", "Grüße", ""], "timeout": 5, "cwd": "Desktop"},
        "put": {"seat": "s1", "path": "Desktop/ü.txt", "size": 12, "mode": 0o640}, "get": {"seat": "s1", "path": "a"},
        "clipboard": {"seat": "s1", "text": ""}, "reset": {"seat": "s1"},
    }
    assert set(samples) == REQUEST_TYPES
    for kind, fields in samples.items():
        message = request(kind, **fields)
        assert parse_request(decode(encode(message))) == message


def test_encode_refuses_a_message_over_the_cap() -> None:
    with pytest.raises(ProtocolError, match=str(MAX_MESSAGE_BYTES)):
        encode({"v": 1, "type": "submit", "prompt": "x" * MAX_MESSAGE_BYTES})


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"\xff\xfe\n", "not UTF-8"),
        (b"{nope\n", "not valid JSON"),
        (b"[1, 2]\n", "JSON object, not list"),
        (b'{"type": "ping"}\n', "'v'"),
        (b'{"v": 3, "type": "ping"}\n', "unsupported protocol version 3"),
        (b'{"v": true, "type": "ping"}\n', "'v'"),
        (b'{"v": 1, "x": NaN}\n', "NaN"),
        (b"[" * 100_000 + b"\n", "nested too deeply"),
    ],
)
def test_decode_names_what_is_wrong(line: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        decode(line)


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"type": "explode"}, "unknown request type 'explode'"),
        ({"type": 7}, "unknown request type 7"),
        ({"type": "show"}, "missing field 'id'"),
        ({"type": "show", "id": 0}, "'id' must be an integer from 1"),
        ({"type": "show", "id": True}, "'id' must be an integer"),
        ({"type": "show", "id": "1"}, "got '1'"),
        ({"type": "ping", "extra": 1}, "unknown field 'extra'"),
        ({"type": "submit", "prompt": "   "}, "non-blank string"),
        ({"type": "submit", "prompt": "a\x00b"}, "NUL"),
        ({"type": "submit", "prompt": "p", "approval": "none"}, "'approval' must be one of 'safety', 'actions', got 'none'"),
        ({"type": "submit", "prompt": "p", "max_steps": -1}, "'max_steps' must be an integer from 1"),
        ({"type": "submit", "prompt": "p", "repeat_limit": 1001}, "'repeat_limit' must be an integer from 0 to 1000, got 1001"),
        ({"type": "submit", "prompt": "p", "cycle_limit": -1}, "'cycle_limit' must be an integer from 0 to 20, got -1"),
        ({"type": "submit", "prompt": "p", "on_stuck": "pray"}, "'on_stuck' must be one of 'ask', 'fail', got 'pray'"),
        ({"type": "submit", "prompt": "x" * 70_000}, "70000 characters long"),
        ({"type": "deny", "id": 1, "reason": 5}, "'reason' must be a string"),
        ({"type": "exec", "seat": "s", "argv": []}, "'argv' must be a list of 1 to 4096 strings"),
        ({"type": "exec", "seat": "s", "argv": ["a\x00b"]}, "without NUL characters"),
        ({"type": "exec", "seat": "s", "argv": ["x" * 70_000, "y" * 70_000]}, "140002 bytes long; the limit is 131072"),
        ({"type": "exec", "argv": ["/bin/true"]}, "missing field 'seat'"),
        ({"type": "put", "seat": "s", "path": "p", "size": -1}, "'size' must be an integer from 0 to 1073741824"),
        ({"type": "put", "seat": "s", "path": "p", "size": 1, "mode": 0o10000}, "'mode' must be an integer from 0"),
        ({"type": "clipboard", "seat": "s", "text": "x" * 200_000}, "200000 characters long; the limit is 131072"),
    ],
)
def test_parse_request_names_the_bad_field_and_value(message: dict, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle.replace("(", r"\(")) as caught:
        parse_request({"v": PROTOCOL_VERSION, **message})
    assert caught.value.to_dict()["kind"] == "protocol"


def test_replies_events_and_chunks_parse_on_the_client_side() -> None:
    assert parse_message(dict(ok_reply([1]))) == {"v": PROTOCOL_VERSION, "ok": True, "result": [1]}
    err = parse_message(dict(error_reply({"kind": "not_found", "message": "no task 9", "details": {"id": 9}})))
    assert err["error"]["details"] == {"id": 9}  # type: ignore[typeddict-item]
    event = {"v": PROTOCOL_VERSION, "type": "event", "event": {"task_id": 1, "seq": 1, "at": "t", "kind": "end", "data": {}}}
    assert parse_message(event) == event
    with pytest.raises(ProtocolError, match="malformed 'error'"):
        parse_message({"v": 1, "ok": False, "error": "boom"})
    with pytest.raises(ProtocolError, match="neither a reply"):
        parse_message({"v": 1})
    assert parse_message({"v": PROTOCOL_VERSION, "type": "ready"}) == {"v": PROTOCOL_VERSION, "type": "ready"}


@pytest.mark.parametrize(("message", "needle"), [
    ({"type": "chunk", "data": "not base64!"}, "not base64"),
    ({"type": "chunk"}, "string 'data'"),
    ({"type": "submit", "data": ""}, "expected a 'chunk' message"),
    ({"type": "chunk", "data": "", "extra": 1}, "expected a 'chunk' message"),
    ({"type": "chunk", "data": base64.b64encode(b"x" * (CHUNK_BYTES + 1)).decode()}, "the limit is 524288"),
])
def test_a_clients_chunks_are_checked(message: dict, needle: str) -> None:
    with pytest.raises(ProtocolError, match=needle):
        parse_upload_chunk({"v": PROTOCOL_VERSION, **message})
    assert parse_upload_chunk({"v": PROTOCOL_VERSION, "type": "chunk", "data": "w7w="}) == "ü".encode()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_either_parse_or_raise_protocol_error(data: bytes) -> None:
    try:
        parse_request(decode(data))
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["v", "type", "id", "prompt", "reason", "max_steps", "approval", "zz"]),
                       st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.lists(st.integers())))
def test_arbitrary_json_objects_either_validate_or_raise_protocol_error(obj: dict) -> None:
    try:
        parsed = parse_request(decode(json.dumps(obj).encode()))
    except ProtocolError:
        return
    assert parsed["type"] in REQUEST_TYPES


@pytest.mark.parametrize("seat", ["", "-a", "a/b", "a" * 33, 3, "ä"])
def test_a_bad_seat_name_is_named(seat: object) -> None:
    with pytest.raises(ProtocolError, match="'seat' must be a seat name"):
        parse_request({"v": PROTOCOL_VERSION, "type": "submit", "prompt": "p", "seat": seat})


def test_an_older_client_is_answered_in_its_own_version() -> None:
    with pytest.raises(VersionMismatch) as info:
        decode(b'{"v": 1, "type": "ping"}\n')
    reply = version_mismatch_reply(info.value.version)
    assert reply is not None and reply["v"] == 1 and reply["ok"] is False
    assert "protocol version 1" in reply["error"]["message"] and f"speaks {PROTOCOL_VERSION}" in reply["error"]["message"]
    assert version_mismatch_reply(PROTOCOL_VERSION + 1) is None  # a newer client words it itself


@pytest.mark.parametrize(("fields", "needle"), [
    ({"type": "act", "id": 1, "action": {"type": "screenshot"}}, "'action' must be an action object whose 'type'"),
    ({"type": "act", "id": 1, "action": "click"}, "'action' must be an action object"),
    ({"type": "act", "id": 1}, "missing field 'action'"),
    ({"type": "image", "id": 1, "name": "../cud.sqlite3"}, "'name' must be a trajectory file name"),
    ({"type": "artifact", "id": 1, "path": "../../cud.sqlite3"}, "'path' must be a collected file's path"),
    ({"type": "pause", "id": 0}, "'id' must be an integer from 1"),
])
def test_bad_control_requests_are_named(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_request({"v": PROTOCOL_VERSION, **fields})
    assert needle in info.value.message, info.value.message


def test_the_package_exports_every_public_name_of_its_modules() -> None:
    # ``from cud.protocol import X`` is the one import for both sides: each module's __all__
    # must list what it defines (the package star-imports each module), no name is in two
    # modules, and the old paths cud.requests, cud.request_checks and cud.views give the same objects.
    import ast
    import importlib
    from pathlib import Path

    import cud.protocol

    names: list[str] = []
    for short in ("element_states", "framing", "replies", "request_checks", "requests"):
        module = importlib.import_module(f"cud.protocol.{short}")
        tree = ast.parse(Path(str(module.__file__)).read_text())
        defined = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
        defined |= {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)}
        defined = {name for name in defined if not name.startswith("_") and name != "__all__"}
        assert defined - set(module.__all__) == set(), f"{module.__name__} defines names its __all__ leaves out"
        names += module.__all__
        assert all(getattr(cud.protocol, name) is getattr(module, name) for name in module.__all__)
    assert len(names) == len(set(names)) > 100
    for old in ("cud.requests", "cud.request_checks", "cud.views"):
        module = importlib.import_module(old)
        assert all(getattr(module, name) is getattr(cud.protocol, name) for name in names)
