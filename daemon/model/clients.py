"""The daemon's model clients: one per API endpoint, shared by every seat, picked per task by its model.

A task's ``model`` names an entry of ``[models]`` (:mod:`cud.daemon.model.table`) or none: then the
Responses API drives it with the daemon's own client, as before the table existed. The adapter that
runs the entry's API is :func:`cud.daemon.tasks.adapters.adapter_for`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from cud.daemon.model.client import make_client
from cud.daemon.model.table import ModelEntry
from cud.errors import ConfigError

__all__ = ("CHAT_PLACEHOLDER_KEY", "ModelClients", "ModelUse")

#: The key a ``chat`` entry without ``api_key_env`` sends: the SDK needs one, and a vLLM server started
#: without ``--api-key`` accepts any (its docs' examples send this word).
CHAT_PLACEHOLDER_KEY = "EMPTY"


@dataclasses.dataclass(frozen=True)
class ModelUse:
    """What a task's model is driven with: its entry (the provider's id, the API) and that API's client."""

    entry: ModelEntry
    client: Any


class ModelClients:
    """``responses``: the daemon's client, or the entry's own for an entry with a base_url or key of its own.
    ``anthropic``: an ``anthropic.AsyncAnthropic`` per entry (the ``cud[anthropic]`` extra).
    ``chat``: an ``openai.AsyncOpenAI`` per entry, at its base_url, metered as the daemon's is."""

    def __init__(self, default: Any, models: Mapping[str, ModelEntry], keys: Mapping[str, str],
                 max_retries: int) -> None:
        self._default = default
        self._models = models
        #: Every key the clients hold: a task's error or event text never shows one.
        self.secrets = tuple(keys.values())
        self._clients: dict[str, Any] = {}
        for name, entry in models.items():
            key = keys.get(name)
            if entry.api == "anthropic":
                assert key is not None  # resolve_model_keys gave every anthropic entry its key
                self._clients[name] = _anthropic_client(name, key, entry.base_url, max_retries)
            elif entry.api == "chat":
                # Never the daemon's client or key: an open model's server is another party.
                self._clients[name] = make_client(key or CHAT_PLACEHOLDER_KEY, entry.base_url, max_retries)
            elif key is not None or entry.base_url is not None:
                self._clients[name] = make_client(key or default.api_key, entry.base_url or str(default.base_url),
                                                  max_retries)
            else:
                self._clients[name] = default

    async def close(self) -> None:
        """Close the entries' own clients (the daemon's client is the daemon's to close)."""
        for client in {id(c): c for c in self._clients.values() if c is not self._default}.values():
            await client.close()

    def for_model(self, name: str) -> ModelUse:
        entry = self._models.get(name)
        if entry is None:  # a model no entry names: the Responses API, as before the table
            return ModelUse(ModelEntry(name=name, model=name), self._default)
        return ModelUse(entry, self._clients[name])


def _anthropic_client(name: str, key: str, base_url: str | None, max_retries: int) -> Any:
    try:
        from cud.daemon.model.anthropic_client import make_anthropic_client
    except ImportError as exc:
        raise ConfigError(f"model {name!r} has api \"anthropic\", which needs the anthropic package: install "
                          f"cud[anthropic] ({exc})", key=f"models.{name}.api") from None
    return make_anthropic_client(key, base_url, max_retries)
