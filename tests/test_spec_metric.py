"""A spec's ``metric`` check as it is parsed: the catalog's names and options, its result and expected value.

The random specs of tests/test_spec_schema.py hold metric checks too (round trips, every bad value,
every misspelt key); here each refusal's words, "did you mean" for a metric and an option, and the
fixtures a metric check sends. No display: parsing is the same code on both sides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cud.daemon.session.config import load_session_limits
from cud.errors import ConfigError, SpecError
from cud.osworld.catalog import METRICS
from cud.spec import parse_spec
from cud.spec.load import load_spec
from cud.spec.metric import METRIC_TIMEOUT


def spec_with(check: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": "Fill in the table.", "checks": [check]}


TABLE = {"metric": "compare_table", "result": {"file": "Desktop/out.xlsx"},
         "expected": {"fixture": "fixtures/gold.xlsx"}}
SEVERAL = {"files": ["Desktop/a.xlsx", "Desktop/a-Sheet1.csv"]}


def refused(check: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(check))
    return caught.value


def test_a_metric_check_parses_with_its_defaults_and_round_trips() -> None:
    spec = parse_spec(spec_with({**TABLE, "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0}]}}))
    check = spec.checks[0]
    assert (check.kind, check.metric, check.timeout) == ("metric", "compare_table", METRIC_TIMEOUT)
    assert check.name == "metric compare_table of Desktop/out.xlsx"
    assert check.options == {"rules": [{"type": "sheet_data", "sheet_idx0": 0}]}
    assert check.acts_in_session and spec.in_session() == ["checks[0].metric"]
    assert parse_spec(spec.to_dict()) == spec
    assert spec.to_dict()["checks"][0] == {"name": check.name, "weight": 1.0, **TABLE,
                                           "options": check.options, "timeout": METRIC_TIMEOUT}


def test_a_metric_checks_fixtures_travel_with_the_spec_named_by_their_keys() -> None:
    spec = parse_spec({"prompt": "p", "checks": [
        {"metric": "diff_text_file", "result": {"fixture": "a.txt"}, "expected": {"fixture": "b.txt"}},
        {"file": "x", "equals": "a.txt"},
        {"metric": "check_list", "result": {"command": ["/bin/ls"]}, "expected": {"value": ["x", 1, None]}}]})
    assert spec.local_files() == {"a.txt": "checks[0].result.fixture", "b.txt": "checks[0].expected.fixture"}
    assert spec.checks[2].name == "metric check_list of the output of /bin/ls"


def test_several_files_carry_their_names_and_gives_and_round_trip() -> None:
    spec = parse_spec(spec_with({**TABLE, "result": SEVERAL, "expected": {
        "fixtures": ["gold/a.xlsx", "gold/a.csv"], "names": ["a_gold.xlsx", "a_gold-Sheet1.csv"], "gives": [0, 1]}}))
    check = spec.checks[0]
    assert check.result is not None and check.expected is not None
    # names default to each file's own; gives to [0], as OSWorld's file getters do
    assert (check.result.names, check.result.gives) == (("a.xlsx", "a-Sheet1.csv"), (0,))
    assert check.expected.to_dict() == {"fixtures": ["gold/a.xlsx", "gold/a.csv"],
                                        "names": ["a_gold.xlsx", "a_gold-Sheet1.csv"], "gives": [0, 1]}
    assert check.name == "metric compare_table of Desktop/a.xlsx (beside Desktop/a-Sheet1.csv)"
    assert parse_spec(spec.to_dict()) == spec
    assert spec.local_files() == {"gold/a.xlsx": "checks[0].expected.fixtures[0]",
                                  "gold/a.csv": "checks[0].expected.fixtures[1]"}


@pytest.mark.parametrize(("check", "key", "words"), [
    ({**TABLE, "metric": "compare_tabel"}, "checks[0].metric",
     "names 'compare_tabel', not a metric cud knows; did you mean 'compare_table'? known: "),
    ({**TABLE, "metric": "solve_the_task"}, "checks[0].metric", "not a metric cud knows; known: check_"),
    ({**TABLE, "metric": ""}, "checks[0].metric", "must be a non-blank string, got ''"),
    ({**TABLE, "metric": ["compare_table"]}, "checks[0].metric", "must be a string, got ['compare_table']"),
    ({**TABLE, "options": {"rule": []}}, "checks[0].options.rule",
     "unknown spec key 'checks[0].options.rule'; did you mean 'rules'? known here: rules"),
    ({**TABLE, "options": {"ignore_case": True}}, "checks[0].options.ignore_case", "known here: rules"),
    ({**TABLE, "options": []}, "checks[0].options", "must be a table, got []"),
    ({**TABLE, "options": {"rules": [{"type": "sheet_dta"}]}}, "checks[0].options.rules[0].type",
     "must be a compare_table rule type (did you mean 'sheet_data'? known: "),
    ({**TABLE, "options": {"rules": {"type": "sheet_data"}}}, "checks[0].options.rules", "must be a list of rule"),
    ({**TABLE, "options": {"rules": float("nan")}}, "checks[0].options.rules", "a finite number (JSON has no inf"),
    ({"metric": "check_list", "result": {"value": 1}, "expected": {"value": 1}, "options": {"rules": 1}},
     "checks[0].options.rules", "unknown spec key 'checks[0].options.rules': metric 'check_list' takes no options"),
    ({"metric": "compare_table", "expected": {"fixture": "g.xlsx"}}, "checks[0].result",
     "is missing: metric 'compare_table' needs the result it judges"),
    ({"metric": "compare_table", "result": {"file": "out.xlsx"}}, "checks[0].expected",
     "is missing: metric 'compare_table' compares the result with an expected value"),
    ({**TABLE, "result": {"file": "a.xlsx", "fixture": "b.xlsx"}}, "checks[0].result",
     "must have exactly one of file, command, fixture, value, files, fixtures (where the value comes from); it has "
     "file, fixture"),
    ({**TABLE, "result": {}}, "checks[0].result", "it has none"),
    ({**TABLE, "result": "Desktop/out.xlsx"}, "checks[0].result", "must be a table, got 'Desktop/out.xlsx'"),
    ({**TABLE, "result": {"path": "/tmp/x"}}, "checks[0].result.path", "unknown spec key 'checks[0].result.path'"),
    ({**TABLE, "result": {"file": "../etc/shadow"}}, "checks[0].result.file", "a path inside the seat's home"),
    ({**TABLE, "result": {"file": "/etc/shadow"}}, "checks[0].result.file", "a path inside the seat's home"),
    ({**TABLE, "result": {"command": "cat out.csv"}}, "checks[0].result.command", "must be a list"),
    ({**TABLE, "result": {"command": []}}, "checks[0].result.command", "must be a non-empty list"),
    ({**TABLE, "expected": {"fixture": ""}}, "checks[0].expected.fixture", "must be a non-blank string"),
    ({**TABLE, "expected": {"value": {"a": float("inf")}}}, "checks[0].expected.value.a", "a finite number"),
    ({**TABLE, "result": {**SEVERAL, "names": ["a.xlsx", "a.xlsx"]}}, "checks[0].result.names[1]",
     "a name no other file has ('a.xlsx' is checks[0].result.names[0]'s)"),
    ({**TABLE, "result": {**SEVERAL, "names": ["a.xlsx", "../a-Sheet1.csv"]}}, "checks[0].result.names[1]",
     "a file's name (not '.' or '..', without '/' or control characters), got '../a-Sheet1.csv'"),
    ({**TABLE, "result": {**SEVERAL, "names": ["..", "b"]}}, "checks[0].result.names[0]", "got '..'"),
    ({**TABLE, "result": {**SEVERAL, "names": ["a\nb", "b"]}}, "checks[0].result.names[0]", "control characters"),
    ({**TABLE, "result": {**SEVERAL, "names": ["a.xlsx"]}}, "checks[0].result.names",
     "a list of 2 names, one for each file"),
    ({**TABLE, "result": {"files": ["x/a.xlsx", "y/a.xlsx"]}}, "checks[0].result.names[1]",
     "('a.xlsx' is checks[0].result.names[0]'s)"),
    ({**TABLE, "result": {**SEVERAL, "gives": [2]}}, "checks[0].result.gives[0]", "an integer from 0 to 1, got 2"),
    ({**TABLE, "result": {**SEVERAL, "gives": [1, 0]}}, "checks[0].result.gives", "increasing order"),
    ({**TABLE, "result": {**SEVERAL, "gives": [0, 0]}}, "checks[0].result.gives", "distinct indexes"),
    ({**TABLE, "result": {**SEVERAL, "gives": []}}, "checks[0].result.gives", "a non-empty list"),
    ({**TABLE, "result": {"files": []}}, "checks[0].result.files", "a non-empty list"),
    ({**TABLE, "result": {"files": ["Desktop/a", "../b"]}}, "checks[0].result.files[1]", "inside the seat's home"),
    ({**TABLE, "result": {"files": [f"f{i}" for i in range(17)]}}, "checks[0].result.files",
     "has 17 items; the limit is 16"),
    ({**TABLE, "result": {"file": "a.xlsx", "gives": [0]}}, "checks[0].result.gives",
     "left out: only several files (files, fixtures) have gives"),
    ({**TABLE, "timeout": 0}, "checks[0].timeout", "a number of seconds above 0 and at most 600"),
    ({**TABLE, "timeout": 601}, "checks[0].timeout", "a number of seconds above 0 and at most 600"),
    ({**TABLE, "timeout": "60"}, "checks[0].timeout", "must be a number of seconds, got '60'"),
    ({**TABLE, "exists": False}, "checks[0].exists", "unknown spec key 'checks[0].exists'"),
])
def test_each_bad_metric_check_is_refused_naming_its_key_and_value(check: dict[str, Any], key: str,
                                                                    words: str) -> None:
    error = refused(check)
    assert error.details["key"] == key, error.message
    assert repr(key) in error.message and words in error.message, error.message


def test_a_misspelt_metric_carries_the_suggestion() -> None:
    assert refused({**TABLE, "metric": "compare_csvs"}).details["suggestion"] == "compare_csv"
    assert refused({**TABLE, "options": {"rulez": []}}).details["suggestion"] == "rules"


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_of_the_catalog_parses_with_each_of_its_options(name: str) -> None:
    info = METRICS[name]
    options = {key: [{"type": "sheet_data"}] if key == "rules" else True for key in info.options}
    check: dict[str, Any] = {"metric": name, "result": {"file": "out"}, "options": options}
    if info.expected:
        check["expected"] = {"value": "gold"}
    parsed = parse_spec(spec_with(check)).checks[0]
    assert (parsed.metric, set(parsed.options)) == (name, info.options)
    assert (parsed.expected is not None) == info.expected


def test_the_judges_user_is_checked_when_the_config_is_read() -> None:
    assert load_session_limits({}).judge_user == "nobody"
    assert load_session_limits({"judge_user": "nobody"}).judge_user == "nobody"
    for value, words in (("root", "names 'root', which is root (uid 0): a metric's judge parses what the model made"),
                         ("cud-no-such-user", "names a user 'cud-no-such-user' that does not exist"),
                         ("", "must be a non-empty string"), (65534, "must be a non-empty string")):
        with pytest.raises(ConfigError) as caught:
            load_session_limits({"judge_user": value})
        assert caught.value.details["key"] == "sessions.judge_user" and words in caught.value.message, caught.value


def test_a_metric_checks_fixtures_are_read_from_the_spec_folder_and_confined_to_it(tmp_path: Path) -> None:
    (tmp_path / "spec" / "fixtures").mkdir(parents=True)
    (tmp_path / "spec" / "fixtures" / "gold.txt").write_text("gold\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    spec_file = tmp_path / "spec" / "s.toml"
    spec_file.write_text('prompt = "p"\n[[checks]]\nmetric = "diff_text_file"\nresult = { fixture = "fixtures/gold.txt" }'
                         '\nexpected = { fixture = "../secret.txt" }\n')
    with pytest.raises(SpecError) as caught:
        load_spec(spec_file)
    assert caught.value.details["key"] == "checks[0].expected.fixture" and "outside the folder" in caught.value.message
    _spec, files = load_spec(spec_file, allow_outside=True)
    assert files == {"fixtures/gold.txt": b"gold\n", "../secret.txt": b"secret\n"}
