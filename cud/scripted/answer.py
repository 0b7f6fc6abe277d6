"""What the scripted model checks in a request and puts in an answer: the API's errors and items.

Split from :mod:`cud.scripted.server`, which speaks HTTP and keeps the run's state.
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

from PIL import Image

from cud.scripted.scenario import CHAT_ONLY, Step
from cud.scripted.vision import decode_screenshot, find_colour, parse_colour

__all__ = ()

_ERROR_TYPES = {401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_exceeded"}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        body: dict[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        self.status, self.headers = status, headers
        self.body = body or {"error": {"message": message, "type": kind, "param": param, "code": code}}


def validate(body: object) -> list[dict[str, Any]]:
    """The checks the real API makes that a broken client could fail; returns the input items."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise ApiError(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    if body.get("stream") or body.get("background"):
        raise ApiError(400, "The scripted model answers only non-streaming, foreground requests.", param="stream")
    tools = body.get("tools")
    if not (isinstance(tools, list) and len(tools) == 1 and isinstance(tools[0], dict)
            and tools[0].get("type") == "computer"):
        raise ApiError(400, f"tools must be exactly [{{'type': 'computer'}}], got {tools!r}", param="tools")
    items = body.get("input")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ApiError(400, "input must be a list of input items.", param="input")
    return items


def check_outputs(items: list[dict[str, Any]], earlier: dict[str, tuple[str, ...]]) -> None:
    """Every computer_call_output answers a call (in the input, or the continued response's) and acks its checks."""
    calls: dict[Any, tuple[Any, ...]] = dict(earlier)
    for item in items:
        if item.get("type") == "computer_call":
            calls[item.get("call_id")] = tuple(_check_id(c) for c in item.get("pending_safety_checks") or [])
    for item in items:
        if item.get("type") != "computer_call_output":
            continue
        call_id = item.get("call_id")
        if call_id not in calls:
            raise ApiError(400, f"No computer call found for output with call_id {call_id!r}.", param="input")
        acknowledged = {_check_id(check) for check in item.get("acknowledged_safety_checks") or []}
        for check in calls[call_id]:
            if check not in acknowledged:
                raise ApiError(400, f"Safety check {check!r} was not acknowledged.", param="input")


def _check_id(check: object) -> object:
    return check.get("id") if isinstance(check, dict) else check


def attempt_number(header: str | None) -> int:
    try:
        return max(0, int(header or 0))
    except ValueError:
        return 0


def pick(transient: tuple[Step, ...], step: Step, attempt: int) -> Step:
    for error in transient:
        assert error.times is not None
        if attempt < error.times:
            return error
        attempt -= error.times
    return step


def not_chat_only(step: Step) -> None:
    """Refuse a step only the chat server plays (an open model's own text) on a server with a computer tool."""
    if step.kind in CHAT_ONLY:
        raise ApiError(400, f"step {step.index} is a {step.kind!r} step, which only the chat server plays "
                            "(python -m cud.scripted --api chat)", code="chat_only_step")


def _screenshot(step: Step, items: list[dict[str, Any]], why: str) -> Image.Image:
    outputs = [item for item in items if item.get("type") == "computer_call_output"]
    if not outputs:
        raise ApiError(400, f"step {step.index} {why}, but the request carries no screenshot", code="no_screenshot")
    shot = outputs[-1].get("output")
    url = shot.get("image_url") if isinstance(shot, dict) else None
    if not isinstance(url, str):
        raise ApiError(400, f"step {step.index} {why}, but the last screenshot has no image_url", code="no_screenshot")
    try:
        return decode_screenshot(url)
    except ValueError as exc:
        raise ApiError(400, f"step {step.index} {why}, but {exc}", code="bad_screenshot") from None


def aim(step: Step, items: list[dict[str, Any]]) -> list[Any]:
    """The step's actions with every colour target replaced by x/y on the last screenshot."""
    actions = copy.deepcopy(step.actions or [])
    image = _screenshot(step, items, "expects a screenshot") if step.expect_screenshot else None

    def resolve(holder: dict[str, Any]) -> None:
        nonlocal image
        colour = holder.pop("target")["color"]
        if image is None:
            image = _screenshot(step, items, f"aims at colour {colour}")
        point = find_colour(image, parse_colour(colour) or (0, 0, 0))
        if point is None:
            message = f"step {step.index}: colour {colour} is not on the {image.width}x{image.height} screenshot"
            raise ApiError(400, message, code="target_not_found")
        holder["x"], holder["y"] = point

    for action in actions:
        if isinstance(action, dict) and "target" in action:
            resolve(action)
        if isinstance(action, dict) and action.get("type") == "drag" and isinstance(action.get("path"), list):
            for point in action["path"]:
                if isinstance(point, dict) and "target" in point:
                    resolve(point)
    return actions


def answered_call(items: list[dict[str, Any]]) -> object:
    """The call id of the request's last computer call output (None without one)."""
    outputs = [item for item in items if item.get("type") == "computer_call_output"]
    return outputs[-1].get("call_id") if outputs else None


def waiting(step: Step, items: list[dict[str, Any]]) -> bool:
    """True while ``step`` waits (its ``until`` colour is not on the request's last screenshot)."""
    if step.until is None:
        return False
    colour = step.until[0]
    image = _screenshot(step, items, f"waits for colour {colour}")
    return find_colour(image, parse_colour(colour) or (0, 0, 0)) is None


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def message_item(text: str, phase: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": new_id("msg"),
        "role": "assistant",
        "status": "completed",
        "phase": phase,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def computer_call(step: Step, actions: list[Any]) -> dict[str, Any]:
    checks = [
        {"id": check.get("id") or new_id("cu_sc"), "code": check["code"], "message": check["message"]}
        for check in step.safety_checks
    ]
    return {
        "type": "computer_call",
        "id": new_id("cu"),
        "call_id": new_id("call"),
        "status": "completed",
        "actions": actions,
        "pending_safety_checks": checks,
    }


