"""OpenAI's computer tool, through the SDK's ``AsyncComputerToolset``: one API adapter of the checkpoint.

The toolset is the only code that dispatches this tool's actions (it is used as it is, never
forked). This module only translates between it and the task's
:class:`~cud.daemon.tasks.checkpoint.Checkpoint`, in the order the checkpoint's docstring gives:

* ``responses.create`` (wrapped by :class:`cud.daemon.model.client.ModelRequests`, which shapes
  what is sent, times and meters it) -> ``before_request``, ``model_started``,
  ``model_answered``, ``model_retried``;
* ``approve_safety_checks`` -> ``approve_batch``;
* ``before_action`` -> ``admit``;
* the driver's calls (:class:`~cud.daemon.tasks.recording.RecordingDriver`) -> ``action_done``, ``screenshot_taken``;
* ``on_diagnostic`` -> ``diagnostic``;
* ``cancelled`` -> the run's :meth:`~cud.daemon.tasks.runner.TaskRun.is_cancelled`.

The SDK's and the API's own errors become the task's error in :func:`error_of`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI
from openai.lib.computer import AsyncComputerToolset, ComputerUseError

from cud.daemon.model.client import ModelRequests, Sent
from cud.daemon.store.trajectory import tokens_of
from cud.daemon.tasks.recording import RecordingDriver, plain
from cud.errors import ComputerUseFailed, ModelApiError

if TYPE_CHECKING:
    from cud.daemon.model.table import ModelEntry
    from cud.daemon.tasks.checkpoint import Checkpoint
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("API_ERRORS", "error_of", "run_model")

#: Diagnostics of the SDK's loop that every task has: not worth an event.
_ROUTINE = ("completed", "started")
#: What this API raises that ends a task with an error of its own (:func:`error_of`).
API_ERRORS = (ComputerUseError, openai.APIError)


async def run_model(run: TaskRun, checkpoint: Checkpoint, client: AsyncOpenAI, entry: ModelEntry) -> str:
    """One run of the SDK's loop for ``run``'s task: its final answer, or the error that ended it."""
    seat, task = run.seat, run.task
    toolset = AsyncComputerToolset(RecordingDriver(seat.driver, checkpoint))  # type: ignore[arg-type]  # its action methods are set at run time
    # The [request] table holds none of these keys (the config refuses them); copied per
    # task so nothing the SDK does to a request can reach the next one.
    params: Any = {
        **copy.deepcopy(dict(seat.config.request)),
        "model": entry.model,  # the provider's id: the task's model itself unless its [models] entry names one
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
