"""The scripted model as an open model served OpenAI-style: ``POST /v1/chat/completions`` (vLLM's shape).

The same scenarios as the Responses server (:mod:`cud.scripted.scenario`) play here, each answer
written in one chat format's grammar (:mod:`cud.model_api.chat`, ``ScriptedChat(..., format=NAME)``):
a step's actions, as the protocol writes them, go through the format's ``render`` with its
``message`` as the model's thought; a final ``message`` is the format's way of saying it is done;
a ``call_user`` step its way of asking the user, a ``gave_up`` step its way of saying it failed
(a step the format cannot say is answered with HTTP 400 ``not_in_format``; ``screenshot`` actions
are left out, since every request carries the screen, and a step of nothing else is a ``wait``). A ``text`` step is
sent verbatim, for answers the format cannot parse, with its ``finish_reason`` (an answer cut
short: ``length``). Colour targets aim at the last image of the request, which the format sends in
its own coordinate space, so the point found is already in the model's space, as ``render`` wants it.

**Which turn a request asks for.** A format sends back only its last ``HISTORY`` turns, so counting
the assistant messages of a request stops working once a run is longer than that. The server
keeps, per run, how many turns it has answered: a run is named by the request's model and the
text of its system and user messages (the format's prompt and the task's instruction, the same in
every request of a run: the past turns a format sends back are screenshots and the model's
answers); a request with no assistant message starts that run over at turn 0. Two runs with the
same model and instruction at once on one server would share their count: give concurrent runs
their own scenario (``scripted:NAME``) or prompt.

Chat completions have no safety checks and no waiting steps: a step with ``safety_checks`` or
``until`` is refused (HTTP 400).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from cud.errors import ConfigError
from cud.model_api.chat import FORMATS, format_for
from cud.model_api.image_limits import image_stats, image_urls
from cud.scripted.answer import ApiError, aim, attempt_number, new_id, pick
from cud.scripted.chain import IMAGE_TOKENS
from cud.scripted.scenario import Scenario, Step
from cud.scripted.server import ScriptedModel

__all__ = ["ScriptedChat"]

log = logging.getLogger("cud.scripted")

#: The output tokens every answer counts (a priced test model then costs a round sum per turn).
ANSWER_TOKENS = 20


class ScriptedChat(ScriptedModel):
    """Serve a scenario as an OpenAI-compatible chat-completions server in ``format``'s grammar on
    127.0.0.1; ``start()`` returns the base URL (``.../v1``) for a ``[models]`` entry with ``api = "chat"``."""

    PATH = "/v1/chat/completions"

    def __init__(self, scenario: Scenario | dict[str, Any] | str, *, format: str = "ui-tars",
                 scenarios: Mapping[str, Scenario | dict[str, Any]] | None = None, latency: float = 0.0,
                 record: bool = True) -> None:
        super().__init__(scenario, scenarios=scenarios, latency=latency, record=record)
        if format not in FORMATS:
            raise ConfigError(f"no chat format {format!r}; the formats: {', '.join(FORMATS)}", format=format)
        self.format = format
        self._fmt = format_for(format)
        #: Turns answered so far, by run (see the module's docstring).
        self._runs: dict[tuple[str, str], int] = {}
        self._runs_lock = threading.Lock()

    def _answer(self, raw: bytes, headers: Any) -> dict[str, Any]:
        # vLLM without --api-key takes any key, but the openai SDK always sends one: a request without one did
        # not come through it.
        body = self._received(raw, headers)
        messages = _validate(body)
        images, image_data = image_stats(messages)
        with self._lock:
            self._images.append((images, image_data))
        run = (body["model"], _run_text(messages))
        scenario = self.scenario_for(body["model"])
        with self._runs_lock:
            if not any(m.get("role") == "assistant" for m in messages):
                self._runs[run] = 0
            turn_number = self._runs.get(run)
        if turn_number is None:
            raise ApiError(400, "this request continues a run the scripted server never started (its first "
                                "request had no assistant message)", code="unknown_run")
        if turn_number >= len(scenario.turns):
            raise ApiError(400, f"scenario {scenario.name!r} has {len(scenario.turns)} turns; turn {turn_number} "
                                "is past its end", code="scenario_exhausted")
        turn = scenario.turns[turn_number]
        step = pick(turn.transient, turn.step, attempt_number(headers.get("x-stainless-retry-count")))
        log.info("chat turn %d: step %d (%s)", turn_number, step.index, step.kind)
        self._stopping.wait(step.delay)
        if step.kind == "error":
            assert step.http_error is not None
            raise ApiError(step.http_error, f"scripted HTTP {step.http_error} at step {step.index}",
                           body=step.body, headers=step.headers)
        text = self._text(step, list(image_urls(messages)))
        with self._runs_lock:
            self._runs[run] = turn_number + 1
        tokens_in = max(1, (len(raw) - image_data * 4 // 3) // 4) + IMAGE_TOKENS * images
        return {
            "id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": step.finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": ANSWER_TOKENS,
                      "total_tokens": tokens_in + ANSWER_TOKENS},
        }

    def _text(self, step: Step, urls: list[str]) -> str:
        """The step as the model writes it, in the server's format (a ``text`` step verbatim)."""
        if step.kind == "text":
            assert step.text is not None
            return step.text
        if step.safety_checks or step.until is not None:
            raise ApiError(400, f"step {step.index}: chat completions have no safety checks or waiting steps")
        try:
            if step.kind == "call_user":
                return self._fmt.render([], call_user=step.text)
            if step.kind in ("final", "gave_up"):
                # The words as the thought too: a format whose model says its last words as its thought
                # (Qwen) wants them there.
                words = step.message if step.kind == "final" else step.text
                return self._fmt.render([], thought=words or "", final=words, gave_up=step.kind == "gave_up")
            # aim() reads the screen from a computer call's output: the request's last image, dressed as one.
            shot = [{"type": "computer_call_output", "output": {"image_url": urls[-1]}}] if urls else []
            # Every request carries the screen, so a look is no call of these grammars: a step that only
            # looks (a scenario written for the computer tools) waits a step instead.
            actions = [a for a in aim(step, shot) if not (isinstance(a, dict) and a.get("type") == "screenshot")]
            return self._fmt.render(actions or [{"type": "wait"}], thought=step.message or "")
        except (ValueError, KeyError) as exc:  # what the format's grammar cannot say: the scenario's mistake
            raise ApiError(400, f"step {step.index}: format {self.format!r} cannot say it: {exc}",
                           code="not_in_format") from None


def _validate(body: object) -> list[dict[str, Any]]:
    """The checks an OpenAI-compatible server makes that a broken client could fail: the messages."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise ApiError(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    if body.get("stream"):
        raise ApiError(400, "The scripted model answers only non-streaming requests.", param="stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") for m in messages):
        raise ApiError(400, "messages must be a non-empty list of system, user and assistant messages.",
                       param="messages")
    if messages[-1].get("role") != "user":
        raise ApiError(400, "the last message must be the user's (the screen to answer).", param="messages")
    return messages


def _run_text(messages: list[dict[str, Any]]) -> str:
    """The text of the system and user messages: the same in every request of a run."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant":
            continue
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "\n".join(texts)
