"""cud's compare_table and compare_csv give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws workbooks (tests/support/osworld_books.py) and a copy changed in one thing (a cell,
a sheet's name, a style, freeze panes, zoom, a row, a filter, a chart...) or in nothing, and rules of
every type; cud's port (cud/osworld/metrics/tables.py) and OSWorld's function
(tests/support/osworld_reference.py) must score each pair alike, or raise alike.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.osworld.metrics import metric
from tests.support.osworld_books import Book, Sheet, book_pairs, table_rules, write_book
from tests.support.osworld_outcomes import collect, outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both(name: str, *args: Any, **options: Any) -> tuple[tuple[str, object], tuple[str, object]]:
    answers = outcome(metric(name), *args, **options), outcome(reference(name), *args, **options)
    if name == "compare_table":
        collect()
    return answers


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, Any, str, list[dict[str, Any]]]:
    expected, result, mutation = draw(book_pairs())
    rules = draw(st.lists(table_rules(result, expected), min_size=1, max_size=3))
    return result, expected, mutation, rules


@SETTINGS
@given(cases())
def test_compare_table_scores_as_osworld(case: tuple[Any, Any, str, list[dict[str, Any]]]) -> None:
    result, expected, mutation, rules = case
    with tempfile.TemporaryDirectory() as tmp:
        result_path, expected_path = Path(tmp, "result.xlsx"), Path(tmp, "gold.xlsx")
        write_book(result, result_path)
        write_book(expected, expected_path)
        ours, theirs = both("compare_table", str(result_path), str(expected_path), rules=rules)
    assert ours == theirs, f"changed: {mutation}; rules: {rules}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compare_table_rule_by_rule_on_a_changed_copy(data: st.DataObject) -> None:
    """One rule at a time, so a rule's verdict is not hidden behind an earlier one that failed."""
    expected, result, mutation = data.draw(book_pairs())
    with tempfile.TemporaryDirectory() as tmp:
        result_path, expected_path = Path(tmp, "result.xlsx"), Path(tmp, "gold.xlsx")
        write_book(result, result_path)
        write_book(expected, expected_path)
        for _ in range(4):
            rule = data.draw(table_rules(result, expected))
            ours, theirs = both("compare_table", str(result_path), str(expected_path), rules=[rule])
            assert ours == theirs, f"changed: {mutation}; rule: {rule}"


def test_compare_table_on_files_that_are_not_workbooks(tmp_path: Path) -> None:
    """A result that is missing or not a workbook scores 0; an expected one that is not a workbook raises."""
    text = tmp_path / "notes.xlsx"
    text.write_text("not a zip\n")
    rules = [{"type": "sheet_name"}]
    assert both("compare_table", None, str(text), rules=rules) == (("score", 0.0),) * 2
    assert both("compare_table", str(tmp_path / "absent.xlsx"), str(text), rules=rules) == (("score", 0.0),) * 2
    assert both("compare_table", str(text), str(text), rules=rules) == (("score", 0.0),) * 2
    good = tmp_path / "good.xlsx"
    write_book(Book([Sheet("Sheet1", {(r, c): r * c for r in range(1, 5) for c in range(1, 4)})]), good)
    ours, theirs = both("compare_table", str(good), str(text), rules=rules)
    assert ours == theirs and ours[0] == "raised"
    assert both("compare_table", str(good), None, rules=rules) == (("score", 0.0),) * 2
    assert both("compare_table", str(good), str(good), rules=[{"type": "no_such"}]) == (("raised", "NotImplementedError"),) * 2
    assert both("compare_table", str(good), str(good), rules=[{"type": "sheet_data", "sheet_idx0": "XX0",
                                                               "sheet_idx1": 0}]) == (("raised", "ValueError"),) * 2


lines = st.lists(st.text(alphabet="aAbB ,\t1", max_size=6), max_size=5)


@st.composite
def csv_pairs(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """Expected files' lines, and the result's: new ones, or the first file's as they are, in upper case or padded."""
    expected = draw(st.lists(lines, min_size=1, max_size=3))
    change = draw(st.sampled_from(["new", "same", "upper", "padded"]))
    result = {"new": draw(lines), "same": expected[0], "upper": [line.upper() for line in expected[0]],
              "padded": [f" {line}\t" for line in expected[0]]}[change]
    return result, expected


@SETTINGS
@given(csv_pairs(), st.fixed_dictionaries({}, optional={"strict": st.booleans(), "ignore_case": st.booleans()}),
       st.booleans())
def test_compare_csv_scores_as_osworld(pair: tuple[list[str], list[list[str]]], options: dict[str, bool],
                                       as_list: bool) -> None:
    result, expected = pair
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp, "result.csv")
        result_path.write_text("\n".join(result))
        paths = []
        for i, text in enumerate(expected):
            path = Path(tmp, f"gold{i}.csv")
            # Every other file in latin-1, so the encodings OSWorld tries in turn are exercised too.
            path.write_bytes("\n".join(text).encode("latin-1" if i % 2 else "utf-8"))
            paths.append(str(path))
        paths.append(str(Path(tmp, "absent.csv")))
        gold: str | list[str] = paths if as_list else paths[0]
        ours, theirs = both("compare_csv", str(result_path), gold, **options)
        assert ours == theirs
        assert both("compare_csv", None, gold, **options) == (("score", 0.0),) * 2
        assert both("compare_csv", str(Path(tmp, "absent.csv")), gold, **options) == (("score", 0.0),) * 2
