"""The scripted model over Anthropic's Messages API: ``POST /v1/messages`` with the computer tool.

The same scenarios as the Responses server (:mod:`cud.scripted.scenario`) play here: a step's
actions, written as the protocol writes them, become ``tool_use`` blocks of Anthropic's computer
tool (:func:`to_computer_calls`); an action written as Anthropic writes it (it has an ``"action"``
key) is sent verbatim, so a scenario can send the tool's own actions (``triple_click``, ``zoom``,
``left_mouse_down`` ...) and malformed or unknown ones. Colour targets aim at the last image of the
request, in the pixels the model sees (the scaled screen). A run's turn is the number of assistant
messages in the request.

The checks the real API makes that a broken client could fail: a key (``x-api-key``, or the bearer
header newer clients send); a model; exactly one
computer tool with its display size; every ``tool_use`` answered by a ``tool_result`` in the next
user turn. And one the real API does not make, because it would quietly scale the image and the
model's coordinates would then miss: an image past the API's size limits
(:mod:`cud.model_api.scaling`) is refused.
"""

from __future__ import annotations

import base64
import copy
import io
import logging
import math
from typing import Any

from PIL import Image

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.model_api.scaling import MAX_LONG_EDGE, MAX_PIXELS
from cud.scripted.answer import ApiError, aim, attempt_number, new_id, not_chat_only, pick
from cud.scripted.server import ScriptedModel

__all__ = ["ScriptedMessages", "to_computer_calls"]

log = logging.getLogger("cud.scripted")

_CLICKS = {"left": "left_click", "right": "right_click", "wheel": "middle_click"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                429: "rate_limit_error", 529: "overloaded_error"}


class ScriptedMessages(ScriptedModel):
    """Serve a scenario as Anthropic's Messages API on 127.0.0.1; ``start()`` returns the base URL for
    ``anthropic.AsyncAnthropic(base_url=...)``. ``requests`` lists the decoded bodies received."""

    PATH = "/v1/messages"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answer(self, raw: bytes, headers: Any) -> dict[str, Any]:
        try:
            return self._message(raw, headers)
        except ApiError as exc:
            if "type" not in exc.body:  # Anthropic's error shape, unless the scenario wrote its own body
                kind = _ERROR_TYPES.get(exc.status, "api_error")
                message = exc.body.get("error", {}).get("message", str(exc))
                exc.body = {"type": "error", "error": {"type": kind, "message": message}}
            raise

    def _message(self, raw: bytes, headers: Any) -> dict[str, Any]:
        body = self._received(raw, headers, x_api_key=True)
        messages = _validate(body)
        images = _images(messages)
        with self._lock:
            self._images.append((len(images), sum(len(i) for i in images)))
        turn_number = sum(1 for m in messages if m.get("role") == "assistant")
        scenario = self.scenario_for(body["model"])
        if turn_number >= len(scenario.turns):
            raise ApiError(400, f"scenario {scenario.name!r} has {len(scenario.turns)} turns; turn {turn_number} "
                                "is past its end")
        turn = scenario.turns[turn_number]
        step = pick(turn.transient, turn.step, attempt_number(headers.get("x-stainless-retry-count")))
        log.info("messages turn %d: step %d (%s)", turn_number, step.index, step.kind)
        not_chat_only(step)
        self._stopping.wait(step.delay)
        if step.kind == "error":
            assert step.http_error is not None
            raise ApiError(step.http_error, f"scripted HTTP {step.http_error} at step {step.index}",
                           body=step.body, headers=step.headers)
        content: list[dict[str, Any]] = []
        if step.message is not None:
            content.append({"type": "text", "text": step.message})
        if step.kind == "call":
            shot = [{"type": "computer_call_output", "output": {"image_url": f"data:image/png;base64,{images[-1]}"}}
                    ] if images else []
            for call in to_computer_calls(aim(step, shot)):
                content.append({"type": "tool_use", "id": new_id("toolu"), "name": "computer", "input": call})
        tokens_in = max(1, len(raw) // 4)
        return {
            "id": new_id("msg"), "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": "tool_use" if step.kind == "call" else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": 20 * max(1, len(content)),
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        }


def _validate(body: object) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise ApiError(400, "model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise ApiError(400, "max_tokens: Field required")
    tools = body.get("tools")
    if not (isinstance(tools, list) and len(tools) == 1 and isinstance(tools[0], dict)
            and str(tools[0].get("type", "")).startswith("computer_") and tools[0].get("name") == "computer"
            and isinstance(tools[0].get("display_width_px"), int)
            and isinstance(tools[0].get("display_height_px"), int)):
        raise ApiError(400, f"tools must be exactly one computer tool with its display size, got {tools!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "messages: a non-empty list of messages is required")
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        uses = {b.get("id") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"}
        following = messages[index + 1] if index + 1 < len(messages) else {}
        answered = {b.get("tool_use_id") for b in following.get("content") or []
                    if isinstance(b, dict) and b.get("type") == "tool_result"}
        if uses - answered:
            raise ApiError(400, f"messages.{index + 1}: tool_use ids were found without tool_result blocks "
                                f"immediately after: {sorted(str(u) for u in uses - answered)}")
    return messages


def _images(messages: list[dict[str, Any]]) -> list[str]:
    """The base64 data of every image the request carries, in order; an image past the limits is refused."""
    found = []
    for message in messages:
        for block in message.get("content") or []:
            inner = block.get("content") if isinstance(block, dict) and block.get("type") == "tool_result" else [block]
            for part in inner if isinstance(inner, list) else []:
                if isinstance(part, dict) and part.get("type") == "image":
                    data = part.get("source", {}).get("data", "")
                    _check_size(data)
                    found.append(data)
    return found


def _check_size(data: str) -> None:
    try:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            width, height = image.size
    except Exception as exc:  # Pillow raises many kinds for corrupt input
        raise ApiError(400, f"an image could not be decoded: {exc}") from None
    if max(width, height) > MAX_LONG_EDGE or width * height > MAX_PIXELS:
        raise ApiError(400, f"an image of {width}x{height} is past the API's {MAX_LONG_EDGE} px long edge or "
                            f"{MAX_PIXELS} pixels: the API would scale it and the model's coordinates would miss")


def to_computer_calls(actions: list[Any]) -> list[dict[str, Any]]:
    """The computer tool's calls for a scenario step's actions (protocol dicts; Anthropic's own verbatim)."""
    calls: list[dict[str, Any]] = []
    for action in copy.deepcopy(actions):
        if not isinstance(action, dict) or "action" in action:
            calls.append(action)
            continue
        calls.extend(_calls_of(action))
    return calls


def _calls_of(action: dict[str, Any]) -> list[dict[str, Any]]:
    kind = action.get("type")
    point = [action.get("x"), action.get("y")]
    held = {"text": "+".join(action["keys"])} if action.get("keys") else {}
    if kind == "click":
        return [{"action": _CLICKS.get(str(action.get("button")), f"{action.get('button')}_click"), "coordinate": point,
                 **held}]
    if kind == "double_click":
        return [{"action": "double_click", "coordinate": point, **held}]
    if kind == "move":
        return [{"action": "mouse_move", "coordinate": point}]
    if kind == "drag":
        path = [[p.get("x"), p.get("y")] for p in action.get("path") or []]
        if len(path) == 2:
            return [{"action": "left_click_drag", "start_coordinate": path[0], "coordinate": path[1]}]
        return [{"action": "left_mouse_down", "coordinate": path[0]},
                *({"action": "mouse_move", "coordinate": p} for p in path[1:-1]),
                {"action": "left_mouse_up", "coordinate": path[-1]}]
    if kind == "keypress":
        return [{"action": "key", "text": "+".join(action.get("keys") or [])}]
    if kind == "type":
        return [{"action": "type", "text": action.get("text")}]
    if kind == "scroll":
        dx, dy = int(action.get("scroll_x") or 0), int(action.get("scroll_y") or 0)
        direction = ("down" if dy > 0 else "up") if dy else ("right" if dx > 0 else "left")
        amount = max(1, math.floor(abs(dy or dx) / SCROLL_PIXELS_PER_NOTCH + 0.5))
        return [{"action": "scroll", "coordinate": point, "scroll_direction": direction, "scroll_amount": amount, **held}]
    if kind == "wait":
        return [{"action": "wait", "duration": 1}]
    if kind == "screenshot":
        return [{"action": "screenshot"}]
    return [{"action": str(kind), **{k: v for k, v in action.items() if k != "type"}}]
