"""A ``metric`` check's own keys: an OSWorld metric by name, its result and expected value, its options.

```toml
[[checks]]
metric = "compare_table"                       # a name of cud.osworld.catalog.METRICS
result = { file = "Desktop/out.xlsx" }         # or { command = [argv] }, { fixture = "…" }, { value = … }
expected = { fixture = "fixtures/gold.xlsx" }  # the same forms; given iff the metric takes one
# several files side by side, as OSWorld's multi getters give them (``fixtures`` alike):
# result = { files = ["Desktop/a.xlsx", "Desktop/a-Sheet1.csv"], names = ["a.xlsx", "a-Sheet1.csv"], gives = [0] }
options = { rules = [ … ] }                    # only the keyword options the metric reads
timeout = 60                                   # seconds for the judge (and a result command)
```

The catalog is light (no metric library is imported), so a misspelt metric or option is
refused here, with "did you mean" (as every spec key), and then whatever else the catalog's
``check_options`` refuses (a compare_table rule's type), before anything is sent or runs. What the metric makes
of the values is the judge's business (cud.osworld.judge, in a process of its own).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Literal

from cud.errors import SpecError
from cud.osworld.catalog import METRICS, check_options
from cud.spec import values as v
from cud.spec.setup import MAX_RUN_TIMEOUT
from cud.suggest import closest, did_you_mean

__all__ = ("ARG_KINDS", "MAX_FILES", "MAX_VALUE_BYTES", "METRIC_TIMEOUT", "MULTI_KINDS", "MetricArg", "file_names",
           "parse_metric")

ArgKind = Literal["file", "command", "fixture", "value", "files", "fixtures"]
ARG_KINDS: tuple[ArgKind, ...] = ("file", "command", "fixture", "value", "files", "fixtures")
#: The kinds of several files, copied side by side under ``names``; ``gives`` picks what the metric gets.
MULTI_KINDS = frozenset({"files", "fixtures"})
#: The most files one ``files`` or ``fixtures`` names (OSWorld's tasks name up to 7).
MAX_FILES = 16
#: Seconds a metric's judge (and a result command) may take by default; at most MAX_RUN_TIMEOUT.
METRIC_TIMEOUT = 60.0
#: The largest ``value`` or ``options`` as JSON: a spec travels in one socket message (1 MiB).
MAX_VALUE_BYTES = 256 * 1024
#: The deepest nesting of lists and tables in a ``value`` or ``options``.
MAX_DEPTH = 32


@dataclasses.dataclass(frozen=True)
class MetricArg:
    """A metric's result or expected value: a file of the home, a command's output, a fixture, or a value."""

    kind: ArgKind
    #: The home path (file), the argv (command), the fixture's name on the submitter's side, or the value;
    #: files, fixtures: a tuple of those paths or names.
    value: Any
    #: files, fixtures: each one's name in the judge's directory, and the indexes of those the metric gets (in
    #: order: one is its path, several a list of paths).
    names: tuple[str, ...] = ()
    gives: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if self.kind in MULTI_KINDS:
            return {self.kind: list(self.value), "names": list(self.names), "gives": list(self.gives)}
        return {self.kind: list(self.value) if self.kind == "command" else self.value}

    def describe(self) -> str:
        if self.kind in MULTI_KINDS:
            what = "" if self.kind == "files" else "fixtures "
            given = ", ".join(str(self.value[i]) for i in self.gives)
            beside = ", ".join(str(p) for i, p in enumerate(self.value) if i not in self.gives)
            return f"{what}{given}" + (f" (beside {beside})" if beside else "")
        if self.kind == "file":
            return str(self.value)
        if self.kind == "command":
            return f"the output of {' '.join(self.value)}"
        if self.kind == "fixture":
            return f"fixture {self.value}"
        return f"the value {v.shown(self.value)}"


def parse_metric(path: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The Check fields of the metric check ``raw`` at ``path`` (its keys already known to be the kind's)."""
    at = v.join(path, "metric")
    name = v.text(at, raw["metric"], 200)
    if name not in METRICS:
        near = closest(name, METRICS)
        raise SpecError(f"spec key {at!r} names {name!r}, not a metric cud knows; {did_you_mean(name, METRICS)}"
                        f"known: {', '.join(sorted(METRICS))}", key=at, value=v.shown(name),
                        **({"suggestion": near} if near else {}))
    info = METRICS[name]
    if "result" not in raw:
        raise SpecError(f"spec key {v.join(path, 'result')!r} is missing: metric {name!r} needs the result it judges "
                        "(file, command, fixture or value)", key=v.join(path, "result"), value="None")
    fields: dict[str, Any] = {"metric": name, "result": _arg(v.join(path, "result"), raw["result"])}
    at = v.join(path, "expected")
    if info.expected and "expected" not in raw:
        raise SpecError(f"spec key {at!r} is missing: metric {name!r} compares the result with an expected value "
                        "(file, command, fixture or value)", key=at, value="None")
    if not info.expected and "expected" in raw:
        raise v.bad(at, raw["expected"], f"left out: metric {name!r} takes no expected value")
    if "expected" in raw:
        fields["expected"] = _arg(at, raw["expected"])
    at = v.join(path, "options")
    given = raw.get("options", {})
    if not info.options and isinstance(given, dict) and given:
        where = v.join(at, str(next(iter(given))))
        raise SpecError(f"unknown spec key {where!r}: metric {name!r} takes no options", key=where,
                        value=v.shown(next(iter(given))))
    options = v.table(at, given, info.options)
    fields["options"] = {key: json_value(v.join(at, key), value) for key, value in options.items()}
    check_options(name, fields["options"], at)  # the catalog's own word: a compare_table rule's type, too
    _size(at, fields["options"])
    fields["timeout"] = v.number(v.join(path, "timeout"), raw.get("timeout", METRIC_TIMEOUT), 0, MAX_RUN_TIMEOUT,
                                 " of seconds")
    return fields


def _arg(path: str, value: object) -> MetricArg:
    raw = v.table(path, value, (*ARG_KINDS, "names", "gives"))
    kind: ArgKind = v.one_of_keys(path, raw, ARG_KINDS, "where the value comes from")  # type: ignore[assignment]  # one of ARG_KINDS
    at = v.join(path, kind)
    if kind in MULTI_KINDS:
        return _several(path, kind, raw)
    for extra in ("names", "gives"):
        if extra in raw:
            raise v.bad(v.join(path, extra), raw[extra], f"left out: only several files (files, fixtures) have {extra}")
    if kind == "file":
        return MetricArg(kind, v.home_path(at, raw[kind]))
    if kind == "command":
        return MetricArg(kind, v.argv(at, raw[kind]))
    if kind == "fixture":
        return MetricArg(kind, v.local_path(at, raw[kind]))
    checked = json_value(at, raw[kind])
    _size(at, checked)
    return MetricArg(kind, checked)


def _several(path: str, kind: ArgKind, raw: dict[str, Any]) -> MetricArg:
    """Several files: each a home path (files) or a fixture (fixtures), their names, and which the metric gets."""
    at = v.join(path, kind)
    listed = v.items(at, raw[kind], MAX_FILES)
    read = v.home_path if kind == "files" else v.local_path
    paths = tuple(read(v.join(at, i), item) for i, item in enumerate(listed))
    names = file_names(v.join(path, "names"), raw["names"] if "names" in raw else [_own_name(p) for p in paths],
                       len(paths))
    at = v.join(path, "gives")
    gives = tuple(v.integer(v.join(at, i), item, 0, len(paths) - 1)
                  for i, item in enumerate(v.items(at, raw.get("gives", [0]), MAX_FILES)))
    if list(gives) != sorted(set(gives)):
        raise v.bad(at, raw["gives"], "distinct indexes of the files in increasing order (the metric gets the files "
                                      "in their order)")
    return MetricArg(kind, paths, names, gives)


def file_names(path: str, value: object, count: int) -> tuple[str, ...]:
    """``count`` names of files in one directory: none empty, '.', '..', holding '/' or a control character, and no
    two alike."""
    listed = v.items(path, value, MAX_FILES)
    if len(listed) != count:
        raise v.bad(path, value, f"a list of {count} names, one for each file")
    names: list[str] = []
    for i, name in enumerate(listed):
        at = v.join(path, i)
        written = v.text(at, name, v.MAX_NAME)
        if written in (".", "..") or "/" in written or any(ord(c) < 32 or ord(c) == 127 for c in written):
            raise v.bad(at, name, "a file's name (not '.' or '..', without '/' or control characters)")
        if written in names:
            raise v.bad(at, name, f"a name no other file has ({written!r} is {v.join(path, names.index(written))}'s)")
        names.append(written)
    return tuple(names)


def _own_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def json_value(path: str, value: object, depth: int = 0) -> Any:
    """``value`` if JSON can carry it as it is (a TOML date cannot), at most :data:`MAX_DEPTH` deep."""
    if depth > MAX_DEPTH:
        raise v.bad(path, value, f"a value at most {MAX_DEPTH} lists or tables deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise v.bad(path, value, "a finite number (JSON has no inf or nan)")
        return value
    if isinstance(value, list):
        return [json_value(v.join(path, i), item, depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise v.bad(path, value, f"a table with string keys (not {key!r})")
        return {key: json_value(v.join(path, key), item, depth + 1) for key, item in value.items()}
    raise v.bad(path, value, "a string, number, true or false, list or table (a TOML date or time is none)")


def _size(path: str, value: object) -> None:
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_VALUE_BYTES:
        raise SpecError(f"spec key {path!r} is {size} bytes as JSON; the limit is {MAX_VALUE_BYTES}", key=path,
                        value=v.shown(value), limit=MAX_VALUE_BYTES)
