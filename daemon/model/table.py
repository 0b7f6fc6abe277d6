"""``[models.NAME]``: which API drives a task's model, and where that API is.

::

    [models.claude]
    api = "anthropic"                  # "responses" (the default), "anthropic" or "chat"
    model = "claude-sonnet-4-5"        # the provider's model id; default: the entry's name
    base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"  # the environment variable holding the key
    tool = "computer_20250124"         # anthropic only: the computer tool's version (default: the model's)

    [models.uitars]
    api = "chat"                       # an open model served OpenAI-style (vLLM): chat completions
    model = "ByteDance-Seed/UI-TARS-1.5-7B"
    base_url = "http://127.0.0.1:8000/v1"  # required for chat
    format = "ui-tars"                 # chat only, required: its prompt and action grammar (cud.model_api.chat)

A task's ``model`` names an entry; a model no entry names is driven as before the table: the
Responses API with the daemon's own client, key and ``base_url``. Keys are read at the daemon's
start (:func:`resolve_model_keys`), never stored in the config. Prices stay in ``[budget.prices]``,
by the same name the task gives.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping

from cud.daemon.config_values import bad, string
from cud.daemon.config_values import table as checked_table
from cud.errors import ConfigError
from cud.model_api.chat import FORMATS

__all__ = ("APIS", "MODEL_KEYS", "TOOL_VERSIONS", "ModelEntry", "load_models", "resolve_model_keys")

#: The APIs the daemon drives models through.
APIS = ("responses", "anthropic", "chat")
MODEL_KEYS = frozenset({"api", "model", "base_url", "api_key_env", "tool", "format"})
#: The computer tool's versions (Anthropic's docs): the 2025-11-24 one adds ``zoom``.
TOOL_VERSIONS = ("computer_20250124", "computer_20251124")
#: Model ids whose docs name the 2025-11-24 tool; every other id gets the 2025-01-24 one.
_NEWER_TOOL = re.compile(r"claude-opus-4-[5-9]|claude-opus-[5-9]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_MODELS = 100


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    name: str
    api: str = "responses"
    #: The provider's model id, sent in every request.
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    #: anthropic: the computer tool's version.
    tool: str = "computer_20250124"
    #: chat: the model family's prompt and action grammar, a key of cud.model_api.chat.FORMATS.
    format: str | None = None

    @property
    def beta(self) -> str:
        """The ``anthropic-beta`` flag the tool version needs (computer_20250124 -> computer-use-2025-01-24)."""
        stamp = self.tool.rsplit("_", 1)[1]
        return f"computer-use-{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}"


def load_models(value: object) -> dict[str, ModelEntry]:
    """``[models]``: each entry checked, a bad value a ConfigError naming its key."""
    if not isinstance(value, dict):
        raise bad("models", value, "a table of [models.NAME] tables")
    models = value
    if len(models) > _MAX_MODELS:
        raise bad("models", f"{len(models)} entries", f"at most {_MAX_MODELS} entries")
    return {name: _entry(name, raw) for name, raw in models.items()}


def _entry(name: str, raw: object) -> ModelEntry:
    where = f"models.{name}"
    table = checked_table(where, raw, MODEL_KEYS)
    api = table.get("api", "responses")
    if api not in APIS:
        raise bad(f"{where}.api", api, " or ".join(repr(a) for a in APIS))
    model = string(f"{where}.model", table.get("model", name))
    values: dict[str, object] = {"name": name, "api": api, "model": model}
    if "base_url" in table:
        url = string(f"{where}.base_url", table["base_url"])
        if not url.startswith(("http://", "https://")):
            raise bad(f"{where}.base_url", url, "an http:// or https:// URL")
        values["base_url"] = url
    if "api_key_env" in table:
        env_name = string(f"{where}.api_key_env", table["api_key_env"])
        if not _ENV_NAME.fullmatch(env_name):
            raise bad(f"{where}.api_key_env", env_name, "an environment variable's name")
        values["api_key_env"] = env_name
    elif api == "anthropic":
        values["api_key_env"] = "ANTHROPIC_API_KEY"
    if "tool" in table:
        if api != "anthropic":
            raise ConfigError(f"config key '{where}.tool' is only for api = \"anthropic\" (this entry's api is "
                              f"{api!r})", key=f"{where}.tool")
        if table["tool"] not in TOOL_VERSIONS:
            raise bad(f"{where}.tool", table["tool"], " or ".join(repr(t) for t in TOOL_VERSIONS))
        values["tool"] = table["tool"]
    elif _NEWER_TOOL.match(model):
        values["tool"] = TOOL_VERSIONS[1]
    if api == "chat":
        values["format"] = _chat_format(where, table)
    elif "format" in table:
        raise ConfigError(f"config key '{where}.format' is only for api = \"chat\" (this entry's api is {api!r})",
                          key=f"{where}.format")
    return ModelEntry(**values)  # type: ignore[arg-type]  # each value checked above


def _chat_format(where: str, table: Mapping[str, object]) -> str:
    """A chat entry's format; its base_url is required too (an open model's server has no default address)."""
    if "base_url" not in table:
        raise ConfigError(f"config key '{where}.base_url' is required for api = \"chat\": the URL of the model's "
                          "OpenAI-compatible server, such as \"http://127.0.0.1:8000/v1\" for vLLM",
                          key=f"{where}.base_url")
    if "format" not in table:
        raise ConfigError(f"config key '{where}.format' is required for api = \"chat\": one of "
                          + ", ".join(repr(f) for f in FORMATS), key=f"{where}.format")
    name = table["format"]
    if name not in FORMATS:
        raise bad(f"{where}.format", name, " or ".join(repr(f) for f in FORMATS))
    return str(name)


def resolve_model_keys(models: Mapping[str, ModelEntry], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each entry's key from its ``api_key_env`` (a ``responses`` entry without one uses the daemon's key; a
    ``chat`` entry without one sends a placeholder, as a vLLM server started without ``--api-key`` wants none).

    A variable that is unset or empty is a ConfigError naming it and the entry, at the daemon's start,
    not at the first task that needs it.
    """
    env = os.environ if env is None else env
    keys: dict[str, str] = {}
    for name, entry in models.items():
        if entry.api_key_env is None:
            continue
        key = env.get(entry.api_key_env, "").strip()
        if not key:
            raise ConfigError(f"model {name!r} (api {entry.api!r}) reads its API key from the environment "
                              f"variable {entry.api_key_env}, which is not set (config key "
                              f"'models.{name}.api_key_env')", key=f"models.{name}.api_key_env",
                              variable=entry.api_key_env)
        keys[name] = key
    return keys
