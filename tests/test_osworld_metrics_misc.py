"""cud's small one-task metrics give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws the files and command outputs these metrics read (JSON objects and keybinding lists,
text holding numbers, timedatectl's lines, gsettings' lists, .docx paragraphs) and the rules the tasks
give; cud's port (cud/osworld/metrics/misc.py) and OSWorld's function
(tests/support/osworld_reference.py) must score alike, or raise alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import docx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ("check_json", "file_contains", "fuzzy_place_math", "check_json_keybindings", "compare_config",
         "compare_result_files", "is_utc_0", "check_gnome_favorite_apps")

words = st.text(alphabet="abAB {}\"x1.:,\n", max_size=10)
keys = st.sampled_from(["a", "b", "mode", "name"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["a", "smart", "b smart x"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                       st.dictionaries(keys, inner, max_size=3)), max_leaves=5)


def agree(name: str, *args: Any, **options: Any) -> None:
    ours, theirs = outcome(metric(name), *args, **options), outcome(reference(name), *args, **options)
    assert ours == theirs, f"{name}{args!r} {options!r}: cud {ours}, OSWorld {theirs}"


def test_each_metric_is_catalogued() -> None:
    for name in NAMES:
        assert name in FUNCTIONS and name in METRICS
    assert not METRICS["is_utc_0"].expected and METRICS["check_json"].options == frozenset()


rule_list = st.lists(st.fixed_dictionaries({
    "key": st.lists(keys, min_size=1, max_size=2),
    "method": st.sampled_from(["eq", "ne", "re", "gt"]),
    "ref": st.one_of(scalars, st.sampled_from(["\\bsmart\\b", "^a"]))}), max_size=2)


@SETTINGS
@given(st.one_of(st.dictionaries(keys, values, max_size=3), values), st.sampled_from(["json", "broken", "absent"]),
       st.fixed_dictionaries({}, optional={"expect": rule_list, "unexpect": rule_list}))
def test_check_json_scores_as_osworld(data: Any, how: str, rules: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "x.json")
        if how != "absent":
            path.write_text(json.dumps(data) + ("}" if how == "broken" else ""))
        agree("check_json", str(path), rules)
        agree("check_json", None, rules)


@SETTINGS
@given(words, st.lists(st.sampled_from(["a", "B", "x1", "\n", "{"]), max_size=3))
def test_text_metrics_score_as_osworld(text: str, wanted: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "x.txt")
        path.write_text(text)
        agree("file_contains", str(path), {"expected": wanted})
        agree("file_contains", None, {"expected": wanted})
        agree("file_contains", str(Path(tmp, "absent")), {"expected": wanted})
        agree("compare_config", str(path), {"expected": text})
        agree("compare_config", str(path), {"expected": text + "x"}, containment_ok=True)
        agree("compare_config", None, {"expected": text})


numbers = st.one_of(st.sampled_from(["42", "42.00001", "41.99999", "41.995", "4.2e1", " 42\n", "nan", "-0", "x"]), words)


@SETTINGS
@given(numbers, numbers, st.sampled_from(["", "The answer is ", "answer: "]))
def test_compare_result_files_scores_as_osworld(result: str, gold: str, prefix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = Path(tmp, "result.txt"), Path(tmp, "gold.txt")
        src.write_text(prefix + result)
        tgt.write_text(gold)
        agree("compare_result_files", str(src), str(tgt))
        agree("compare_result_files", None, str(tgt))


def test_compare_result_files_tolerance_is_osworld() -> None:
    """Numbers near the gold one, where OSWorld's 1e-4 tolerance decides (drawn rarely above)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = Path(tmp, "result.txt"), Path(tmp, "gold.txt")
        tgt.write_text("42")
        for result in ("41.99999", "41.995", "41.9999", "42.0001", "4.2e1"):
            src.write_text(result)
            agree("compare_result_files", str(src), str(tgt))


@SETTINGS
@given(st.sampled_from(["['a.desktop']", "[]", "{'x': 1}", "[1, 2]", "@as []", "('a', 'a')"]),
       st.lists(st.sampled_from(["google-chrome.desktop", "thunderbird.desktop", "vim.desktop"]), max_size=4),
       st.lists(st.sampled_from(["google-chrome.desktop", "thunderbird.desktop", "vim.desktop"]), max_size=3),
       st.sampled_from(["Time zone: Etc/UTC (UTC, +0000)", "Time zone: Asia/Tokyo (JST, +0900)", "+0000)", ""]),
       st.integers(0, 5))
def test_command_output_metrics_score_as_osworld(odd: str, apps: list[str], wanted: list[str], zone: str,
                                                 at: int) -> None:
    agree("check_gnome_favorite_apps", repr(apps), {"expected": wanted})
    agree("check_gnome_favorite_apps", repr(apps) + "\n", {"expected": wanted})
    agree("check_gnome_favorite_apps", odd, {"expected": wanted})
    lines = ["Local time: Thu", "Universal time: Thu", "RTC time: Thu", "", "NTP service: inactive"]
    lines.insert(at, zone)
    agree("is_utc_0", "\n".join(lines))
    agree("is_utc_0", "\n".join(lines) + "\n")


keybindings = st.lists(st.fixed_dictionaries({"key": st.sampled_from(["ctrl+j", "ctrl+f"]),
                                              "command": st.sampled_from(["a", "-list.find"])},
                                             optional={"when": st.sampled_from(["terminalFocus", "x"])}), max_size=3)


@SETTINGS
@given(st.one_of(keybindings, st.dictionaries(keys, scalars, max_size=2)), keybindings,
       st.sampled_from(["plain", "comment", "broken"]))
def test_check_json_keybindings_scores_as_osworld(data: Any, wanted: list[dict[str, str]], how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "keybindings.json")
        text = json.dumps(data)
        path.write_text({"plain": text, "comment": "// Place your key bindings\n" + text, "broken": text + "]"}[how])
        for one in wanted[:1] or [{"key": "ctrl+j"}]:
            agree("check_json_keybindings", str(path), {"expected": one})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["深圳市福田区", "深圳市南山区", "Place", "a b", ""]), max_size=4),
       st.lists(st.sampled_from(["深圳市福田区", "深圳市南山区x", "Plaza"]), min_size=1, max_size=3))
def test_fuzzy_place_math_scores_as_osworld(paragraphs: list[str], expected: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "AllLocations.docx")
        document = docx.Document()
        for text in paragraphs:
            document.add_paragraph(text)
        document.save(str(path))
        agree("fuzzy_place_math", str(path), {"expected": expected})
        agree("fuzzy_place_math", None, {"expected": expected})


def test_the_judge_runs_a_metric_without_an_expected_value() -> None:
    """is_utc_0 is the catalog's metric of the result alone: the judge calls it with the one argument."""
    lines = ["Local time: Thu", "Universal time: Thu", "RTC time: Thu"]
    for zone, score in (("Time zone: Etc/UTC (UTC, +0000)", 1.0), ("Time zone: Asia/Tokyo (JST, +0900)", 0.0)):
        request = {"metric": "is_utc_0", "result": {"value": "\n".join([*lines, zone])}, "expected": None,
                   "options": {}}
        done = subprocess.run([sys.executable, "-I", "-m", "cud.osworld.judge"], input=json.dumps(request),
                              capture_output=True, text=True, check=True, timeout=120)
        assert json.loads(done.stdout) == {"score": score}
