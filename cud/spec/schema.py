"""A whole spec: its top-level keys, the task's own limits (as ``submit`` takes them), and parsing.

``parse_spec(raw)`` checks every key before anything runs and returns a frozen
:class:`Spec`; ``Spec.to_dict()`` is its normal form (every default written out),
which parses back to an equal Spec. The task's own keys (``prompt``, ``seat``,
``model``, ``max_steps``, ``max_duration``, the budgets, ``approval``, ``rules``, and the stuck
guard's ``repeat_limit``, ``cycle_limit``, ``on_stuck``, and the seat it needs: ``screen``,
``seat_tags``) are checked by
the socket protocol's ``submit`` checks, so a limit has one bounds check whether it
comes from ``cuctl submit --max-steps`` or from a spec.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cud.budget import BUDGET_TASK_KEYS, format_amount, parse_amount
from cud.errors import ProtocolError, SpecError
from cud.outcome import PASS_IF
from cud.protocol import check_field
from cud.seat_needs import TAG, TAG_RULE, SeatNeeds
from cud.spec import values as v
from cud.spec.checks import Check, parse_check
from cud.spec.matching import Match
from cud.spec.setup import SetupStep, parse_step

__all__ = ("ANY_SEAT", "Collect", "Spec", "TASK_KEYS", "TOP_KEYS", "parse_spec")

#: The keys a spec shares with ``submit`` (and checks the same way).
TASK_KEYS = ("prompt", "seat", "screen", "seat_tags", "model", "max_steps", "max_duration", *BUDGET_TASK_KEYS,
             "approval", "rules", "repeat_limit", "cycle_limit", "on_stuck")
TOP_KEYS = frozenset({*TASK_KEYS, "tags", "reset", "setup", "postconfig", "checks", "pass_if", "fail_if_answer", "collect"})
ANY_SEAT = "any"
MAX_SETUP = 64
MAX_POSTCONFIG = 64
MAX_CHECKS = 64
MAX_TAGS = 32
MAX_COLLECT = 32


@dataclasses.dataclass(frozen=True)
class Collect:
    """``[collect]``: files of the seat's home kept with the task's record after the checks."""

    files: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"files": list(self.files)}


@dataclasses.dataclass(frozen=True)
class Spec:
    prompt: str
    seat: str | None = None  # None: any seat (with a session, if the spec needs one)
    screen: str | None = None  # None: any screen size; else "WxH" (cud.seat_needs)
    seat_tags: tuple[str, ...] = ()  # the seat must carry every one
    model: str | None = None  # None for these: the daemon's
    max_steps: int | None = None
    max_duration: int | None = None
    max_cost: str | None = None  # an exact decimal string (cud.budget), however the spec wrote it
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    approval: str | None = None
    rules: tuple[dict[str, Any], ...] = ()  # checked by the daemon like `submit --rule`
    repeat_limit: int | None = None  # None for these: the daemon's [guard]
    cycle_limit: int | None = None
    on_stuck: str | None = None
    tags: tuple[str, ...] = ()
    reset: bool = False
    setup: tuple[SetupStep, ...] = ()
    #: Setup steps run after the model's part, before the checks (OSWorld's ``postconfig``).
    postconfig: tuple[SetupStep, ...] = ()
    checks: tuple[Check, ...] = ()
    pass_if: str = "all"  # cud.outcome.PASS_IF: how the checks combine into the verdict
    #: A final message this matches fails the verdict whatever the checks say (OSWorld's FAIL action).
    fail_if_answer: Match | None = None
    collect: Collect = Collect()

    def task_fields(self) -> dict[str, Any]:
        """The ``submit`` request's own fields for this spec (those given)."""
        fields = {"prompt": self.prompt, "seat": self.seat, "screen": self.screen,
                  "seat_tags": list(self.seat_tags) if self.seat_tags else None, "model": self.model,
                  "max_steps": self.max_steps, "max_duration": self.max_duration, "max_cost": self.max_cost,
                  "max_input_tokens": self.max_input_tokens, "max_output_tokens": self.max_output_tokens,
                  "approval": self.approval,
                  "rules": list(self.rules) if self.rules else None, "repeat_limit": self.repeat_limit,
                  "cycle_limit": self.cycle_limit, "on_stuck": self.on_stuck}
        return {k: value for k, value in fields.items() if value is not None}

    def judging(self) -> dict[str, Any]:
        """The rest: what ``submit`` carries in its ``spec`` field (and the task keeps as its spec)."""
        return {"tags": list(self.tags), "reset": self.reset, "setup": [s.to_dict() for s in self.setup],
                "postconfig": [s.to_dict() for s in self.postconfig], "checks": [c.to_dict() for c in self.checks],
                "pass_if": self.pass_if,
                "fail_if_answer": None if self.fail_if_answer is None else self.fail_if_answer.text,
                "collect": self.collect.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {**self.task_fields(), "seat": self.seat or ANY_SEAT, "seat_tags": list(self.seat_tags),
                **self.judging()}

    @property
    def needs(self) -> SeatNeeds:
        """The seat this spec needs (its name, screen and tags; each optional)."""
        return SeatNeeds(self.seat, self.screen, self.seat_tags)

    def local_files(self) -> dict[str, str]:
        """Every file named on the submitter's side (setup and postconfig ``src``, check ``equals``, a metric's
        ``fixture``) -> the first key naming it."""
        named: dict[str, str] = {}
        for stage, steps in (("setup", self.setup), ("postconfig", self.postconfig)):
            for i, step in enumerate(steps):
                for j, copy in enumerate(step.files):
                    named.setdefault(copy.src, f"{stage}[{i}].files[{j}].src")
        for i, check in enumerate(self.checks):
            for name, key in check.fixtures():
                named.setdefault(name, f"checks[{i}].{key}")
        return named

    def in_session(self) -> list[str]:
        """The key paths of what acts in the seat's session: they need a seat with one, and the operate right."""
        keys = [f"setup[{i}].{s.kind}" for i, s in enumerate(self.setup) if s.acts_in_session]
        keys += [f"postconfig[{i}].{s.kind}" for i, s in enumerate(self.postconfig) if s.acts_in_session]
        keys += [f"checks[{i}].{c.kind}" for i, c in enumerate(self.checks) if c.acts_in_session]
        return keys + (["collect.files"] if self.collect.files else [])

    @property
    def needs_session(self) -> bool:
        return self.reset or bool(self.in_session())


def parse_spec(raw: object) -> Spec:
    """Check every key of ``raw`` (a spec as TOML or JSON gives it); SpecError names the first bad one."""
    table = v.table("", raw, TOP_KEYS)
    if "prompt" not in table:
        raise SpecError("spec key 'prompt' is missing: a spec needs the task's prompt", key="prompt", value="None")
    task: dict[str, Any] = {}
    for key in TASK_KEYS:
        if key not in table or (key == "seat" and table[key] == ANY_SEAT):
            continue
        try:
            check_field("submit", key, table[key])
        except ProtocolError as exc:
            raise SpecError(exc.message.replace("'submit' field", "spec key", 1), key=exc.details.get("field", key),
                            value=v.shown(table[key])) from None
        task[key] = (tuple(table[key]) if key in ("rules", "seat_tags") else format_amount(parse_amount(table[key]))
                     if key == "max_cost" else table[key])
    tags = tuple(_tag(v.join("tags", i), t) for i, t in enumerate(v.items("tags", table.get("tags", []), MAX_TAGS,
                                                                           empty=True)))
    setup = tuple(parse_step(v.join("setup", i), s)
                  for i, s in enumerate(v.items("setup", table.get("setup", []), MAX_SETUP, empty=True)))
    postconfig = tuple(parse_step(v.join("postconfig", i), s) for i, s in
                       enumerate(v.items("postconfig", table.get("postconfig", []), MAX_POSTCONFIG, empty=True)))
    checks = tuple(parse_check(v.join("checks", i), c)
                   for i, c in enumerate(v.items("checks", table.get("checks", []), MAX_CHECKS, empty=True)))
    pass_if = table.get("pass_if", "all")
    if pass_if not in PASS_IF:
        raise v.bad("pass_if", pass_if, " or ".join(repr(p) for p in PASS_IF))
    fail_if_answer = None if table.get("fail_if_answer") is None else v.match("fail_if_answer",
                                                                                table["fail_if_answer"])
    if fail_if_answer is not None and not checks:
        raise SpecError("spec key 'fail_if_answer' needs checks: it fails their verdict, and a spec without checks "
                        "has none", key="fail_if_answer", value=v.shown(table["fail_if_answer"]))
    collect = _collect(table.get("collect", {}))
    reset = v.flag("reset", table["reset"]) if "reset" in table else bool(setup or postconfig or checks)
    return Spec(**task, tags=tags, reset=reset, setup=setup, postconfig=postconfig, checks=checks, pass_if=pass_if,
                fail_if_answer=fail_if_answer, collect=collect)


def _tag(path: str, value: object) -> str:
    if not isinstance(value, str) or not TAG.fullmatch(value):
        raise v.bad(path, value, TAG_RULE)
    return value


def _collect(value: object) -> Collect:
    raw = v.table("collect", value, {"files"})
    at = "collect.files"
    return Collect(tuple(v.home_path(v.join(at, i), p)
                         for i, p in enumerate(v.items(at, raw.get("files", []), MAX_COLLECT, empty=True))))
