"""``[[notify]]``: the notification hooks of the config, each checked once; errors name key and value.

A hook is either a ``command`` (an argv list whose first element is an absolute path to
an executable; run without a shell) or a ``webhook`` (an http(s) URL that gets a POST).
Secrets never live in the config: a webhook's ``secret_header`` takes its value from
``secret_file`` or from a systemd credential (``secret_credential``); the file is checked
here and read again when the daemon starts, so printing a Config never shows it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cud.daemon.config_values import bad, int_in_range, positive_number, read_secret_file, seconds_in_range, string
from cud.daemon.config_values import table as checked_table
from cud.errors import ConfigError

__all__ = ("EVENTS", "FORMATS", "HOOK_KEYS", "HookConfig", "load_hooks", "ntfy_split", "read_header_value")

#: The events a hook may ask for, in the order the docs list them.
EVENTS = ("approval_requested", "task_finished", "task_failed", "budget_warning", "seat_unavailable",
          "seat_recovered")
#: What a webhook's body looks like: the event itself, an ntfy message, a Slack-compatible message.
FORMATS = ("json", "ntfy", "slack")
#: At most this many hooks: each has its own workers and queue.
MAX_HOOKS = 32
#: The keys of a ``[[notify]]`` table.
HOOK_KEYS = frozenset({"name", "events", "command", "env", "webhook", "format", "secret_header", "secret_file",
                       "secret_credential", "timeout", "retries", "backoff", "concurrency"})
_COMMAND_ONLY = {"env"}
_WEBHOOK_ONLY = {"format", "secret_header", "secret_file", "secret_credential"}
# RFC 9110 field names are tokens.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Fields an event already sets (CUD_*) or that would change how a program is loaded.
_RESERVED_ENV = re.compile(r"CUD_.*|LD_.*|PYTHON.*")


@dataclasses.dataclass(frozen=True)
class HookConfig:
    #: For logs and the metrics' ``hook`` label: the ``name`` key, else ``notify[i]``.
    name: str
    events: frozenset[str]
    command: tuple[str, ...] | None = None
    #: Extra environment of a command, as written (no secrets: they belong in files).
    env: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    webhook: str | None = None
    format: str = "json"
    secret_header: str | None = None
    #: Where the secret header's value is read at start-up (a file, or a credential's file).
    secret_file: Path | None = None
    #: Seconds one attempt may take: a command is killed, a request abandoned.
    timeout: float = 10.0
    #: Attempts after the first one fails; each waits ``backoff`` seconds, doubled every time.
    retries: int = 3
    backoff: float = 1.0
    #: Deliveries of this hook running at once (the others wait in its queue).
    concurrency: int = 4

    @property
    def kind(self) -> str:
        return "command" if self.command is not None else "webhook"


def load_hooks(value: object, env: Mapping[str, str]) -> tuple[HookConfig, ...]:
    """Check the ``notify`` key (an array of tables) and return its hooks."""
    if not isinstance(value, list):
        raise bad("notify", value, "an array of tables ([[notify]])")
    if len(value) > MAX_HOOKS:
        raise bad("notify", f"{len(value)} hooks", f"at most {MAX_HOOKS} hooks")
    hooks = tuple(_hook(f"notify[{index}]", table, env) for index, table in enumerate(value))
    names = [hook.name for hook in hooks]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two [[notify]] hooks are named {name!r}; names must differ", key="notify.name",
                              value=repr(name))
    return hooks


def _hook(key: str, value: object, env: Mapping[str, str]) -> HookConfig:
    table = checked_table(key, value, HOOK_KEYS)
    if ("command" in table) == ("webhook" in table):
        raise ConfigError(f"config table {key!r} needs exactly one of 'command' or 'webhook'", key=key)
    kind = "command" if "command" in table else "webhook"
    for name in _COMMAND_ONLY if kind == "webhook" else _WEBHOOK_ONLY:
        if name in table:
            raise ConfigError(f"config key '{key}.{name}' applies to a {'command' if kind == 'webhook' else 'webhook'}"
                              f" hook, and this one is a {kind}", key=f"{key}.{name}")
    values: dict[str, Any] = {
        "name": _name(f"{key}.name", table["name"]) if "name" in table else key,
        "events": _events(f"{key}.events", table.get("events", list(EVENTS))),
    }
    if kind == "command":
        values["command"] = _command(f"{key}.command", table["command"])
        if "env" in table:
            values["env"] = _env(f"{key}.env", table["env"])
    else:
        values["webhook"] = _url(f"{key}.webhook", table["webhook"])
        if "format" in table:
            if table["format"] not in FORMATS:
                raise bad(f"{key}.format", table["format"], f"one of {', '.join(map(repr, FORMATS))}")
            values["format"] = table["format"]
            if values["format"] == "ntfy" and not ntfy_split(values["webhook"])[1]:
                raise bad(f"{key}.webhook", table["webhook"], "an ntfy topic's URL (https://ntfy.sh/TOPIC)")
        values.update(_secret(key, table, env))
    if "timeout" in table:
        values["timeout"] = seconds_in_range(f"{key}.timeout", table["timeout"], 0.1, 300)
    if "retries" in table:
        values["retries"] = int_in_range(f"{key}.retries", table["retries"], 0, 10)
    if "backoff" in table:
        values["backoff"] = positive_number(f"{key}.backoff", table["backoff"], allow_zero=True)
        if values["backoff"] > 600:
            raise bad(f"{key}.backoff", table["backoff"], "a number of seconds from 0 to 600")
    if "concurrency" in table:
        values["concurrency"] = int_in_range(f"{key}.concurrency", table["concurrency"], 1, 64)
    return HookConfig(**values)


def _name(key: str, value: object) -> str:
    text = string(key, value)
    if len(text) > 64 or not text.isprintable():
        raise bad(key, value, "a printable name of at most 64 characters")
    return text


def _events(key: str, value: object) -> frozenset[str]:
    if not isinstance(value, list) or not value:
        raise bad(key, value, f"a non-empty list of events ({', '.join(EVENTS)})")
    for event in value:
        if event not in EVENTS:
            raise ConfigError(f"config key {key!r} names an unknown event {event!r}; known: {', '.join(EVENTS)}",
                              key=key, value=repr(event))
    return frozenset(value)


def _command(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(arg, str) for arg in value):
        raise bad(key, value, "a non-empty list of strings (the program, then its arguments; no shell)")
    program = value[0]
    if not os.path.isabs(program):
        raise bad(key, program, "a command whose program is an absolute path (it is run without a shell or $PATH)")
    if "\x00" in program or not os.path.isfile(program) or not os.access(program, os.X_OK):
        raise bad(key, program, "a command whose program is an executable file")
    for arg in value[1:]:
        if "\x00" in arg:
            raise bad(key, arg, "arguments without NUL characters")
    return tuple(value)


def _env(key: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise bad(key, value, "a table of NAME = \"value\"")
    for name, text in value.items():
        if not _ENV_NAME.fullmatch(name) or _RESERVED_ENV.fullmatch(name):
            raise bad(f"{key}.{name}", name, "a variable name of letters, digits and '_', not CUD_*, LD_* or PYTHON*")
        if not isinstance(text, str) or "\x00" in text:
            raise bad(f"{key}.{name}", text, "a string without NUL characters")
    return dict(value)


def _url(key: str, value: object) -> str:
    # The standard library's parser, not yarl's: `cud --help` and the config need no dependency.
    text = string(key, value)
    try:
        url = urllib.parse.urlsplit(text)
        port = url.port  # raises on a port that is not a number in range
    except ValueError:
        raise bad(key, value, "an http:// or https:// URL") from None
    host = url.hostname or ""
    if (url.scheme not in ("http", "https") or not host or not all(c.isalnum() or c in ".-_:" for c in host)
            or url.username is not None or url.password is not None or port == 0 or url.fragment
            or any(c.isspace() or not c.isprintable() for c in text)):
        # Credentials in a URL would sit in the config; they go in secret_file instead.
        raise bad(key, value, "an http:// or https:// URL with a host, and no user, password or #fragment")
    return text


def ntfy_split(url: str) -> tuple[str, str]:
    """An ntfy topic's URL as (the server's URL, the topic): ntfy takes JSON at its root."""
    parts = urllib.parse.urlsplit(url)
    head, _, topic = parts.path.rstrip("/").rpartition("/")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, head or "/", "", "")), topic


def _secret(key: str, table: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    sources = [name for name in ("secret_file", "secret_credential") if name in table]
    if "secret_header" not in table:
        if sources:
            raise ConfigError(f"config key '{key}.{sources[0]}' needs '{key}.secret_header' (the header it fills)",
                              key=f"{key}.{sources[0]}")
        return {}
    header = string(f"{key}.secret_header", table["secret_header"])
    if not _HEADER_NAME.fullmatch(header):
        raise bad(f"{key}.secret_header", header, "an HTTP header name (letters, digits and -)")
    if len(sources) != 1:
        raise ConfigError(f"config key '{key}.secret_header' needs exactly one of 'secret_file' or "
                          "'secret_credential' (the value is never written in the config)", key=f"{key}.secret_header")
    source = sources[0]
    if source == "secret_file":
        path = Path(string(f"{key}.secret_file", table["secret_file"]))
        if not path.is_absolute():
            raise bad(f"{key}.secret_file", table["secret_file"], "an absolute path")
    else:
        name = string(f"{key}.secret_credential", table["secret_credential"])
        if "/" in name or name in (".", ".."):
            raise bad(f"{key}.secret_credential", name, "a credential name without '/'")
        directory = env.get("CREDENTIALS_DIRECTORY")
        if not directory:
            raise ConfigError(f"config key '{key}.secret_credential' names {name!r} but CREDENTIALS_DIRECTORY is not"
                              " set (use LoadCredential= in the unit)", key=f"{key}.secret_credential",
                              value=repr(name))
        path = Path(directory) / name
    read_header_value(path, f"{key}.{source}")  # a missing or bad file stops `cud run` now
    return {"secret_header": header, "secret_file": path}


def read_header_value(path: Path, key: str) -> str:
    """The secret header's value from ``path``: one line, no control characters."""
    text = read_secret_file(path, key)
    if any(not c.isprintable() for c in text):
        raise ConfigError(f"{key} {str(path)!r} must hold one line of printable text (a header value)",
                          key=key, path=str(path))
    return text
