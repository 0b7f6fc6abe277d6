"""Policy rules: decide allow / ask / deny for an action by what it touches.

``[[policy.rules]]`` in the config (the daemon's rules) and ``rules`` at submit
(a submitter's, stricter only: ``ask`` or ``deny``). Each rule is a table:

* ``action``: an action kind or a list of them (``click``, ``type``…); any if absent;
* ``app``: the application (its accessibility name, process name, or WM_CLASS);
* ``window_class``: WM_CLASS, either half; ``title``: the window title;
* ``role``, ``name``: the element's role and name;
* ``decision``: ``allow``, ``ask`` or ``deny``; ``id``: a label for messages (optional).

Patterns are globs (``*``, ``?``, ``[…]``), or regular expressions after ``re:``
(searched, not anchored); both case-insensitive; a list matches if any does. The
first rule that matches decides; with none, the task's approval mode does.

A rule that names a fact the target does not have (the element on a window-only
app, anything on a VNC seat without a display) cannot tell: if its known facts
match and it would ``ask`` or ``deny``, it asks, and says so. Nothing is let
through because it could not be seen.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cud.daemon.config_values import table as checked_table
from cud.errors import ConfigError
from cud.protocol import HUMAN_ACTIONS
from cud.spec.matching import compile_regex

__all__ = ("RULE_KEYS", "Rule", "RuleDecision", "decide", "first_match", "parse_rules")

Decision = Literal["allow", "ask", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow", "ask", "deny")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
_PATTERN_KEYS = ("app", "window_class", "title", "role", "name")
#: The keys of a ``[[policy.rules]]`` table (and of a rule given to one task).
RULE_KEYS = frozenset({"id", "action", "decision", *_PATTERN_KEYS})
#: A rule list longer than this is a mistake (each action is checked against every rule).
MAX_RULES = 256
_ELEMENT_KEYS = {"role", "name"}
_WINDOW_KEYS = {"window_class", "title"}


@dataclass(frozen=True)
class Pattern:
    text: str
    regex: re.Pattern[str]

    def matches(self, value: str) -> bool:
        return self.regex.search(value) is not None


@dataclass(frozen=True)
class Rule:
    label: str  # "policy.rules[2]" or 'policy.rules[2] ("no payments")'
    decision: Decision
    actions: frozenset[str] | None
    patterns: dict[str, tuple[Pattern, ...]]


@dataclass(frozen=True)
class RuleDecision:
    decision: Decision
    rule: str
    #: Why a rule asked instead of matching outright (a fact it names is unknown), else "".
    unsure: str = ""

    def as_check(self) -> dict[str, str]:
        """The approval's note of why it was asked (shown where safety checks are)."""
        because = f" ({self.unsure})" if self.unsure else ""
        return {"id": "policy_rule", "code": "policy_rule", "message": f"rule {self.rule} asks{because}"}


def _pattern(key: str, value: object) -> Pattern:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"config key {key!r} is {value!r}; expected a glob or 're:REGEX' (a non-empty string)",
                          key=key, value=repr(value))
    if value.startswith("re:"):
        try:
            regex = compile_regex(value[3:], re.IGNORECASE)
        except re.error as exc:
            raise ConfigError(f"config key {key!r} is {value!r}: not a regular expression ({exc})", key=key,
                              value=repr(value)) from None
    else:
        regex = re.compile(fnmatch.translate(value), re.IGNORECASE)
    return Pattern(value, regex)


def _patterns(key: str, value: object) -> tuple[Pattern, ...]:
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"config key {key!r} is an empty list; give at least one pattern", key=key, value="[]")
        return tuple(_pattern(f"{key}[{i}]", v) for i, v in enumerate(value))
    return (_pattern(key, value),)


def _actions(key: str, value: object) -> frozenset[str]:
    kinds = value if isinstance(value, list) else [value]
    if not kinds:
        raise ConfigError(f"config key {key!r} is an empty list; give at least one action kind", key=key, value="[]")
    for i, kind in enumerate(kinds):
        if kind not in HUMAN_ACTIONS:
            where = f"{key}[{i}]" if isinstance(value, list) else key
            raise ConfigError(f"config key {where!r} is {kind!r}; expected one of {', '.join(HUMAN_ACTIONS)}",
                              key=where, value=repr(kind))
    return frozenset(kinds)


def parse_rules(key: str, value: object, *, stricter_only: bool = False, what: str = "config key") -> tuple[Rule, ...]:
    """The rules of ``value`` (a list of tables), errors naming ``key[i].field`` and the bad value.

    ``what`` names where they come from in messages ("config key", "'submit' field").
    """
    try:
        return _parse_rules(key, value, stricter_only)
    except ConfigError as exc:
        if what == "config key":
            raise
        raise ConfigError(exc.message.replace("config key", what, 1), **exc.details) from None


def _parse_rules(key: str, value: object, stricter_only: bool) -> tuple[Rule, ...]:
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"config key {key!r} is {value!r}; expected a list of rule tables ([[{key}]])", key=key,
                          value=repr(value))
    if len(value) > MAX_RULES:
        raise ConfigError(f"config key {key!r} has {len(value)} rules; the limit is {MAX_RULES}", key=key,
                          count=len(value))
    rules = []
    for index, table in enumerate(value):
        prefix = f"{key}[{index}]"
        checked_table(prefix, table, RULE_KEYS)
        decision = table.get("decision")
        allowed = ("ask", "deny") if stricter_only else DECISIONS
        if decision not in allowed:
            expected = " or ".join(repr(d) for d in allowed)
            why = " (a submitter's rules may only make the policy stricter)" if stricter_only else ""
            raise ConfigError(f"config key '{prefix}.decision' is {decision!r}; expected {expected}{why}",
                              key=f"{prefix}.decision", value=repr(decision))
        label = prefix
        if "id" in table:
            ident = table["id"]
            if not isinstance(ident, str) or not ident or len(ident) > 80:
                raise ConfigError(f"config key '{prefix}.id' is {ident!r}; expected a short non-empty string",
                                  key=f"{prefix}.id", value=repr(ident))
            label = f"{prefix} ({ident!r})"
        actions = _actions(f"{prefix}.action", table["action"]) if "action" in table else None
        patterns = {k: _patterns(f"{prefix}.{k}", table[k]) for k in _PATTERN_KEYS if k in table}
        rules.append(Rule(label, decision, actions, patterns))
    return tuple(rules)


def _facts(target: dict[str, Any] | None) -> dict[str, list[str] | None]:
    """What each pattern key is matched against; None where the target does not say."""
    window = (target or {}).get("window")
    element = (target or {}).get("element")
    facts: dict[str, list[str] | None] = {k: None for k in _PATTERN_KEYS}
    if isinstance(window, dict):
        classes = [str(window.get(k) or "") for k in ("class", "instance")]
        facts["window_class"] = classes
        facts["title"] = [str(window.get("title") or "")]
        facts["app"] = [*classes, str(window.get("process") or "")]
    if isinstance(element, dict):
        facts["role"] = [str(element.get("role") or "")]
        facts["name"] = [str(element.get("name") or "")]
        facts["app"] = [*(facts["app"] or []), str(element.get("application") or "")]
    return facts


def _match(rule: Rule, kind: str, facts: dict[str, list[str] | None]) -> tuple[bool, str]:
    """(matches, unknown): whether every known fact matches, and which named facts were unknown."""
    if rule.actions is not None and kind not in rule.actions:
        return False, ""
    unknown = []
    for key, patterns in rule.patterns.items():
        values = facts[key]
        if values is None:
            unknown.append(key)
        elif not any(p.matches(v) for p in patterns for v in values if v):
            return False, ""
    return True, ", ".join(unknown)


def first_match(rules: Sequence[Rule], kind: str, target: dict[str, Any] | None) -> RuleDecision | None:
    facts = _facts(target)
    for rule in rules:
        matched, unknown = _match(rule, kind, facts)
        if not matched:
            continue
        if unknown:
            if rule.decision == "allow":
                continue  # cannot tell that it is allowed: on to the next rule
            return RuleDecision("ask", rule.label, f"its {unknown} cannot be read here")
        return RuleDecision(rule.decision, rule.label)
    return None


def decide(daemon_rules: Sequence[Rule], task_rules: Sequence[Rule], kind: str,
           target: dict[str, Any] | None) -> RuleDecision | None:
    """The first match of the daemon's rules, made stricter by the first match of the task's; None if neither."""
    ours = first_match(daemon_rules, kind, target)
    theirs = first_match(task_rules, kind, target)
    if ours is None or (theirs is not None and _STRICTNESS[theirs.decision] > _STRICTNESS[ours.decision]):
        return theirs
    return ours
