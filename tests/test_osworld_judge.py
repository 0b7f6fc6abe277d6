"""The judge's protocol (cud/osworld/judge.py): one JSON request in, one JSON answer out, exit 0, OSWorld's verdicts.

The process itself (``python -I -m cud.osworld.judge``) is run for the cases that are about the
process (stdin, stdout, the exit status, the request's size) and for a few generated workbooks,
whose score must be OSWorld's own function's; the rest of the protocol is checked through
:func:`cud.osworld.judge.judge`, the same code without the process around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.daemon.spec.metric import _Gathered
from cud.errors import SpecError
from cud.osworld.convert import convert_osworld
from cud.osworld.judge import MAX_REQUEST_BYTES, _argument, judge
from cud.spec import parse_spec
from tests.support.osworld_books import Book, Sheet, book_pairs, table_rules, write_book
from tests.support.osworld_outcomes import collect, outcome
from tests.support.osworld_reference import FakeVm, reference, reference_getter


def run_judge(request: bytes | dict[str, Any]) -> dict[str, Any]:
    """The judge's one answer to ``request``, asserting it exits 0 and writes exactly one JSON line."""
    data = request if isinstance(request, bytes) else json.dumps(request).encode()
    done = subprocess.run([sys.executable, "-I", "-m", "cud.osworld.judge"], input=data, capture_output=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, done.stdout
    answer: dict[str, Any] = json.loads(lines[0])
    assert set(answer) in ({"score"}, {"error"}), answer
    return answer


@pytest.fixture
def book(tmp_path: Path) -> Path:
    path = tmp_path / "book.xlsx"
    write_book(Book([Sheet("Sheet1", {(r, c): r * c for r in range(1, 5) for c in range(1, 4)})]), path)
    return path


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_judge_process_scores_workbooks_as_osworld(data: st.DataObject) -> None:
    expected, result, _ = data.draw(book_pairs())
    rules = data.draw(st.lists(table_rules(result, expected), min_size=1, max_size=2))
    with tempfile.TemporaryDirectory() as tmp:
        result_path, expected_path = Path(tmp, "result.xlsx"), Path(tmp, "gold.xlsx")
        write_book(result, result_path)
        write_book(expected, expected_path)
        answer = run_judge({"metric": "compare_table", "result": {"path": str(result_path)},
                            "expected": {"path": str(expected_path)}, "options": {"rules": rules}})
        theirs = outcome(reference("compare_table"), str(result_path), str(expected_path), rules=rules)
        collect()
    if theirs[0] == "raised":
        assert "error" in answer and str(theirs[1]) in answer["error"], (answer, theirs)
    else:
        assert answer == {"score": theirs[1]}, rules


def test_a_file_that_is_not_a_workbook_is_an_error_naming_it(tmp_path: Path, book: Path) -> None:
    text = tmp_path / "gold.xlsx"
    text.write_text("plain text, not a zip\n")
    answer = run_judge({"metric": "compare_table", "result": {"path": str(book)}, "expected": {"path": str(text)},
                        "options": {"rules": [{"type": "sheet_name"}]}})
    assert "error" in answer and str(text) in answer["error"] and "compare_table raised" in answer["error"], answer
    # A result that is not a workbook is OSWorld's 0, not an error.
    answer = run_judge({"metric": "compare_table", "result": {"path": str(text)}, "expected": {"path": str(book)},
                        "options": {"rules": [{"type": "sheet_name"}]}})
    assert answer == {"score": 0.0}


def test_a_none_argument_is_none_to_the_metric(book: Path) -> None:
    """``{"none": why}`` is what OSWorld's getters give for a file that is not there: None."""
    request = {"metric": "compare_table", "result": {"none": "Desktop/out.xlsx does not exist"},
               "expected": {"path": str(book)}, "options": {"rules": [{"type": "sheet_name"}]}}
    assert run_judge(request) == {"score": reference("compare_table")(None, str(book), rules=[{"type": "sheet_name"}])}
    # literal_match compares str(None): None is passed through, not dropped.
    assert judge({"metric": "literal_match", "result": {"none": "x"}, "expected": {"value": "None"}}) == {"score": 1.0}
    assert judge({"metric": "literal_match", "result": {"none": "x"}, "expected": {"value": "none"},
                  "options": {"ignore_case": True}}) == {"score": 1.0}
    assert judge({"metric": "check_include_exclude", "result": {"none": "x"}, "expected": {"value": {}}}) == {"score": 0.0}


def test_an_unknown_metric_is_an_error_with_the_nearest_name() -> None:
    answer = run_judge({"metric": "compare_tabel", "result": {"value": 1}})
    assert "error" in answer and "'compare_tabel'" in answer["error"] and "did you mean 'compare_table'" in answer["error"]


def test_the_request_is_bounded_and_must_be_json() -> None:
    assert "larger than" in run_judge(b" " * (MAX_REQUEST_BYTES + 1))["error"]
    assert "not JSON" in run_judge(b"{metric")["error"]


@pytest.mark.parametrize(("request_", "wanted"), [
    ([], "must be a JSON object"),
    ({"metric": "exact_match", "result": {"value": 1}, "extra": 1}, "unknown request key(s) 'extra'"),
    ({"metric": 3, "result": {"value": 1}}, "metric must be"),
    ({"metric": "exact_match"}, "result is missing"),
    ({"metric": "exact_match", "result": {"file": "/x"}}, "result must be one of"),
    ({"metric": "exact_match", "result": {"value": 1, "none": ""}}, "result must be one of"),
    ({"metric": "exact_match", "result": {"path": "relative/x"}, "expected": {"value": {}}}, "result.path must be an absolute"),
    ({"metric": "exact_match", "result": {"value": 1}, "expected": {"path": 5}}, "expected.path must be an absolute"),
    ({"metric": "compare_csv", "result": {"value": 1}, "expected": {"paths": ["/a", "b"]}},
     "expected.paths must be a list of absolute paths (or null), not ['/a', 'b']"),
    ({"metric": "compare_csv", "result": {"value": 1}, "expected": {"paths": "/a"}}, "expected.paths must be a list"),
    ({"metric": "compare_csv", "result": {"value": 1}, "options": {"strikt": True}}, "'options.strikt'"),
    ({"metric": "compare_csv", "result": {"value": 1}, "options": []}, "options must be a JSON object"),
    ({"metric": "compare_table", "result": {"value": 1}, "options": {"rules": [{"type": "sheet_dat"}]}},
     "'options.rules[0].type'"),
])
def test_bad_requests_are_errors_naming_what_is_wrong(request_: Any, wanted: str) -> None:
    answer = judge(request_)
    assert "error" in answer and wanted in str(answer["error"]), answer


def test_a_metric_that_raises_is_an_error_naming_the_exception_and_files(tmp_path: Path) -> None:
    absent = tmp_path / "absent.txt"
    answer = judge({"metric": "diff_text_file", "result": {"path": str(absent)}, "expected": {"path": str(absent)}})
    assert str(answer.get("error", "")).startswith("diff_text_file raised FileNotFoundError"), answer
    assert f"result: {absent}; expected: {absent}" in str(answer["error"])
    # exact_match reads rules["expected"]: a value without it is OSWorld's KeyError.
    assert "exact_match raised KeyError" in str(judge({"metric": "exact_match", "result": {"value": "a"},
                                                       "expected": {"value": {}}})["error"])
    # An expected of null is no expected at all: the metric is called with the result alone.
    assert "exact_match raised TypeError" in str(judge({"metric": "exact_match", "result": {"value": "a"},
                                                        "expected": None})["error"])


def test_paths_are_a_list_to_the_metric_with_none_for_a_missing_file(tmp_path: Path) -> None:
    """``{"paths": [...]}`` is what OSWorld's multi file getters give: a list, None where a file is not there."""
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    one.write_text("a\n")
    two.write_text("b\n")
    assert judge({"metric": "compare_csv", "result": {"path": str(two)},
                  "expected": {"paths": [str(one), str(two)]}}) == {"score": 1.0}
    # None reaches the metric as None: compare_csv opens it, as OSWorld's does
    assert "raised TypeError" in str(judge({"metric": "compare_csv", "result": {"path": str(two)},
                                            "expected": {"paths": [str(one), None]}}).get("error"))
    answer = judge({"metric": "compare_image_list", "result": {"paths": [str(one), None]},
                    "expected": {"paths": [str(one), str(two)]}})
    assert f"(result: {one}; expected: {one}, {two})" in str(answer.get("error")), answer


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.integers(-1, n + 1), min_size=1, max_size=6), st.sets(st.integers(0, n - 1)))))
def test_a_multi_vm_file_reaches_the_metric_as_osworlds_get_vm_file_returns_it(
        case: tuple[int, list[int], set[int]]) -> None:
    """Differential: OSWorld's get_vm_file (multi, gives, some files missing) and cud's conversion, the daemon's
    copies and the judge's argument give the metric the same paths (by name) in the same shape."""
    n, gives, missing = case
    paths = [f"/home/user/Desktop/f{i}.txt" for i in range(n)]
    dests = [f"d{i}.txt" for i in range(n)]
    getter = {"type": "vm_file", "path": paths, "dest": dests, "multi": True, "gives": gives}
    with tempfile.TemporaryDirectory() as cache:
        env = FakeVm(files={p: b"x" for i, p in enumerate(paths) if i not in missing}, cache_dir=cache)
        theirs = reference_getter("file", "get_vm_file")(env, getter)
    task = {"id": "t", "instruction": "i", "config": [],
            "evaluator": {"func": "compare_csv", "result": getter, "expected": {"type": "rule", "rules": {}}}}
    if theirs == []:  # gives picks none: the converter refuses it
        with pytest.raises(SpecError, match="picks none"):
            convert_osworld(task, source="t.json", fetch=lambda url: b"")
        return
    converted = convert_osworld(task, source="t.json", fetch=lambda url: b"")
    arg = parse_spec(dict(converted)).checks[0].result
    assert arg is not None and arg.kind == "files"
    # The daemon's copies as _gather makes them: the name, the home path, the bytes (None: the file is missing).
    copies = tuple((name, path, None if i in missing else b"x")
                   for i, (path, name) in enumerate(zip(arg.value, arg.names, strict=True)))
    workdir = Path("/judge")
    ours, _ = _argument({"result": _Gathered("s", copies, arg.gives).arg(workdir, "result")}, "result")

    def by_name(value: Any) -> Any:
        if isinstance(value, list):
            return [by_name(item) for item in value]
        return None if value is None else Path(value).name

    assert by_name(ours) == by_name(theirs)


def test_scores_are_floats_and_metrics_called_as_osworld_calls_them(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    assert judge({"metric": "check_list", "result": {"path": str(notes)},
                  "expected": {"value": {"expect": ["^beta$"], "unexpect": ["gamma"]}}}) == {"score": 1.0}
    assert judge({"metric": "diff_text_file", "result": {"path": str(notes)}, "expected": {"path": str(notes)}}) == \
        {"score": 1.0}
    assert judge({"metric": "compare_text_file", "result": {"path": str(notes)}, "expected": {"path": str(notes)},
                  "options": {"ignore_case": True}}) == {"score": 1.0}
    assert judge({"metric": "is_in_list", "result": {"value": ["a", "b"]}, "expected": {"value": {"expected": "c"}}}) \
        == {"score": 0.0}
