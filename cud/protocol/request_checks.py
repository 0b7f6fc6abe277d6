"""Every request's fields and their checks: what a client may send, each value bounded.

Part of the socket protocol: :mod:`cud.protocol` exports every name here, so daemon
and client import one module. The limits live here because the checks are where they bite;
the daemon's config may cap each further.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from cud.budget import MAX_TOKENS_LIMIT, parse_amount
from cud.errors import ProtocolError
from cud.protocol.replies import APPROVAL_MODES
from cud.protocol.requests import Request
from cud.seat_needs import MAX_SEAT_TAGS, SCREEN_RULE, TAG_RULE, is_screen, is_tag

__all__ = [
    "ARTIFACT_FILE_NAME",
    "AT_POINT_ACTIONS",
    "HUMAN_ACTIONS",
    "IDEMPOTENCY_KEY",
    "MAX_ARGV_BYTES",
    "MAX_ARGV_ITEMS",
    "MAX_CYCLE_LIMIT",
    "MAX_CLIPBOARD_TEXT",
    "MAX_DURATION_LIMIT",
    "MAX_EXEC_SECONDS",
    "MAX_FILE_LIMIT",
    "MAX_ID",
    "LIST_PAGE",
    "MAX_LIST_PAGE",
    "MAX_PATH_TEXT",
    "MAX_REPEAT_LIMIT",
    "MAX_STEPS_LIMIT",
    "MAX_TASK_RULES",
    "MAX_TEXT",
    "MAX_TREE_COUNT",
    "MAX_TREE_DEPTH",
    "ON_STUCK",
    "POINTER_ACTIONS",
    "RECORD_FILE_NAME",
    "REQUEST_TYPES",
    "SCREENSHOT_FILE_NAME",
    "SEAT_NAME",
    "check_field",
    "parse_request",
]

#: What a seat may be called: short, and safe in a file name, a URL and a log line.
SEAT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
#: The largest file ``put``/``get`` may move, or a spec send (the daemon's [sessions] caps each further).
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
#: Longest prompt or reason accepted; the message cap bounds it anyway, this keeps records sane.
MAX_TEXT = 64 * 1024
MAX_ID = (1 << 63) - 1
#: ``list`` answers one page: the newest ``limit`` tasks (this many when not given), at most
#: MAX_LIST_PAGE, so a request costs what it returns whatever the table holds, and a page of task
#: views stays well under the message cap.
LIST_PAGE = 200
MAX_LIST_PAGE = 1000
#: Upper bound a submitter may ask for; the daemon's config caps it further.
MAX_STEPS_LIMIT = 10_000
#: The longest wall-clock limit a task may have, in seconds (a week).
MAX_DURATION_LIMIT = 7 * 24 * 3600
#: The stuck guard's limits (docs/stuck.md): the same action on an unchanged screen this many
#: times, the same screens in a cycle this many rounds (0: that rule is off). Past these a
#: guard stops nothing a task's max_steps would not stop first.
MAX_REPEAT_LIMIT = 1000
MAX_CYCLE_LIMIT = 20
#: What a stuck task does: ask a person, or end as ``stuck``.
ON_STUCK = ("ask", "fail")
#: A submission's idempotency key (``submit``'s ``key``; docs/protocol.md): printable, no spaces or quotes, so
#: a key fits a log line, a file name and a shell word as it is (a fleet's "RUN/SPEC/REPEAT#ATTEMPT").
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:@/#+-]{1,160}")

#: What a person may do on a paused task's seat (``act``): the model's input actions.
HUMAN_ACTIONS = ("click", "double_click", "drag", "keypress", "move", "scroll", "type")
#: The model's (and a person's) actions aimed at the screen by coordinates: what a point or an element is
#: looked up for, and what an approval binds to the screen the approver saw.
POINTER_ACTIONS = frozenset({"click", "double_click", "drag", "move", "scroll"})
#: The pointer actions at one point (``x``, ``y``); a drag has a path instead. Only these may name a
#: scenario's ``target``, and their phrase ends "at (x, y)".
AT_POINT_ACTIONS = POINTER_ACTIONS - {"drag"}
#: What a record's screenshot may be called: the trajectory's own names, never a path.
SCREENSHOT_FILE_NAME = re.compile(r"step-[0-9]{4,}[A-Za-z0-9_-]{0,32}\.(?:png|jpg|webp)")
#: A file a spec's ``collect`` kept: ``artifacts/`` and its path in the seat's home, each part a plain name.
ARTIFACT_FILE_NAME = re.compile(r"artifacts(?:/(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f]{1,255}){1,64}")
#: What a record's file may be called: a screenshot, the task's video (docs/video.md), a collected file.
RECORD_FILE_NAME = re.compile(rf"{SCREENSHOT_FILE_NAME.pattern}|video\.(?:mp4|webm)|{ARTIFACT_FILE_NAME.pattern}")



# -- request validation ------------------------------------------------------------------
_FieldCheck = Callable[[str, str, object], None]


def _text(limit: int = MAX_TEXT, *, blank: bool = False) -> _FieldCheck:
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


def _integer(low: int, high: int) -> _FieldCheck:
    def check(kind: str, name: str, value: object) -> None:
        if type(value) is not int or not low <= value <= high:
            raise _bad(kind, name, value, f"an integer from {low} to {high}")

    return check


def _choice(*choices: str) -> _FieldCheck:
    def check(kind: str, name: str, value: object) -> None:
        if value not in choices:
            raise _bad(kind, name, value, "one of " + ", ".join(repr(c) for c in choices))

    return check


def _amount(kind: str, name: str, value: object) -> None:
    """An amount of money (cud.budget): a JSON number, or a decimal string to keep it exact."""
    try:
        parse_amount(value)
    except ValueError as exc:
        raise _bad(kind, name, value, f"an amount of money: {exc}") from None


def _seat_name(kind: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not SEAT_NAME.fullmatch(value):
        raise _bad(kind, name, value, "a seat name (letters, digits, '_', '.', '-'; at most 32)")


def _screen(kind: str, name: str, value: object) -> None:
    if not is_screen(value):
        raise _bad(kind, name, value, SCREEN_RULE)


def _seat_tags(kind: str, name: str, value: object) -> None:
    if not isinstance(value, list) or len(value) > MAX_SEAT_TAGS:
        raise _bad(kind, name, value, f"a list of at most {MAX_SEAT_TAGS} tags")
    for index, tag in enumerate(value):
        if not is_tag(tag):
            raise _bad(kind, f"{name}[{index}]", tag, TAG_RULE)


def _action(kind: str, name: str, value: object) -> None:
    # The shape only: the driver checks the rest (bounds, keys, text) and names what is wrong.
    if not isinstance(value, dict) or value.get("type") not in HUMAN_ACTIONS:
        raise _bad(kind, name, value, "an action object whose 'type' is one of " + ", ".join(HUMAN_ACTIONS))


#: How deep and how many elements ``cuctl tree`` may ask for (its defaults are less).
MAX_TREE_DEPTH = 32
MAX_TREE_COUNT = 5000
#: Rules a submitter may add to a task (the daemon checks each one: cud.daemon.targets.rules).
MAX_TASK_RULES = 64


def _key(kind: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not IDEMPOTENCY_KEY.fullmatch(value):
        raise _bad(kind, name, value, "a key of 1 to 160 characters from A-Z a-z 0-9 . _ : @ / # + -")


def _rules(kind: str, name: str, value: object) -> None:
    if not isinstance(value, list) or len(value) > MAX_TASK_RULES or not all(isinstance(r, dict) for r in value):
        raise _bad(kind, name, value, f"a list of at most {MAX_TASK_RULES} rule objects")


def _spec(kind: str, name: str, value: object) -> None:
    # The shape only: cud.spec parses the spec (both sides, the same code) and names a bad key.
    if not isinstance(value, dict):
        raise _bad(kind, name, value, "a spec object (docs/specs.md)")


def _spec_files(kind: str, name: str, value: object) -> None:
    # The sizes only: the bytes follow as ``chunk`` messages once the daemon says ``ready`` (as for ``put``).
    if not isinstance(value, dict) or not all(isinstance(k, str) and type(n) is int and 0 <= n <= MAX_FILE_LIMIT
                                              for k, n in value.items()):
        raise _bad(kind, name, value, f"an object of file names to their sizes in bytes (0 to {MAX_FILE_LIMIT})")


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
_REQUEST_FIELDS: dict[str, dict[str, tuple[_FieldCheck, bool]]] = {
    "ping": {},
    "submit": {
        "prompt": (_text(), True),
        "model": (_text(200), False),
        "max_steps": (_integer(1, MAX_STEPS_LIMIT), False),
        "max_duration": (_integer(1, MAX_DURATION_LIMIT), False),
        "max_cost": (_amount, False),
        "max_input_tokens": (_integer(1, MAX_TOKENS_LIMIT), False),
        "max_output_tokens": (_integer(1, MAX_TOKENS_LIMIT), False),
        "approval": (_choice(*APPROVAL_MODES), False),
        "seat": (_seat_name, False),
        "screen": (_screen, False),
        "seat_tags": (_seat_tags, False),
        "rules": (_rules, False),
        "repeat_limit": (_integer(0, MAX_REPEAT_LIMIT), False),
        "cycle_limit": (_integer(0, MAX_CYCLE_LIMIT), False),
        "on_stuck": (_choice(*ON_STUCK), False),
        "spec": (_spec, False),
        "files": (_spec_files, False),
        "key": (_key, False),
    },
    "list": {"key": (_key, False), "key_prefix": (_key, False), "limit": (_integer(1, MAX_LIST_PAGE), False),
             "before": (_ID, False)},
    "show": {"id": (_ID, True)},
    "follow": {"id": (_ID, True)},
    "cancel": {"id": (_ID, True)},
    "interrupt": {"id": (_ID, True), "reason": (_text(4096), True)},
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
