"""The daemon's model clients: one per API endpoint, shared by every seat, picked per task by its model.

A task's ``model`` names an entry of ``[models]`` (:mod:`cud.daemon.model.table`) or none: then the
Responses API drives it with the daemon's own client, as before the table existed. The adapter that
runs the entry's API is :func:`cud.daemon.tasks.adapters.adapter_for`'s.

The daemon's own key (OPENAI_API_KEY, ``api_key_file``, ``api_key_credential``) is needed only by the
models that use it: a daemon whose tasks all use entries with keys of their own starts without it,
and a task whose model needs it is refused at submit (:meth:`ModelClients.check`).
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

    def __init__(self, default: Any | None, base_url: str | None, models: Mapping[str, ModelEntry],
                 keys: Mapping[str, str], max_retries: int) -> None:
        """``default``: the daemon's client, None when the daemon has no key of its own; ``base_url``: the
        daemon's (config key ``base_url``), for an entry with a key but no base_url of its own."""
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
            elif key is not None:
                self._clients[name] = make_client(key, entry.base_url or base_url, max_retries)
            elif default is not None and entry.base_url is not None:
                self._clients[name] = make_client(default.api_key, entry.base_url, max_retries)
            elif default is not None:
                self._clients[name] = default
            # else: an entry that needs the daemon's key, which it has not: check() refuses its tasks

    async def close(self) -> None:
        """Close the entries' own clients (the daemon's client is the daemon's to close)."""
        for client in {id(c): c for c in self._clients.values() if c is not self._default}.values():
            await client.close()

    def check(self, name: str) -> None:
        """ConfigError if model ``name`` needs the daemon's own key and the daemon started without one."""
        if name in self._clients or (name not in self._models and self._default is not None):
            return
        if name in self._models:
            what = "has a [models] entry of api \"responses\" without api_key_env"
            other = f"give the entry a key of its own (config key 'models.{name}.api_key_env')"
        else:
            what, other = "names no [models] entry", "submit with a model of a [models] entry that has its own key"
        raise ConfigError(
            f"model {name!r} {what}, so it uses the daemon's OpenAI API key, and the daemon has none: it reads "
            "it from the environment variable OPENAI_API_KEY, or the file of config key 'api_key_file', or "
            f"the systemd credential of config key 'api_key_credential'. Set one and restart the daemon, or {other}",
            key="api_key_file", model=name)

    def for_model(self, name: str) -> ModelUse:
        """The entry and client of model ``name``; ConfigError (:meth:`check`) if it has no client."""
        self.check(name)
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
