"""Anthropic's computer-use tool, through the Messages API: one API adapter of the checkpoint.

The loop Anthropic's docs describe: send the conversation with the ``computer`` tool (its
version and ``anthropic-beta`` flag from the task's ``[models]`` entry, the screen at the size the
model sees, :class:`~cud.model_api.scaling.ScreenScale`); run each ``tool_use`` block's action;
answer each with a ``tool_result`` (the last of a turn, and any screenshot or zoom, with the
screen); until the model answers with no ``tool_use``: its text is the final message.

Each tool call becomes the protocol's actions (:mod:`.anthropic_actions`, which checks every
coordinate in the model's space first) and passes the checkpoint in the order its docstring
gives: the request -> ``before_request``, ``model_started``, ``model_answered`` (the SDK's retries
-> ``model_retried``); each action -> ``admit``, the driver, ``action_done``; the screenshot ->
``admit``, ``screenshot_taken``; a turn that stopped for another reason than a tool call or its end
(``max_tokens``, ``refusal``) -> ``diagnostic``. The API sends no safety checks, so ``approve_batch`` is never
called (the daemon refuses approval ``safety`` for these tasks at submit).

Long tasks do not resend every screenshot: only the newest ``history.keep_screenshots`` images are
sent, older ones replaced by a line of text, dropped in chunks so the cached prefix (``cache_control``
on the last user turn, as the prompt-caching docs show) stays the same between chunks
(:mod:`.anthropic_history`, which holds the conversation as the list sent, O(1) per step). A
screenshot that needs no scaling is sent as the driver's base64 text, never decoded.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anthropic

from cud.daemon.model.client import Sent, metering
from cud.daemon.tasks.anthropic_actions import Pointer, translate
from cud.daemon.tasks.anthropic_history import History
from cud.daemon.tasks.checkpoint import Cancelled, Checkpoint
from cud.daemon.tasks.recording import RecordingDriver
from cud.drivers.png import split_data_url
from cud.errors import ComputerUseFailed, ModelApiError
from cud.model_api.scaling import ScreenScale, crop_fit, png_base64

if TYPE_CHECKING:
    from cud.daemon.model.table import ModelEntry
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("API_ERRORS", "error_of", "run_model")

#: The longest answer asked for per request (the Messages API needs a bound).
MAX_TOKENS = 4096
#: The stop reasons of every ordinary turn: not worth an event.
_ROUTINE = ("tool_use", "end_turn")


#: What this API raises that ends a task with an error of its own (:func:`error_of`).
API_ERRORS = (Cancelled, anthropic.APIError)


async def run_model(run: TaskRun, checkpoint: Checkpoint, client: anthropic.AsyncAnthropic, entry: ModelEntry) -> str:
    """One run of the Messages loop for ``run``'s task: its final message, or the error that ended it."""
    seat, task = run.seat, run.task
    width, height = await seat.driver.call("probe")
    scale = ScreenScale.fit(width, height)
    loop = _Loop(run, checkpoint, scale, entry)
    tool = {"type": entry.tool, "name": "computer", "display_width_px": scale.model_width,
            "display_height_px": scale.model_height}
    if entry.tool == "computer_20251124":
        tool["enable_zoom"] = True
    history = History(task["prompt"], seat.config.history.keep_screenshots)
    max_retries = seat.config.max_retries
    for _ in range(task["max_steps"]):
        await checkpoint.before_request()
        send = history.shaped()
        sent = Sent(images=history.images, image_bytes=history.image_bytes,
                    on_retry=lambda status, attempt: checkpoint.model_retried(status, attempt, attempt <= max_retries))
        checkpoint.model_started()
        started, response = time.monotonic(), None
        try:
            with metering(sent):
                response = await client.beta.messages.create(
                    model=entry.model, max_tokens=MAX_TOKENS, tools=[tool], messages=send,  # type: ignore[arg-type, list-item]
                    betas=[entry.beta])
        finally:
            texts = None if response is None else [b.text for b in response.content if b.type == "text"]
            checkpoint.model_answered((time.monotonic() - started) * 1000, sent,
                                      None if response is None else _tokens(response.usage), texts)
        assert response is not None
        if response.stop_reason not in _ROUTINE:  # cut short (max_tokens), a refusal, a pause: worth an event
            checkpoint.diagnostic({"reason": response.stop_reason, "api": "anthropic", "message_id": response.id})
        content = [block.model_dump(exclude_none=True) for block in response.content]
        history.add_assistant(content)
        calls = [block for block in content if block["type"] == "tool_use"]
        if not calls:
            return "\n".join(texts or [])
        history.add_results(await loop.answer(calls))
    raise ComputerUseFailed(f"the model did not finish within the task's max_steps ({task['max_steps']} requests)",
                            max_steps=task["max_steps"])


class _Loop:
    """One task's tool calls: translated, admitted, run, answered."""

    def __init__(self, run: TaskRun, checkpoint: Checkpoint, scale: ScreenScale, entry: ModelEntry) -> None:
        self._run, self._checkpoint, self._scale, self._tool = run, checkpoint, scale, entry.tool
        self._driver = RecordingDriver(run.seat.driver, checkpoint)
        self._pointer = Pointer()

    async def answer(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run a turn's tool calls in order; their tool results (the last one with the screen)."""
        results = []
        for index, call in enumerate(calls):
            if call.get("name") != "computer":
                raise ComputerUseFailed(f"the model called an unknown tool {call.get('name')!r}: {call.get('input')!r}",
                                        tool=repr(call.get("name")))
            done = translate(call.get("input"), self._scale, self._pointer, self._tool)
            for action in done.actions:
                await self._checkpoint.admit_or_cancel(action)
                await self._driver.act(action, self._run.is_cancelled)
            content: list[dict[str, Any]] = [{"type": "text", "text": done.text}] if done.text else []
            if done.screenshot or done.region is not None or index == len(calls) - 1:
                content.append(await self._image(done.region))
            results.append({"type": "tool_result", "tool_use_id": call["id"], "content": content or "done"})
        return results

    async def _image(self, region: tuple[int, int, int, int] | None) -> dict[str, Any]:
        await self._checkpoint.admit_or_cancel({"type": "screenshot"})
        shot = await self._driver.screenshot(self._run.is_cancelled)
        _, text = split_data_url(shot["image_url"])
        if region is not None or self._scale.scaled:
            png = base64.b64decode(text)
            text = png_base64(self._scale.image(png) if region is None else crop_fit(png, region))
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": text}}


def _tokens(usage: Any) -> dict[str, int]:
    """The Messages API's usage as the task counts it: ``input_tokens`` there excludes the cached part
    and what was written to the cache, which the task's input includes."""
    read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    return {"input_tokens": int(usage.input_tokens or 0) + read + written, "cached_tokens": read,
            "output_tokens": int(usage.output_tokens or 0)}


def error_of(exc: BaseException, cancelled: bool, redact: Callable[[str], str]) -> dict[str, Any] | None:
    """The task's error for one of :data:`API_ERRORS` (None: a loop cut short by the task's cancel)."""
    if isinstance(exc, Cancelled):
        return None
    assert isinstance(exc, anthropic.APIError)
    status = getattr(exc, "status_code", None)
    return ModelApiError(redact(str(exc)), **({"status": status} if status is not None else {})).to_dict()
