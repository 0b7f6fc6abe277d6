"""The one place that picks a task's API adapter, by its model entry's ``api``.

Every adapter module exposes the same three names, which :class:`~cud.daemon.tasks.runner.TaskRun`
uses without knowing which API it drives:

* ``run_model(run, checkpoint, client, entry) -> str``: one run of the API's loop, its final message;
* ``API_ERRORS``: what the loop raises that ends the task with an error of the API's own;
* ``error_of(exc, cancelled, redact)``: that error as the task records it (None: a loop cut short
  by the task's cancel).

An adapter module is imported only when a task uses its API: ``anthropic`` needs an optional extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from cud.daemon.model.table import ModelEntry
    from cud.daemon.tasks.checkpoint import Checkpoint
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("ADAPTERS", "Adapter", "adapter_for")

#: The module that drives each API (cud.daemon.model.table.APIS names the same APIs).
ADAPTERS = {
    "responses": "cud.daemon.tasks.openai_computer",
    "anthropic": "cud.daemon.tasks.anthropic_computer",
    "chat": "cud.daemon.tasks.chat_computer",
}


class Adapter(Protocol):
    API_ERRORS: tuple[type[BaseException], ...]

    async def run_model(self, run: TaskRun, checkpoint: Checkpoint, client: Any, entry: ModelEntry) -> str: ...

    def error_of(self, exc: BaseException, cancelled: bool,
                 redact: Callable[[str], str]) -> dict[str, Any] | None: ...


def adapter_for(api: str) -> Adapter:
    """The adapter module of ``api`` (the config refused any other API at the daemon's start)."""
    return cast("Adapter", importlib.import_module(ADAPTERS[api]))
