"""The config's ``[request]`` table: Responses parameters passed through to every model request.

Operators reach the API's own ways to bound a task's history (``truncation``,
``context_management``) and to tune the model (``reasoning``, ``text``,
``service_tier``, ...) without cud knowing each parameter: the keys are the
installed openai SDK's ``ResponseCreateParams`` and every value is checked
against the SDK's own type for it, so an SDK upgrade brings its new parameters
with no change here. Keys the computer loop or the daemon fill in are refused.
"""

from __future__ import annotations

import collections.abc
import datetime
import functools
import types
import typing
from typing import Any

import pydantic
import typing_extensions
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from cud.daemon.config_values import unknown_key
from cud.errors import ConfigError

__all__ = ("LOOP_OWNED", "PASS_THROUGH", "check_request")

#: Keys the loop (AsyncComputerToolset.run) or the daemon set, and why an operator cannot.
#: The SDK itself refuses most of these in ``extra_body`` as "runner-owned fields".
LOOP_OWNED: dict[str, str] = {
    "model": "the daemon sets it from its 'model' key or the task's model",
    "input": "the loop sends the task's prompt, then the history as [history] shapes it",
    "tools": "the loop sends exactly one computer tool",
    "tool_choice": "the loop resets it to 'auto' after the first turn",
    "include": "the loop asks for reasoning.encrypted_content to replay the history",
    "previous_response_id": "cud sets it itself in [history] mode 'stored' (the default)",
    "conversation": "cud continues stored responses by previous_response_id ([history] mode 'stored')",
    "stream": "the loop needs whole, non-streamed responses",
    "stream_options": "it only applies to streaming, which the loop never does",
    "background": "the loop waits for each response in the foreground",
    "background_options": "it only applies to background responses, which the loop never makes",
}


def _request_hints() -> dict[str, Any]:
    return typing.get_type_hints(ResponseCreateParamsNonStreaming, include_extras=True)


#: Every key the installed SDK accepts in ``responses.create``'s body, the loop's included.
SDK_KEYS: frozenset[str] = frozenset(_request_hints())
#: The keys ``[request]`` may set.
PASS_THROUGH: frozenset[str] = SDK_KEYS - LOOP_OWNED.keys()


def check_request(table: object) -> dict[str, Any]:
    """The ``[request]`` table, checked: every key the SDK's and not the loop's, every value of the SDK's type.

    Returns the values as written (plain TOML values are already JSON-shaped).
    """
    if not isinstance(table, dict):
        raise ConfigError(f"config key 'request' must be a table, got {table!r}", key="request", value=repr(table))
    for key in table:
        _check_key(key)
    for key, value in table.items():
        _no_dates(f"request.{key}", value)
    try:
        _adapter().validate_python(table, strict=True)
    except pydantic.ValidationError as exc:
        raise _value_error(exc, table) from None
    return table


def _check_key(key: str) -> None:
    path = f"request.{key}"
    if key in LOOP_OWNED:
        raise ConfigError(
            f"config key {path!r} cannot be set: the computer loop owns it ({LOOP_OWNED[key]})",
            key=path,
            owner="loop",
        )
    if key not in SDK_KEYS:
        raise unknown_key(path, key, PASS_THROUGH, ": not a Responses parameter of the installed openai SDK")


def _no_dates(path: str, value: object) -> None:
    # TOML has dates and times, JSON does not: the SDK would fail on them at the first request.
    if isinstance(value, (datetime.date, datetime.time)):
        raise ConfigError(f"config key {path!r} must be JSON-like, got the TOML date/time {value!r}", key=path)
    if isinstance(value, dict):
        for name, item in value.items():
            _no_dates(f"{path}.{name}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_dates(f"{path}[{index}]", item)


@functools.cache
def _adapter() -> pydantic.TypeAdapter[Any]:
    """A validator of the pass-through keys built from the SDK's own annotations.

    Strict, so "5" is not taken for 5 (the value goes to the API as written), and
    forbidding keys no TypedDict declares, so a misspelt nested key is an error, not
    silently sent.
    """
    hints = _request_hints()
    fields = {key: _eager(hints[key]) for key in sorted(PASS_THROUGH)}
    table = typing_extensions.TypedDict("RequestTable", fields, total=False)  # type: ignore[misc]  # built at run time
    return pydantic.TypeAdapter(pydantic.with_config(pydantic.ConfigDict(extra="forbid"))(table))


def _eager(hint: Any) -> Any:
    """``hint`` with every ``Iterable[X]`` read as ``list[X]``.

    pydantic checks an Iterable lazily, item by item as it is consumed, and takes a
    string or a table for one: a bad ``context_management`` would pass the config.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is collections.abc.Iterable:
        return list[_eager(args[0])]  # type: ignore[misc]  # a type built at run time
    if typing_extensions.is_typeddict(hint):
        return _eager_typeddict(hint)
    if origin is None or origin is typing.Literal or not args:
        return hint
    if origin is typing.Annotated:
        return typing.Annotated[(_eager(args[0]), *hint.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_eager(arg) for arg in args)]  # noqa: UP007 (built from a tuple)
    if origin in (typing_extensions.Required, typing_extensions.NotRequired):
        return origin[_eager(args[0])]
    if origin in (list, dict, collections.abc.Mapping, collections.abc.Sequence):
        return origin[tuple(_eager(arg) for arg in args)]
    return hint


_EAGER: dict[type, Any] = {}


def _eager_typeddict(cls: type) -> Any:
    """The TypedDict itself if none of its fields is an Iterable, else a copy with lists."""
    if cls in _EAGER:
        return _EAGER[cls]
    _EAGER[cls] = cls  # a recursive type refers to itself as it is
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {name: _eager(hint) for name, hint in hints.items()}
    if fields != hints:
        required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        marked = {
            name: hint if typing.get_origin(hint) in (typing_extensions.Required, typing_extensions.NotRequired)
            else (typing_extensions.Required[hint] if name in required else typing_extensions.NotRequired[hint])
            for name, hint in fields.items()
        }
        _EAGER[cls] = typing_extensions.TypedDict(cls.__name__, marked)  # type: ignore[operator]  # a TypedDict built at run time
    return _EAGER[cls]


def _value_error(exc: pydantic.ValidationError, table: dict[str, Any]) -> ConfigError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    path, value, fork = _walk(table, first["loc"], missing=first["type"] == "missing")
    if fork is not None:
        # pydantic tried each member of a Union and reports why each failed, under its name.
        head = first["loc"][:fork]
        tried = [e for e in errors if e["loc"][:fork] == head]
        why = "; ".join(f"{e['loc'][fork]}: {_why(e, e['loc'][fork + 1:])}" for e in tried[:4])
        more = "; ..." if len(tried) > 4 else ""
        message = f"config key {path!r} matches none of the openai SDK's types for it, got {value!r} ({why}{more})"
    elif first["type"] == "extra_forbidden":
        message = f"unknown config key {path!r}: the openai SDK's type has no such field there"
    elif first["type"] == "missing":
        return ConfigError(f"config key {path!r} is missing: the openai SDK's type requires it", key=path)
    else:
        message = f"config key {path!r} {_why(first, ())}, got {value!r}"
    return ConfigError(message, key=path, value=repr(value))


def _walk(table: Any, loc: tuple[Any, ...], *, missing: bool) -> tuple[str, Any, int | None]:
    """The dotted path, the value and the index of the first Union member name along a pydantic ``loc``.

    A ``missing`` error's last part is the absent field's name.
    """
    path, value = "request", table
    for index, part in enumerate(loc):
        if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            path, value = f"{path}[{part}]", value[part]
        elif isinstance(value, dict) and part in value:
            path, value = f"{path}.{part}", value[part]
        elif missing and index == len(loc) - 1:
            return f"{path}.{part}", None, None  # a missing field: nothing is there
        else:
            return path, value, index  # not in the value: the name of a Union member
    return path, value, None


def _why(error: Any, rest: tuple[Any, ...]) -> str:
    """What is wrong, in the config's words; ``rest`` is the loc below the value being explained."""
    where = ".".join(str(part) for part in rest)
    if error["type"] == "extra_forbidden":
        return f"{where or 'a field'} is not one of its fields"
    if error["type"] == "missing":
        return f"{where or 'a field'} is missing"
    wanted = error["msg"].removeprefix("Input should be ")
    return f"{where + ' ' if where else ''}must be {wanted}"
