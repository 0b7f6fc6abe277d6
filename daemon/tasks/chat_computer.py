"""Open models served OpenAI-style (vLLM's chat completions): one API adapter of the checkpoint.

These models have no computer tool: each answers in its own text grammar, which its *format*
(:mod:`cud.model_api.chat`, named by the entry's ``format``) writes prompts for and parses. One
step of the loop: the screen -> ``format.image`` (in the format's coordinate space) ->
``format.request`` (the task's prompt, the last ``format.HISTORY`` turns, the screen) ->
``chat.completions.create`` -> ``format.parse`` -> a :class:`~cud.model_api.chat.Reply`.

The reply passes the checkpoint in the order its docstring gives: the request ->
``before_request``, ``model_started``, ``model_answered`` (the SDK's retries -> ``model_retried``);
each action -> ``admit``, the driver, ``action_done``; the screenshot -> ``admit``,
``screenshot_taken``; a completion cut short (``finish_reason`` ``length`` or ``content_filter``)
-> ``diagnostic``. A model that asks the user (``call_user``) asks a person through
``approve_batch``, as a batch the API flags does: the approval's one check carries the model's
question; approved, the loop goes on; denied or timed out, the task ends as any denial ends it.
Approval ``safety`` would never ask about the actions themselves (these APIs flag none), so the
daemon refuses it at submit for these tasks, as for Anthropic's.

An answer the format cannot parse ends the task with its ``computer_use`` error quoting the
answer, before any of its actions runs: a guessed action is worse than none. An answer that ends
the task saying it failed (``gave_up``: OpenCUA's and Qwen's ``terminate`` with status failure)
fails the task with the model's words. Where the model acts where the pointer is (an action with
no point), the loop puts in the native point it last sent the pointer to.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI

from cud.daemon.model.client import Sent, metering
from cud.daemon.tasks import openai_computer
from cud.daemon.tasks.checkpoint import Cancelled, Checkpoint
from cud.daemon.tasks.recording import RecordingDriver
from cud.drivers.png import parse_data_url
from cud.errors import ComputerUseFailed
from cud.model_api.chat import Reply, Turn, format_for
from cud.model_api.image_limits import image_stats
from cud.protocol import AT_POINT_ACTIONS

if TYPE_CHECKING:
    from cud.daemon.model.table import ModelEntry
    from cud.daemon.tasks.runner import TaskRun
    from cud.model_api.chat import ChatFormat
    from cud.model_api.scaling import ScreenScale

__all__ = ("API_ERRORS", "error_of", "run_model")

#: Finish reasons of a completion that was cut short: its text may be half an action, worth an event.
_CUT_SHORT = ("length", "content_filter")
#: The approval check a model's question to the user becomes.
CALL_USER = "call_user"


#: What this API raises that ends a task with an error of its own (:func:`error_of`).
API_ERRORS = (Cancelled, openai.APIError)


async def run_model(run: TaskRun, checkpoint: Checkpoint, client: AsyncOpenAI, entry: ModelEntry) -> str:
    """One run of the chat loop for ``run``'s task: the model's final message, or the error that ended it."""
    assert entry.format is not None  # the config requires it for api = "chat"
    fmt = format_for(entry.format)
    task = run.task
    width, height = await run.seat.driver.call("probe")
    loop = _Loop(run, checkpoint, fmt, fmt.space(width, height))
    # A deque bounded by the format: a step's request (and its cost) does not grow with the run.
    past: collections.deque[Turn] = collections.deque(maxlen=fmt.HISTORY)
    for _ in range(task["max_steps"]):
        screen = await loop.screen()
        messages = fmt.request(task["prompt"], tuple(past), screen, loop.space)
        text = await loop.ask(client, entry.model, messages)
        reply = fmt.parse(text, loop.space)  # ComputerUseFailed quoting the text: nothing of it runs
        # Kept once parsed: what the format puts back must be an answer it understood.
        past.append(Turn(screenshot=screen, text=text))
        await loop.act(reply)
        if reply.gave_up:  # the model ended the task saying it failed: not a success with its words
            raise ComputerUseFailed(f"the model gave up on the task: {reply.final!r}", final=reply.final)
        if reply.final is not None:
            return reply.final
    raise ComputerUseFailed(f"the model did not finish within the task's max_steps ({task['max_steps']} requests)",
                            max_steps=task["max_steps"])


class _Loop:
    """One task's steps: the screen taken, the model asked, its reply admitted and run."""

    def __init__(self, run: TaskRun, checkpoint: Checkpoint, fmt: ChatFormat, space: ScreenScale) -> None:
        self._run, self._checkpoint, self._fmt, self.space = run, checkpoint, fmt, space
        self._driver = RecordingDriver(run.seat.driver, checkpoint)
        #: The native point the pointer was last sent to (None: not yet in this task).
        self._pointer: tuple[int, int] | None = None

    async def screen(self) -> bytes:
        """The screen as the format sends it (admitted first: a pause lands here)."""
        await self._checkpoint.admit_or_cancel({"type": "screenshot"})
        shot = await self._driver.screenshot(self._run.is_cancelled)
        _, png = parse_data_url(shot["image_url"])
        return self._fmt.image(png, self.space)

    async def ask(self, client: AsyncOpenAI, model: str, messages: list[dict[str, Any]]) -> str:
        """One completion, metered and recorded at the checkpoint: the model's text."""
        checkpoint = self._checkpoint
        await checkpoint.before_request()
        images, image_bytes = image_stats(messages)
        retries = self._run.seat.config.max_retries
        sent = Sent(images=images, image_bytes=image_bytes,
                    on_retry=lambda status, attempt: checkpoint.model_retried(status, attempt, attempt <= retries))
        checkpoint.model_started()
        started, response, text = time.monotonic(), None, None
        try:
            with metering(sent):
                response = await client.chat.completions.create(
                    model=model, messages=messages)  # type: ignore[arg-type]  # the format's dicts are the API's shape
            text = _text(response)
        finally:
            checkpoint.model_answered((time.monotonic() - started) * 1000, sent,
                                      None if response is None else _tokens(response.usage),
                                      None if text is None else [text])
        assert response is not None and text is not None
        reason = response.choices[0].finish_reason if response.choices else None
        if reason in _CUT_SHORT:
            checkpoint.diagnostic({"reason": reason, "api": "chat", "completion_id": response.id})
        return text

    async def act(self, reply: Reply) -> None:
        """Run the reply's actions in order, each admitted first; then put its question to a person."""
        # Every action placed before any runs: one that cannot be is refused with nothing of the reply run.
        placed, self._pointer = _placed(reply.actions, self._pointer)
        for action in placed:
            await self._checkpoint.admit_or_cancel(action)
            await self._driver.act(action, self._run.is_cancelled)
        if reply.call_user is not None:
            check = {"id": CALL_USER, "code": CALL_USER, "message": f"the model asks: {reply.call_user}"}
            if not await self._checkpoint.approve_batch([], [check]):
                raise Cancelled("the task was cancelled")


def _placed(actions: list[dict[str, Any]], pointer: tuple[int, int] | None,
            ) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """The actions with a point wherever the model acted where the pointer is (a click or scroll without
    x/y, a drag whose path is its end alone: see :class:`Reply`), and where the pointer is after them."""
    placed = []
    for action in actions:
        kind = action["type"]
        needs = kind == "drag" and len(action["path"]) == 1 or kind in AT_POINT_ACTIONS and "x" not in action
        if needs:
            if pointer is None:
                raise ComputerUseFailed(f"the model's {kind} acts where the pointer is, and the pointer has not "
                                        f"been sent anywhere in this task yet: {action!r}", action=kind)
            x, y = pointer
            action = ({**action, "path": [{"x": x, "y": y}, *action["path"]]} if kind == "drag"
                      else {**action, "x": x, "y": y})
        if kind == "drag":
            pointer = (action["path"][-1]["x"], action["path"][-1]["y"])
        elif "x" in action:
            pointer = (action["x"], action["y"])
        placed.append(action)
    return placed, pointer


def _text(response: Any) -> str:
    """The completion's text; ComputerUseFailed for an answer without one (nothing to parse)."""
    if not response.choices:
        raise ComputerUseFailed(f"the model's server answered with no choices (completion {response.id!r})")
    content = response.choices[0].message.content
    if not isinstance(content, str):
        raise ComputerUseFailed(f"the model answered with no text (completion {response.id!r}, finish_reason "
                                f"{response.choices[0].finish_reason!r})")
    return content


def _tokens(usage: Any) -> dict[str, int] | None:
    """Chat completions' usage as the task counts it (a server may send none: nothing counted)."""
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    return {"input_tokens": int(usage.prompt_tokens or 0),
            "cached_tokens": int(getattr(details, "cached_tokens", 0) or 0),
            "output_tokens": int(usage.completion_tokens or 0)}


def error_of(exc: BaseException, cancelled: bool, redact: Callable[[str], str]) -> dict[str, Any] | None:
    """The task's error for one of :data:`API_ERRORS` (None: a loop cut short by the task's cancel)."""
    if isinstance(exc, Cancelled):
        return None
    # The same SDK's errors as the Responses adapter's: the same error, with the HTTP status.
    return openai_computer.error_of(exc, cancelled, redact)
