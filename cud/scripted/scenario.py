"""Scenarios: what the scripted model answers, turn by turn.

A scenario is a JSON object ``{"name": str, "description"?: str, "steps": [step, ...]}``.
Each step answers one request of a run; a run's turn number is the number of
``computer_call_output`` items in the request's input, so a request with none
starts a run at turn 0 and one server can serve any number of runs in sequence.
A step is one of:

``{"actions": [action, ...], "safety_checks"?: [...], "message"?: str, "expect_screenshot"?: bool, "delay"?: s}``
    A ``computer_call`` with the GA batched ``actions``. Actions are the SDK's action
    dicts (click, double_click, drag, keypress, move, scroll, type, wait, screenshot)
    and are sent verbatim, malformed or off-screen ones included, so tests can feed
    the client bad input. Instead of ``x``/``y``, a click, double_click, move or
    scroll (or a point of a drag ``path``) may carry ``"target": {"color": "#RRGGBB"}``:
    the server substitutes the centre of that colour's pixels in the last screenshot
    of the request (see :mod:`cud.scripted.vision`). Safety checks are
    ``{"code": str, "message": str, "id"?: str}``; ids are generated when absent.
    ``message`` adds an assistant message with phase ``commentary`` before the call.
    ``expect_screenshot`` makes the server refuse (HTTP 400) a request without a
    decodable, non-empty screenshot.
A call step may wait for what it aims at: ``"until": {"color": "#RRGGBB", "looks": n}`` answers its
    turn with a ``wait`` action instead while the request's last screenshot lacks that colour, at
    most ``n`` times (then an HTTP 400 naming the colour), as a model waits for an application to
    show; the step's own actions come once the colour shows.
``{"message": str, "delay"?: s}``
    The final assistant message; the client's loop ends here.
``{"http_error": status, "body"?: {...}, "headers"?: {str: str}, "times"?: n, "delay"?: s}``
    Answer with that HTTP status (400-599) and ``body`` (default: an OpenAI-style
    ``{"error": {...}}``). The openai SDK retries 408, 409, 429 and 5xx twice by
    default, so without ``times`` every retry fails too and the run ends with the
    SDK's error. With ``times`` the step is *transient*: it fails the first ``times``
    attempts of its turn (the SDK numbers attempts in ``x-stainless-retry-count``)
    and the next step answers the turn after that. A header such as
    ``{"retry-after-ms": "10"}`` keeps the SDK's back-off short.

Two kinds only the chat server (:mod:`cud.scripted.chat`) plays, as an open model writes them:

``{"text": str, "finish_reason"?: str, "delay"?: s}``
    The model's answer, sent verbatim (not rendered in the format's grammar): a malformed or
    unparseable answer; ``finish_reason`` (default ``stop``) as the server reports it, such as
    ``length`` for an answer cut short.
``{"call_user": str, "delay"?: s}``
    The model asks the user this question (the format's ``call_user``).
``{"gave_up": str, "delay"?: s}``
    The model ends the run saying it failed, with these words (the format's ``terminate`` with
    status failure).

``delay`` (seconds) holds the answer back. A request past the last step, a target
whose colour is not on the screenshot, or a missing screenshot gets an HTTP 400
error naming the problem (never a made-up final message, so a diverging run fails
loudly). To replay an exported run, emit one ``actions`` step per model turn with
the actions as recorded (absolute x/y), then its final ``message``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn, TypeGuard

from cud.errors import ConfigError
from cud.protocol import AT_POINT_ACTIONS
from cud.scripted.vision import parse_colour

__all__ = ()

_KEYS = {
    "call": {"actions", "safety_checks", "message", "expect_screenshot", "delay", "until"},
    "final": {"message", "delay"},
    "error": {"http_error", "body", "headers", "times", "delay"},
    "text": {"text", "finish_reason", "delay"},
    "call_user": {"call_user", "delay"},
    "gave_up": {"gave_up", "delay"},
}
#: The step kinds only the chat server plays (an open model's own text).
CHAT_ONLY = ("text", "call_user", "gave_up")
#: The key that makes a step of each kind, the first present deciding.
_KIND_KEYS = (("http_error", "error"), ("actions", "call"), ("text", "text"), ("call_user", "call_user"),
              ("gave_up", "gave_up"), ("message", "final"))


@dataclass(frozen=True)
class Step:
    index: int  # position in the file, for messages
    kind: str  # "call", "final", "error", or (chat only) "text", "call_user" or "gave_up"
    actions: list[Any] | None = None
    safety_checks: tuple[dict[str, str], ...] = ()
    message: str | None = None
    expect_screenshot: bool = False
    http_error: int | None = None
    body: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    times: int | None = None
    delay: float = 0.0
    until: tuple[str, int] | None = None  # a call's colour to wait for, and how many screenshots it may take
    text: str | None = None  # a text step's answer, a call_user step's question, a gave_up step's words
    finish_reason: str = "stop"  # a text step's, as the chat server reports it


@dataclass(frozen=True)
class Turn:
    """What answers one turn: transient errors for the first attempts, then ``step``."""

    transient: tuple[Step, ...]
    step: Step


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    turns: tuple[Turn, ...]
    description: str = ""


def bundled_names() -> list[str]:
    folder = resources.files("cud.scripted") / "scenarios"
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def load_scenario(spec: str | os.PathLike[str]) -> Scenario:
    """Load a scenario from a file path, or by the name of a bundled one (``demo``)."""
    path = os.fspath(spec)
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read scenario {path!r}: {exc}", path=path) from None
        return parse_scenario_text(text, source=path)
    name = path.removesuffix(".json")
    if os.sep not in path and name in bundled_names():
        text = (resources.files("cud.scripted") / "scenarios" / f"{name}.json").read_text(encoding="utf-8")
        return parse_scenario_text(text, source=f"bundled scenario {name!r}")
    raise ConfigError(
        f"no scenario file or bundled scenario named {path!r} (bundled: {', '.join(bundled_names())})", path=path
    )


def scenario_folder(folder: str | os.PathLike[str]) -> dict[str, Scenario]:
    """Every ``NAME.json`` in ``folder`` by NAME: what ``scripted:NAME`` models play (ConfigError names a bad one)."""
    try:
        names = sorted(entry for entry in os.listdir(folder) if entry.endswith(".json"))
    except OSError as exc:
        raise ConfigError(f"cannot read the scenario folder {os.fspath(folder)!r}: {exc.strerror}",
                          path=os.fspath(folder)) from None
    return {name.removesuffix(".json"): load_scenario(os.path.join(folder, name)) for name in names}


def parse_scenario_text(text: str, *, source: str) -> Scenario:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", source=source
        ) from None
    return parse_scenario(data, source=source)


def parse_scenario(data: object, *, source: str = "scenario") -> Scenario:
    """Validate a decoded scenario; ConfigError names the bad value and where it is."""
    if not isinstance(data, dict):
        _fail(source, None, "top level", data, "must be an object with 'name' and 'steps'")
    unknown = sorted(set(data) - {"name", "description", "steps"})
    if unknown:
        _fail(source, None, unknown[0], data[unknown[0]], "is not a scenario field (name, description, steps)")
    name, description, steps = data.get("name"), data.get("description", ""), data.get("steps")
    if not isinstance(name, str) or not name:
        _fail(source, None, "name", name, "must be a non-empty string")
    if not isinstance(description, str):
        _fail(source, None, "description", description, "must be a string")
    if not isinstance(steps, list) or not steps:
        _fail(source, None, "steps", steps, "must be a non-empty list")
    parsed = tuple(_step(source, index, raw) for index, raw in enumerate(steps))
    turns: list[Turn] = []
    pending: list[Step] = []
    for step in parsed:
        if step.kind == "error" and step.times is not None:
            pending.append(step)
        else:
            turns.append(Turn(tuple(pending), step))
            pending = []
    if pending:
        _fail(source, pending[-1].index, "times", pending[-1].times, "needs a later step to answer after the retries")
    return Scenario(name=name, description=description, steps=parsed, turns=tuple(turns))


def _fail(source: str, step: int | None, field: str, value: object, problem: str) -> NoReturn:
    where = source if step is None else f"{source}: step {step}"
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise ConfigError(f"{where}: {field} {shown} {problem}", source=source, step=step, field=field, value=shown)


def _step(source: str, index: int, raw: object) -> Step:
    if not isinstance(raw, dict):
        _fail(source, index, "step", raw, "must be an object")
    kind = next((kind for key, kind in _KIND_KEYS if key in raw), None)
    if kind is None:
        _fail(source, index, "step", raw, "has none of " + ", ".join(repr(key) for key, _ in _KIND_KEYS))
    unknown = sorted(set(raw) - _KEYS[kind])
    if unknown:
        allowed = ", ".join(sorted(_KEYS[kind]))
        _fail(source, index, unknown[0], raw[unknown[0]], f"is not allowed in this kind of step (allowed: {allowed})")

    def check(field: str, ok: bool, problem: str) -> None:
        if not ok:
            _fail(source, index, field, raw[field], problem)

    delay = raw.get("delay", 0.0)
    if "delay" in raw:
        check("delay", _number(delay) and math.isfinite(delay) and delay >= 0, "must be a number of seconds >= 0")
    if "message" in raw:
        check("message", isinstance(raw["message"], str), "must be a string")
    if kind == "error":
        status, body, headers, times = raw["http_error"], raw.get("body"), raw.get("headers", {}), raw.get("times")
        check("http_error", _integer(status) and 400 <= status <= 599, "must be an HTTP error status 400-599")
        if "body" in raw:
            check("body", isinstance(body, dict), "must be an object")
        if "headers" in raw:
            check(
                "headers",
                isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values()),
                "must map header names to string values",
            )
        if "times" in raw:
            check("times", _integer(times) and times >= 1, "must be an integer >= 1")
        return Step(index, kind, http_error=status, body=body, headers=tuple(headers.items()), times=times, delay=delay)
    if kind == "final":
        return Step(index, kind, message=raw["message"], delay=delay)
    if kind in CHAT_ONLY:
        check(kind, isinstance(raw[kind], str), "must be a string")
        if "finish_reason" in raw:
            check("finish_reason", isinstance(raw["finish_reason"], str) and raw["finish_reason"] != "",
                  "must be a non-empty string")
        return Step(index, kind, text=raw[kind], finish_reason=raw.get("finish_reason", "stop"), delay=delay)
    actions, checks = raw["actions"], raw.get("safety_checks", [])
    check("actions", isinstance(actions, list), "must be a list of actions")
    for number, action in enumerate(actions):
        _check_targets(source, index, number, action)
    until = raw.get("until")
    if "until" in raw:
        check("until", isinstance(until, dict) and set(until) == {"color", "looks"},
              'must be {"color": "#RRGGBB", "looks": n}')
        assert isinstance(until, dict)  # check() raised otherwise
        check("until", parse_colour(until["color"]) is not None, "must name a colour written #RRGGBB")
        check("until", _integer(until["looks"]) and until["looks"] >= 1, "must allow an integer >= 1 of looks")
    if "expect_screenshot" in raw:
        check("expect_screenshot", isinstance(raw["expect_screenshot"], bool), "must be true or false")
    if "safety_checks" in raw:
        check("safety_checks", isinstance(checks, list), "must be a list of {code, message} objects")
    for number, item in enumerate(checks):
        field = f"safety_checks[{number}]"
        if not isinstance(item, dict) or set(item) - {"id", "code", "message"}:
            _fail(source, index, field, item, "must be an object with 'code', 'message' and optionally 'id'")
        for key in ("code", "message"):
            if not isinstance(item.get(key), str):
                _fail(source, index, f"{field}.{key}", item.get(key), "must be a string")
        if "id" in item and (not isinstance(item["id"], str) or not item["id"]):
            _fail(source, index, f"{field}.id", item["id"], "must be a non-empty string")
    return Step(
        index,
        kind,
        actions=actions,
        safety_checks=tuple(checks),
        message=raw.get("message"),
        expect_screenshot=raw.get("expect_screenshot", False),
        delay=delay,
        until=(until["color"], until["looks"]) if until is not None else None,
    )


def _check_targets(source: str, index: int, number: int, action: object) -> None:
    # Everything else about an action is passed through unchecked on purpose.
    if not isinstance(action, dict):
        return
    field = f"actions[{number}]"
    if "target" in action:
        if action.get("type") not in AT_POINT_ACTIONS:
            problem = "cannot have a target (click, double_click, move and scroll can)"
            _fail(source, index, f"{field}.type", action.get("type"), problem)
        _check_target(source, index, field, action)
    path = action.get("path")
    if action.get("type") == "drag" and isinstance(path, list):
        for point_number, point in enumerate(path):
            if isinstance(point, dict) and "target" in point:
                _check_target(source, index, f"{field}.path[{point_number}]", point)


def _check_target(source: str, index: int, field: str, holder: dict[str, Any]) -> None:
    if "x" in holder or "y" in holder:
        _fail(source, index, f"{field}.target", holder["target"], "cannot be combined with x/y")
    target = holder["target"]
    if not isinstance(target, dict) or set(target) != {"color"}:
        _fail(source, index, f"{field}.target", target, 'must be {"color": "#RRGGBB"}')
    if parse_colour(target["color"]) is None:
        _fail(source, index, f"{field}.target.color", target["color"], "must be a colour written #RRGGBB")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
