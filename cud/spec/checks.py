"""The checks of a spec (``[[checks]]``), run after the model ends: their kinds and checks.

Each check is a table with exactly one kind key, an optional ``name`` and a ``weight``
(default 1). The kind key says what is looked at; the keys beside it what is expected:

* ``command = [argv]``: ``exit_code`` (default 0), ``output = {include, exclude, matches}``
  on its standard output, ``timeout``;
* ``file = "path in the home"``: ``exists`` (default true), ``equals`` (a fixture file on
  the submitter's side, sent with the spec), ``matches``, ``sha256``;
* ``element = {app, role, name}``: ``exists`` (default true), ``text``, ``value``, ``states``;
* ``window = {class, title}``: ``exists`` (default true);
* ``answer = "..."``: the model's final message matches;
* ``metric = "name"``: an OSWorld metric of ``result`` (and ``expected``) scores 1
  (:mod:`cud.spec.metric`: ``result``, ``expected``, ``options``, ``timeout``).

Expected strings follow :mod:`cud.spec.matching` (``re:`` or the exact value).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar, Literal

from cud.protocol import STATE_NAMES
from cud.spec import values as v
from cud.spec.matching import Match
from cud.spec.metric import MetricArg, parse_metric
from cud.spec.setup import MAX_RUN_TIMEOUT, RUN_TIMEOUT
from cud.suggest import did_you_mean

__all__ = ("CHECK_KINDS", "Check", "CheckKind", "Output", "parse_check")

CheckKind = Literal["command", "file", "element", "window", "answer", "metric"]
CHECK_KINDS: tuple[CheckKind, ...] = ("command", "file", "element", "window", "answer", "metric")
MAX_WEIGHT = 1000.0
#: Substrings one ``output.include`` or ``exclude`` may list.
MAX_SUBSTRINGS = 64
_SHA256 = re.compile(r"[0-9a-f]{64}")
_KEYS: dict[str, frozenset[str]] = {
    "command": frozenset({"command", "exit_code", "output", "timeout"}),
    "file": frozenset({"file", "exists", "equals", "matches", "sha256"}),
    "element": frozenset({"element", "exists", "text", "value", "states"}),
    "window": frozenset({"window", "exists"}),
    "answer": frozenset({"answer"}),
    "metric": frozenset({"metric", "result", "expected", "options", "timeout"}),
}
_COMMON = frozenset({"name", "weight"})


@dataclasses.dataclass(frozen=True)
class Output:
    """What a command's standard output must hold: every ``include``, no ``exclude`` (substrings), ``matches``."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    matches: Match | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"include": list(self.include), "exclude": list(self.exclude),
                **({"matches": self.matches.text} if self.matches is not None else {})}


@dataclasses.dataclass(frozen=True)
class Check:
    """One check; the fields its kind does not use keep their defaults."""

    kind: CheckKind
    name: str
    weight: float = 1.0
    argv: tuple[str, ...] = ()  # command
    timeout: float = RUN_TIMEOUT  # command, metric
    exit_code: int = 0  # command
    output: Output = Output()  # command
    path: str = ""  # file
    exists: bool = True  # file, element, window
    equals: str | None = None  # file: the fixture's name on the submitter's side
    matches: Match | None = None  # file
    sha256: str | None = None  # file
    #: element: {"app", "role", "name"}; window: {"class", "title"} (those given).
    where: tuple[tuple[str, Match], ...] = ()
    text: Match | None = None  # element
    value: float | None = None  # element
    states: tuple[str, ...] = ()  # element: each set, or after "!" not set
    answer: Match | None = None  # answer
    metric: str = ""  # metric: its name in cud.osworld.catalog.METRICS
    result: MetricArg | None = None  # metric
    expected: MetricArg | None = None  # metric, when it takes one
    #: metric: its keyword options, as JSON carries them.
    options: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)

    #: The kinds that only look at what anyone who submits may see (the final message, the
    #: display's windows and elements), and so need neither a seat's session nor the operate
    #: right. A kind added to CHECK_KINDS acts in the session until it is named here.
    ONLY_LOOKS: ClassVar[frozenset[str]] = frozenset({"answer", "window", "element"})

    @property
    def acts_in_session(self) -> bool:
        """Whether the check acts in the seat's session: it needs a seat with one, and the operate right."""
        return self.kind not in self.ONLY_LOOKS

    def fixtures(self) -> list[tuple[str, str]]:
        """The files it names on the submitter's side: (name, its key below the check's), in order."""
        named = [(self.equals, "equals")] if self.equals is not None else []
        for key, arg in (("result", self.result), ("expected", self.expected)):
            if arg is not None and arg.kind == "fixture":
                named.append((arg.value, f"{key}.fixture"))
            elif arg is not None and arg.kind == "fixtures":
                named += [(name, f"{key}.fixtures[{i}]") for i, name in enumerate(arg.value)]
        return named

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "weight": self.weight}
        if self.kind == "command":
            return {**out, "command": list(self.argv), "exit_code": self.exit_code, "output": self.output.to_dict(),
                    "timeout": self.timeout}
        if self.kind == "file":
            optional: dict[str, object] = {"equals": self.equals, "sha256": self.sha256,
                        "matches": self.matches.text if self.matches is not None else None}
            return {**out, "file": self.path, "exists": self.exists,
                    **{k: value for k, value in optional.items() if value is not None}}
        if self.kind == "metric":
            assert self.result is not None
            return {**out, "metric": self.metric, "result": self.result.to_dict(),
                    **({"expected": self.expected.to_dict()} if self.expected is not None else {}),
                    "options": dict(self.options), "timeout": self.timeout}
        where = {k: m.text for k, m in self.where}
        if self.kind == "window":
            return {**out, "window": where, "exists": self.exists}
        if self.kind == "element":
            optional = {"text": self.text.text if self.text is not None else None, "value": self.value,
                        "states": list(self.states) or None}
            return {**out, "element": where, "exists": self.exists,
                    **{k: value for k, value in optional.items() if value is not None}}
        assert self.answer is not None
        return {**out, "answer": self.answer.text}


def parse_check(path: str, value: object) -> Check:
    raw = v.table(path, value, _COMMON.union(*_KEYS.values()))
    kind: CheckKind = v.one_of_keys(path, raw, CHECK_KINDS, "the check's kind")  # type: ignore[assignment]  # one of CHECK_KINDS
    v.table(path, raw, _COMMON | _KEYS[kind])
    at = v.join(path, kind)
    weight = v.number(v.join(path, "weight"), raw.get("weight", 1), 0, MAX_WEIGHT)
    fields: dict[str, Any] = {}
    if kind == "command":
        fields = {"argv": v.argv(at, raw[kind]),
                  "timeout": v.number(v.join(path, "timeout"), raw.get("timeout", RUN_TIMEOUT), 0, MAX_RUN_TIMEOUT,
                                      " of seconds"),
                  "exit_code": v.integer(v.join(path, "exit_code"), raw.get("exit_code", 0), 0, 255),
                  "output": _output(v.join(path, "output"), raw.get("output", {}))}
        default = f"command {' '.join(fields['argv'])}"
    elif kind == "file":
        fields = _file(path, raw)
        default = f"file {fields['path']}"
    elif kind == "answer":
        fields = {"answer": v.match(at, raw[kind])}
        default = "answer"
    elif kind == "metric":
        fields = parse_metric(path, raw)
        default = f"metric {fields['metric']} of {fields['result'].describe()}"
    else:
        keys = ("app", "role", "name") if kind == "element" else ("class", "title")
        where = v.table(at, raw[kind], keys)
        if not where:
            raise v.bad(at, raw[kind], f"a table with at least one of {', '.join(keys)}")
        fields = {"where": tuple((k, v.match(v.join(at, k), where[k])) for k in keys if k in where),
                  "exists": v.flag(v.join(path, "exists"), raw.get("exists", True))}
        if kind == "element":
            fields.update(_element(path, raw, fields["exists"]))
        default = f"{kind} " + ", ".join(f"{k} {m.describe()}" for k, m in fields["where"])
    name = v.text(v.join(path, "name"), raw["name"], v.MAX_NAME) if "name" in raw else default[:v.MAX_NAME]
    return Check(kind, name, weight, **fields)


def _output(path: str, value: object) -> Output:
    raw = v.table(path, value, {"include", "exclude", "matches"})
    lists = {key: tuple(v.text(v.join(v.join(path, key), i), s, blank=False)
                        for i, s in enumerate(v.items(v.join(path, key), raw.get(key, []), MAX_SUBSTRINGS,
                                                      empty=True)))
             for key in ("include", "exclude")}
    matches = v.match(v.join(path, "matches"), raw["matches"]) if "matches" in raw else None
    return Output(lists["include"], lists["exclude"], matches)


def _file(path: str, raw: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"path": v.home_path(v.join(path, "file"), raw["file"]),
                              "exists": v.flag(v.join(path, "exists"), raw.get("exists", True))}
    if "equals" in raw:
        fields["equals"] = v.local_path(v.join(path, "equals"), raw["equals"])
    if "matches" in raw:
        fields["matches"] = v.match(v.join(path, "matches"), raw["matches"])
    if "sha256" in raw:
        digest = v.text(v.join(path, "sha256"), raw["sha256"], 64)
        if not _SHA256.fullmatch(digest):
            raise v.bad(v.join(path, "sha256"), digest, "64 lowercase hex digits")
        fields["sha256"] = digest
    _absent_alone(path, raw, fields["exists"], ("equals", "matches", "sha256"))
    return fields


def _element(path: str, raw: dict[str, Any], exists: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if "text" in raw:
        fields["text"] = v.match(v.join(path, "text"), raw["text"])
    if "value" in raw:
        fields["value"] = v.number(v.join(path, "value"), raw["value"], -1e300, 1e300)
    if "states" in raw:
        at = v.join(path, "states")
        states = tuple(v.text(v.join(at, i), s, 64) for i, s in enumerate(v.items(at, raw["states"], len(STATE_NAMES))))
        for i, state in enumerate(states):
            if state.removeprefix("!") not in STATE_NAMES:
                where = v.join(at, i)
                raise v.bad(where, state, f"an accessibility state ({did_you_mean(state.removeprefix('!'), STATE_NAMES)}"
                                          f"known: {', '.join(STATE_NAMES)}), or '!' and one")
        fields["states"] = states
    _absent_alone(path, raw, exists, ("text", "value", "states"))
    return fields


def _absent_alone(path: str, raw: dict[str, Any], exists: bool, expectations: tuple[str, ...]) -> None:
    """``exists = false`` expects nothing else of what is not there."""
    if not exists and (given := [k for k in expectations if k in raw]):
        raise v.bad(v.join(path, given[0]), raw[given[0]], f"left out: 'exists = false' expects nothing of a "
                                                            f"{'file' if 'sha256' in expectations else 'element'}")
