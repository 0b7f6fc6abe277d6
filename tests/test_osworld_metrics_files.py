"""cud's text, JSON and value metrics give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws text files, JSON objects and rule tables, and a changed copy (a line, a key, a value,
case, blanks) or an equal one; cud's port (cud/osworld/metrics/files.py) and OSWorld's function
(tests/support/osworld_reference.py) must score alike, or raise alike.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

words = st.text(alphabet="abAB \t'\"x1{}:,", max_size=8)
texts = st.lists(words, max_size=5).map("\n".join)
keys = st.sampled_from(["a", "b", "editor.fontSize", "ignore_list_order", "x y"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "ab", "__EVALUATION_FAILED__"]))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(keys, inner, max_size=3)), max_leaves=6)
objects = st.dictionaries(keys, json_values, max_size=4)


def both(name: str, *args: Any, **options: Any) -> tuple[tuple[str, object], tuple[str, object]]:
    return outcome(metric(name), *args, **options), outcome(reference(name), *args, **options)


def agree(name: str, *args: Any, **options: Any) -> None:
    ours, theirs = both(name, *args, **options)
    assert ours == theirs, f"{name}{args!r} {options!r}: cud {ours}, OSWorld {theirs}"


@st.composite
def changed(draw: st.DrawFn, text: str) -> str:
    """``text`` as it is, or changed a little: a line, case, blanks, or a new one altogether."""
    lines = text.split("\n")
    how = draw(st.sampled_from(["same", "line", "upper", "blanks", "new", "crlf"]))
    if how == "line":
        lines[draw(st.integers(0, len(lines) - 1))] = draw(words)
    elif how == "upper":
        lines = [line.upper() for line in lines]
    elif how == "blanks":
        lines = [f" {line}\t " for line in lines]
    elif how == "new":
        return draw(texts)
    elif how == "crlf":
        return "\r\n".join(lines)
    return "\n".join(lines)


@st.composite
def text_pairs(draw: st.DrawFn) -> tuple[str, str]:
    text = draw(texts)
    return draw(changed(text)), text


@SETTINGS
@given(text_pairs(), st.fixed_dictionaries({}, optional={"ignore_blanks": st.booleans(), "ignore_case": st.booleans()}))
def test_text_file_metrics_score_as_osworld(pair: tuple[str, str], options: dict[str, bool]) -> None:
    result, expected = pair
    with tempfile.TemporaryDirectory() as tmp:
        result_path, expected_path = Path(tmp, "result.txt"), Path(tmp, "gold.txt")
        result_path.write_bytes(result.encode())
        expected_path.write_bytes(expected.encode())
        agree("compare_text_file", str(result_path), str(expected_path), **options)
        agree("diff_text_file", str(result_path), str(expected_path))
        agree("compare_text_file", None, str(expected_path), **options)
        agree("diff_text_file", None, str(expected_path))
        agree("compare_text_file", str(Path(tmp, "absent")), str(expected_path))


@SETTINGS
@given(texts, st.fixed_dictionaries({}, optional={"expect": st.lists(st.sampled_from(["a", "^A", "x$", "[", "b+"]),
                                                                      max_size=3),
                                                  "unexpect": st.lists(st.sampled_from(["1", "B", "^$", "("]),
                                                                       max_size=2)}))
def test_check_list_scores_as_osworld(text: str, rules: dict[str, list[str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "list.txt")
        path.write_text(text)
        agree("check_list", str(path), rules)
        agree("check_list", None, rules)


@st.composite
def json_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """An object and the expected keys: a sub-table of it, with one key's value changed or a key added, or not."""
    actual = draw(objects)
    expected = {k: v for k, v in actual.items() if draw(st.booleans())}
    how = draw(st.sampled_from(["same", "value", "key"]))
    if how == "value":
        expected[draw(keys)] = draw(json_values)
    elif how == "key":
        expected[draw(keys.map(lambda k: k + "2"))] = draw(json_values)
    return actual, expected


@SETTINGS
@given(json_pairs(), st.booleans())
def test_check_json_settings_scores_as_osworld(pair: tuple[dict[str, Any], dict[str, Any]], broken: bool) -> None:
    actual, expected = pair
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "settings.json")
        path.write_text(json.dumps(actual)[: -1 if broken else None])
        agree("check_json_settings", str(path), {"expected": expected})
        agree("check_json_settings", None, {"expected": expected})
        agree("check_json_settings", str(Path(tmp, "absent.json")), {"expected": expected})


@SETTINGS
@given(json_pairs(), st.sampled_from(["object", "text", "quoted", "none", "list"]), st.booleans())
def test_check_direct_json_object_scores_as_osworld(pair: tuple[dict[str, Any], dict[str, Any]], form: str,
                                                    in_result: bool) -> None:
    actual, expected = pair
    result: Any = {"object": actual, "text": json.dumps(actual), "quoted": json.dumps(actual).replace('"', "'"),
                   "none": None, "list": list(actual)}[form]
    rules: dict[str, Any] = {"expected": expected}
    if in_result:
        rules["expect_in_result"] = True
    agree("check_direct_json_object", result, rules)


@SETTINGS
@given(json_values, json_values, st.fixed_dictionaries({}, optional={"type": st.sampled_from(["str", "list", "int"]),
                                                                      "ignore_case": st.booleans()}))
def test_value_metrics_score_as_osworld(result: Any, other: Any, options: dict[str, Any]) -> None:
    for expected in (result, other):
        agree("literal_match", result, expected, **options)
        agree("exact_match", result, {"expected": expected})
        agree("match_in_list", result, {"expected": expected})
        agree("is_in_list", result, {"expected": expected})
        agree("check_include_exclude", result, {"include": [expected], "exclude": [other]})
        agree("is_extension_installed", result, {"type": "contain", "expected": expected})
        agree("is_extension_installed", result, {"type": "not_contain", "expected": expected})
    agree("is_extension_installed", result, {"type": "other", "expected": other})


@SETTINGS
@given(texts, st.lists(st.sampled_from(["a", "b", "A", "\t", ""]), max_size=3),
       st.lists(st.sampled_from(["x", "1", "'"]), max_size=2))
def test_include_exclude_on_command_output_scores_as_osworld(output: str, include: list[str], exclude: list[str]) -> None:
    agree("check_include_exclude", output, {"include": include, "exclude": exclude})
    agree("check_include_exclude", None, {"include": include})
    agree("exact_match", output, {"expected": output.strip()})
    agree("is_extension_installed", output, {"type": "contain", "expected": include[0] if include else "a"})


def test_every_ported_metric_is_in_the_catalog_and_takes_osworlds_parameters() -> None:
    """The table names only catalogued metrics; each port's parameters are OSWorld's, so a spec's options fit both."""
    import inspect
    for name in FUNCTIONS:
        assert name in METRICS, name
        ours = list(inspect.signature(metric(name)).parameters)
        theirs = list(inspect.signature(reference(name)).parameters)
        assert ours == theirs, name
        # An option the catalog allows is one OSWorld's function can take: by name, or through its **options.
        takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(reference(name)).parameters.values())
        assert takes_any or METRICS[name].options <= set(theirs), name
