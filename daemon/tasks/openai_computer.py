"""OpenAI's computer tool, through the SDK's ``AsyncComputerToolset``: one API adapter of the checkpoint.

The toolset is the only code that dispatches this tool's actions (it is used as it is, never
forked). This module only translates between it and the task's
:class:`~cud.daemon.tasks.checkpoint.Checkpoint`, in the order the checkpoint's docstring gives:

* ``responses.create`` (wrapped by :class:`cud.daemon.model.client.ModelRequests`, which shapes
  what is sent, times and meters it) -> ``before_request``, ``model_started``,
  ``model_answered``, ``model_retried``;
* ``approve_safety_checks`` -> ``approve_batch``;
* ``before_action`` -> ``admit``;
* the driver's calls (:class:`RecordingDriver`) -> ``action_done``, ``screenshot_taken``;
* ``on_diagnostic`` -> ``diagnostic``;
* ``cancelled`` -> the run's :meth:`~cud.daemon.tasks.runner.TaskRun.is_cancelled`.

The SDK's and the API's own errors become the task's error in :func:`error_of`.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI
from openai.lib.computer import AsyncComputerToolset, ComputerUseError

from cud.daemon.model.client import ModelRequests, Sent
from cud.daemon.store.trajectory import ms_since, tokens_of
from cud.errors import ComputerUseFailed, ModelApiError
from cud.protocol import HUMAN_ACTIONS

if TYPE_CHECKING:
    from cud.daemon.tasks.checkpoint import Checkpoint
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("API_ERRORS", "RecordingDriver", "error_of", "run_model")

_ACTIONS = (*HUMAN_ACTIONS, "wait")  # the model's actions: a person's, and waiting
#: Diagnostics of the SDK's loop that every task has: not worth an event.
_ROUTINE = ("completed", "started")
#: What this API raises that ends a task with an error of its own (:func:`error_of`).
API_ERRORS = (ComputerUseError, openai.APIError)


async def run_model(run: TaskRun, checkpoint: Checkpoint, client: AsyncOpenAI) -> str:
    """One run of the SDK's loop for ``run``'s task: its final answer, or the error that ended it."""
    seat, task = run.seat, run.task
    toolset = AsyncComputerToolset(RecordingDriver(seat.driver, checkpoint))  # type: ignore[arg-type]  # its action methods are set at run time
    # The [request] table holds none of these keys (the config refuses them); copied per
    # task so nothing the SDK does to a request can reach the next one.
    params: Any = {
        **copy.deepcopy(dict(seat.config.request)),
        "model": task["model"],
        "input": task["prompt"],
        "tools": [{"type": "computer"}],
    }

    def answered(model_ms: float, response: Any, sent: Sent) -> None:
        usage = getattr(response, "usage", None)
        messages = None if response is None else [
            part.text
            for item in response.output
            if item.type == "message"
            for part in item.content
            if part.type == "output_text"
        ]
        checkpoint.model_answered(model_ms, sent, None if usage is None else tokens_of(usage), messages)

    async def approve_safety_checks(call: Any) -> bool:
        actions = [plain(a) for a in (call.actions if call.actions is not None else [call.action])]
        checks = [{"id": c.id, "code": c.code, "message": c.message} for c in call.pending_safety_checks or []]
        return await checkpoint.approve_batch(actions, checks)

    async def before_action(action: Any) -> bool:
        return await checkpoint.admit(plain(action))

    def on_diagnostic(diagnostic: Any) -> None:
        if diagnostic.get("reason") not in _ROUTINE:
            checkpoint.diagnostic(dict(diagnostic))

    requests = ModelRequests(seat.config.history, seat.config.max_retries, on_start=checkpoint.model_started,
                             on_end=answered, on_retry=checkpoint.model_retried, before=checkpoint.before_request)
    try:
        response = await toolset.run(
            requests.wrap(client),
            params,
            max_steps=task["max_steps"],
            approve_safety_checks=approve_safety_checks,
            before_action=before_action,
            cancelled=run.is_cancelled,
            on_diagnostic=on_diagnostic,
        )
    finally:
        toolset.close()
    return response.output_text


def error_of(exc: BaseException, cancelled: bool, redact: Callable[[str], str]) -> dict[str, Any] | None:
    """The task's error for one of :data:`API_ERRORS` (None: a loop cut short by the task's cancel)."""
    if isinstance(exc, ComputerUseError):
        if cancelled:
            return None
        return ComputerUseFailed(redact(str(exc))).to_dict()
    assert isinstance(exc, openai.APIError)
    return ModelApiError(redact(str(exc)), **_api_details(exc)).to_dict()


def _api_details(exc: openai.APIError) -> dict[str, Any]:
    status = getattr(exc, "status_code", None)
    return {"status": status} if status is not None else {}


def plain(action: Any) -> dict[str, Any]:
    """The SDK's action as the protocol writes it (a plain dict)."""
    if hasattr(action, "to_dict"):
        return dict(action.to_dict())
    return dict(action) if isinstance(action, dict) else {"value": repr(action)}


class RecordingDriver:
    """The AsyncComputerDriver the SDK sees: the seat's real driver, each call timed and reported."""

    def __init__(self, driver: Any, checkpoint: Checkpoint) -> None:
        self._driver = driver
        self._checkpoint = checkpoint
        self._takes_cancelled = {
            name: "cancelled" in inspect.signature(getattr(driver, name)).parameters
            for name in (*_ACTIONS, "screenshot")
        }
        for name in _ACTIONS:
            setattr(self, name, self._action_method(name))

    def _action_method(self, name: str) -> Callable[..., Awaitable[None]]:
        async def method(action: Any, cancelled: Callable[[], bool] | None = None) -> None:
            started = time.monotonic()
            try:
                await self._invoke(name, action, cancelled=cancelled)
            finally:
                self._checkpoint.action_done(plain(action), ms_since(started))

        method.__name__ = name
        return method

    async def _invoke(self, name: str, *args: Any, cancelled: Callable[[], bool] | None) -> Any:
        fn = getattr(self._driver, name)
        if self._takes_cancelled[name]:
            return await fn(*args, cancelled=cancelled)
        return await fn(*args)

    async def screenshot(self, cancelled: Callable[[], bool] | None = None) -> Any:
        started = time.monotonic()
        shot = await self._invoke("screenshot", cancelled=cancelled)
        await self._checkpoint.screenshot_taken(shot, ms_since(started))
        return shot
