"""OSWorld's metrics on text, JSON and plain values: the port of part of its general.py and vscode.py.

From OSWorld's ``desktop_env/evaluators/metrics/general.py`` (check_include_exclude, exact_match,
match_in_list, literal_match, is_in_list, diff_text_file, check_list, check_direct_json_object)
and ``vscode.py`` (check_json_settings, compare_text_file, is_extension_installed), desktop-env
1.0.2, Apache-2.0. The logic is theirs, line for line; their prints and debug logging are left
out (they decide nothing), and so are the modules' other imports (pdfplumber, yaml, docx,
PyPDF2), which these functions never use. ``expected`` (``rules``) is OSWorld's rule getter's
value: a table such as ``{"expected": ...}``.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

__all__ = (
    "check_direct_json_object", "check_include_exclude", "check_json_settings", "check_list", "compare_text_file",
    "diff_text_file", "exact_match", "is_extension_installed", "is_in_list", "literal_match", "match_in_list",
)


def check_include_exclude(result: Any, rules: Any) -> float:
    if result is None:
        return 0.
    include = rules.get("include", [])
    exclude = rules.get("exclude", [])
    if all(r in result for r in include) and all(r not in result for r in exclude):
        return 1.
    return 0.


def exact_match(result: Any, rules: Any) -> float:
    expect = rules["expected"]
    return 1. if result == expect else 0.


def match_in_list(result: Any, rules: Any) -> float:
    expect = rules["expected"]
    return 1. if result in expect else 0.


def literal_match(result: Any, expected: Any, **options: Any) -> float:
    literal_type = options.get('type', 'str')
    if literal_type == 'str':
        ignore_case = options.get('ignore_case', False)
        score = str(result) == str(expected) if not ignore_case else str(result).lower() == str(expected).lower()
        return float(score)
    if literal_type == 'list':
        if type(result) not in [list, tuple] or type(expected) not in [list, tuple] or len(result) != len(expected):
            return .0
        ignore_case = options.get('ignore_case', False)
        result = [str(s) for s in result] if not ignore_case else [str(s).lower() for s in result]
        expected = [str(s) for s in expected] if not ignore_case else [str(s).lower() for s in expected]
        return float(result == expected)
    # OSWorld's message names the builtin `type`, not the option; the exception's class is what counts.
    raise NotImplementedError(f"Type {type} not supported")


def is_in_list(result: Any, rules: Any) -> float:
    expect = rules["expected"]
    return 1. if expect in result else 0.


def diff_text_file(result: str | None, expect: str) -> float:
    if result is None:
        return 0.
    with open(result) as f:
        result_lines: list[str] = f.read().splitlines()
    with open(expect) as f:
        expected_lines: list[str] = f.read().splitlines()
    return difflib.SequenceMatcher(a=result_lines, b=expected_lines).ratio()


def check_list(result: str | None, rules: Any) -> float:
    """Every ``expect`` regex found on some line of the file, no ``unexpect`` one on any."""
    if result is None:
        return 0.
    expect_patterns = [re.compile(ptt) for ptt in rules.get("expect", [])]
    unexpect_patterns = [re.compile(ptt) for ptt in rules.get("unexpect", [])]
    expect_metrics = [False] * len(expect_patterns)
    unexpect_metric = True
    with open(result) as f:
        for line in f:
            for i, r in enumerate(expect_patterns):
                expect_metrics[i] = expect_metrics[i] or (r.search(line) is not None)
            unexpect_metric = unexpect_metric and all(r.search(line) is None for r in unexpect_patterns)
    return float(all(expect_metrics) and unexpect_metric)


def check_direct_json_object(result: Any, rules: Any) -> float:
    """Compare a JSON object (or its text, with ' read as ") with ``rules["expected"]``, key by key."""
    if isinstance(result, str):
        result = json.loads(result.strip().replace("'", '"'))
    if result is None:
        return 0.
    try:
        expected_json = rules.get("expected", {})
        if expected_json:
            for _key, value in expected_json.items():
                if value == "__EVALUATION_FAILED__":
                    return 0.
    except Exception:
        return 0.
    try:
        if not rules.get("expect_in_result", False):
            return _json_equal_keys(result, rules["expected"])
        return _json_in_result(result, rules["expected"])
    except Exception:
        return 0.


def _json_equal_keys(result: Any, expected_json: Any) -> float:
    for key in expected_json.keys():
        expected_value = expected_json.get(key)
        actual_value = result.get(key)
        if expected_json.get("ignore_list_order", False):
            if sorted(expected_value) != sorted(result.get(key)):
                return 0.
        elif expected_value != actual_value:
            return 0.
    return 1.0


def _json_in_result(result: Any, expected_json: Any) -> float:
    for key in expected_json.keys():
        if isinstance(expected_json.get(key), list):
            # OSWorld logs result.get(key) here first, so a result without .get fails even for an empty list.
            result.get(key)
            flag = 0
            for each_expected_value in expected_json.get(key):
                if isinstance(result.get(key), list) and each_expected_value in result.get(key):
                    flag = 1
                    break
                if isinstance(result.get(key), str) and each_expected_value == result.get(key):
                    flag = 1
                    break
            if flag == 0:
                return 0.
        elif isinstance(expected_json.get(key), str):
            if expected_json.get(key) not in result.get(key):
                return 0.
        else:
            return 0.
    return 1.0


def check_json_settings(actual: str | None, expected: Any, **options: Any) -> float:
    """Every key of ``expected["expected"]`` in the JSON file ``actual``, with the same value."""
    if not actual:
        return 0.
    try:
        with open(actual) as f:
            data = json.load(f)
    except Exception:
        return 0.0
    expect = expected['expected']
    for key, value in expect.items():
        if key not in data or data[key] != value:
            return 0.0
    return 1.0


def compare_text_file(actual: str | None, expected: str, **options: Any) -> float:
    """The two files' text equal, with ``ignore_blanks`` (runs of blanks as one space) and ``ignore_case``."""
    if not actual:
        return 0.
    with open(actual) as f1:
        actual_text = f1.read()
    with open(expected) as f2:
        expected_text = f2.read()
    if options.get('ignore_blanks', False):
        actual_text = re.sub(r'[\t\n]', ' ', actual_text).strip()
        actual_text = re.sub(r'\s+', ' ', actual_text)
        expected_text = re.sub(r'[\t\n]', ' ', expected_text).strip()
        expected_text = re.sub(r'\s+', ' ', expected_text)
    if options.get('ignore_case', False):
        actual_text = actual_text.lower()
        expected_text = expected_text.lower()
    return 1.0 if actual_text == expected_text else 0.0


def is_extension_installed(actual: Any, rules: Any, **options: Any) -> float:
    if rules['type'] == 'contain':
        return 1.0 if rules['expected'] in actual else 0.0
    if rules['type'] == 'not_contain':
        return 1.0 if rules['expected'] not in actual else 0.0
    raise NotImplementedError
