"""OSWorld's Thunderbird metrics: a profile's prefs.js, its msgFilterRules.dat, a mail folder's messages.

From desktop-env 1.0.2 (Apache-2.0): ``desktop_env/evaluators/metrics/thunderbird.py``
(check_thunderbird_prefs, check_thunderbird_filter, check_thunderbird_folder). The logic is
theirs, line for line, with their logging left out (it decides nothing), and with their quirks:

* check_thunderbird_prefs reads each ``user_pref("KEY", VALUE);`` line's VALUE with ``json.loads``:
  a value JSON cannot read raises (the judge's error), as in OSWorld; a key in both ``expect`` and
  ``unexpect`` is matched against ``expect`` only.
* check_thunderbird_filter starts a filter at a ``name=`` line and ends it at its ``condition=``
  line; a ``enabled=``/``action=``... line before any ``name=`` raises (UnboundLocalError), as in OSWorld.
* check_thunderbird_folder keeps OSWorld's inverted test (``if mail.strip(): continue``): it skips every
  message with any text and keeps the blank chunks, so two folders compare equal when both or neither
  have a blank chunk between their ``FROM - `` separators. Its tasks' folders score as OSWorld's do,
  which is the point of the port, not as the docstring says.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cud.osworld.metrics.rules import match_record, match_value_to_rule

__all__ = ("check_thunderbird_filter", "check_thunderbird_folder", "check_thunderbird_prefs")

_pref_pattern = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')


def check_thunderbird_prefs(result: Any, rule: Any) -> float:
    if result is None:
        return 0.

    expect_rules = rule.get("expect", {})
    unexpect_rules = rule.get("unexpect", {})

    expect_metrics = {k: False for k in expect_rules}
    unexpect_metric = True
    with open(result) as f:
        for line in f:
            match_ = _pref_pattern.match(line.strip())
            if match_ is None:
                continue
            key = match_.group("key")
            value = json.loads(match_.group("val"))
            if key in expect_rules:
                expect_metrics[key] = match_value_to_rule(value, expect_rules[key])
            elif key in unexpect_rules:
                unexpect_metric = unexpect_metric and not match_value_to_rule(value, unexpect_rules[key])

    return float(all(expect_metrics.values()) and unexpect_metric)


def _value_processor(val: str) -> str:
    return val.replace("\\\"", "\"").replace("\\\\", "\\")


#: One condition of a filter's ``condition="..."``: ``AND (field,relation,value)``, ``OR (...)`` or ``ALL``.
_condition_pattern = re.compile(
    r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w ' + '\'' + r']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


def check_thunderbird_filter(result: Any, rules: Any) -> float:
    if result is None:
        return 0.

    # One filter: {"name", "enabled": "yes" | "no", "type", "action", "actionValue", "condition": [...]}
    filters: list[dict[str, str | list[str]]] = []
    with open(result) as f:
        for line in f:
            if line.startswith("name="):
                filter_: dict[str, str | list[str]] = {}
                filter_["name"] = _value_processor(line[6:-2])
            elif line.startswith("enabled="):
                filter_["enabled"] = _value_processor(line[9:-2])
            elif line.startswith("type="):
                filter_["type"] = _value_processor(line[6:-2])
            elif line.startswith("action="):
                filter_["action"] = _value_processor(line[8:-2])
            elif line.startswith("actionValue="):
                filter_["actionValue"] = _value_processor(line[13:-2])
            elif line.startswith("condition="):
                condition_str = _value_processor(line[11:-2])
                filter_["condition"] = _condition_pattern.findall(condition_str)
                filters.append(filter_)

    expect_metrics = [False] * len(rules.get("expect", []))
    unexpect_metric = True
    for flt in filters:
        for i, r in enumerate(rules.get("expect", [])):
            expect_metrics[i] = expect_metrics[i] or match_record(r, flt)
        unexpect_metric = unexpect_metric and not any(match_record(r, flt) for r in rules.get("unexpect", []))
    return float(all(expect_metrics) and unexpect_metric)


def check_thunderbird_folder(result: Any, reference: Any, **kwargs: Any) -> float:
    def normalize_msg(msg: str, options: dict[str, Any]) -> str:
        if options.get("ignore_status", False):
            msg = re.sub(r"X-Mozilla-Status\d?:[\s\d]+", "", msg)
        if options.get("ignore_keys", False):
            msg = re.sub(r"(X-Mozilla-Keys:[^\n]*?)\n(MIME-Version)", r"\2", msg)
        return msg.strip()

    def read_thunderbird_folder_file(path: str) -> str:
        with open(path) as inf:
            data = inf.read().strip()
            messages: list[str] = []
            for mail in data.split("FROM - "):
                if mail.strip():  # OSWorld's inverted test, kept: see the module's docstring
                    continue
                if kwargs.get("remove_deleted", True) and re.search(r"X-Mozilla-Status: 000[89]", mail):
                    continue
                messages.append("FROM - " + normalize_msg(mail, kwargs))
            kept: list[str] | set[str] = set(messages) if kwargs.get("remove_duplicate", True) else messages
        return "\n".join(sorted(kept))

    if type(reference) != list:  # noqa: E721  # OSWorld's test: a list of files pairs with a list
        result, reference = [result], [reference]
    for pred, gold in zip(result, reference, strict=False):
        if pred is None:
            return .0
        if read_thunderbird_folder_file(pred) != read_thunderbird_folder_file(gold):
            return .0
    return 1.0
