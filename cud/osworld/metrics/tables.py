"""OSWorld's spreadsheet metrics: compare_table (a list of rules over two workbooks) and compare_csv.

From OSWorld's ``desktop_env/evaluators/metrics/table.py``, desktop-env 1.0.2, Apache-2.0. The
logic is theirs, rule by rule, including where it answers 0 early (a sheet it cannot load) and
where it raises (an expected file that is not a workbook, a rule type it lacks); each rule is a
function here, and the logging is left out. The helpers are in :mod:`.workbooks` (sheet
addressing), :mod:`.sheets` and :mod:`.styles` (what a rule reads), :mod:`.rules` (value rules).
"""

from __future__ import annotations

import os.path
from collections.abc import Callable
from typing import Any

import openpyxl
import pandas as pd
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import MultiCellRange
from rapidfuzz import fuzz

from cud.osworld.metrics.rules import match_value_to_rule
from cud.osworld.metrics.sheets import load_charts, load_pivot_tables, load_sparklines, read_cell_value
from cud.osworld.metrics.styles import load_filters, load_rows_or_cols, load_xlsx_styles, read_cell_style
from cud.osworld.metrics.workbooks import load_sheet, parse_sheet_idx, safe_read_file

__all__ = ("compare_csv", "compare_table")

#: A rule's verdict, or None for OSWorld's early ``return 0.0`` (the whole comparison fails).
_Verdict = bool | None
_UNBOUND = object()


def compare_csv(result: str | None, expected: str | list[str], **options: Any) -> float:
    """1.0 if the result's lines equal one expected file's (``strict`` false: stripped; ``ignore_case``)."""
    if result is None:
        return 0.0
    try:
        result_lines = safe_read_file(result)
    except OSError:
        return 0.0
    expected_files = [expected] if isinstance(expected, str) else expected
    for expected_file in expected_files:
        try:
            expected_lines = safe_read_file(expected_file)
            current_result_lines: Any = result_lines
            current_expected_lines: Any = expected_lines
            if not options.get("strict", True):
                current_result_lines = map(str.strip, current_result_lines)
                current_expected_lines = map(str.strip, current_expected_lines)
            if options.get("ignore_case", False):
                current_result_lines = map(str.lower, current_result_lines)
                current_expected_lines = map(str.lower, current_expected_lines)
            if list(current_result_lines) == list(current_expected_lines):
                return 1.0
        except OSError:
            continue
    return 0.0


class _Books:
    """The two workbooks as OSWorld opens them: path, openpyxl's book, pandas' book, and their sheet names."""

    def __init__(self, result: str, expected: str | None) -> None:
        self.result = result
        self.expected = expected
        self.xl_result = openpyxl.load_workbook(filename=result)
        self.pd_result = pd.ExcelFile(result)
        self.result_names: list[str] = self.pd_result.sheet_names
        self.xl_expected: Any = None
        self.pd_expected: Any = None
        self.expected_names: list[str] | None = None
        #: OSWorld's `metric` variable as the last rule left it (sheet_fuzzy reads it for a type it lacks).
        self.last: Any = _UNBOUND

    def open_expected(self) -> None:
        if self.expected is not None:
            self.xl_expected = openpyxl.load_workbook(filename=self.expected)
            self.pd_expected = pd.ExcelFile(self.expected)
            self.expected_names = self.pd_expected.sheet_names

    def close(self) -> None:
        """Close pandas' books (OSWorld leaves them to the collector)."""
        for book in (self.pd_result, self.pd_expected):
            if book is not None:
                book.close()

    def idx(self, sheet_idx: int | str, result: Any, expected: Any) -> tuple[Any, str]:
        return parse_sheet_idx(sheet_idx, result, expected, self.result_names, self.expected_names)

    def xl(self, sheet_idx: int | str) -> tuple[Any, str]:
        return self.idx(sheet_idx, self.xl_result, self.xl_expected)

    def paths(self, sheet_idx: int | str) -> tuple[Any, str]:
        return self.idx(sheet_idx, self.result, self.expected)


def compare_table(result: str | None, expected: str | None = None, **options: Any) -> float:
    """1.0 if every rule of ``rules`` holds, in order (the first that fails decides), else 0.0."""
    if result is None:
        return 0.0
    if not os.path.exists(result):
        return 0.0
    try:
        books = _Books(result, expected)
    except Exception:
        return 0.0
    try:
        books.open_expected()
        passes = True
        for r in options["rules"]:
            check = _RULES.get(r["type"])
            if check is None:
                raise NotImplementedError("Unimplemented sheet check: {:}".format(r["type"]))
            metric = check(books, r)
            if metric is None:
                return 0.0
            books.last = metric
            passes = passes and metric
            if not passes:
                break
        return float(passes)
    finally:
        books.close()


def _sheet_name(books: _Books, r: dict[str, Any]) -> _Verdict:
    return books.result_names == books.expected_names


def _sheet_data(books: _Books, r: dict[str, Any]) -> _Verdict:
    error_limit = r.get("precision", 4)
    sheet1 = load_sheet(*books.idx(r["sheet_idx0"], books.pd_result, books.pd_expected))
    if sheet1 is None:
        return None
    sheet2 = load_sheet(*books.idx(r["sheet_idx1"], books.pd_result, books.pd_expected))
    sheet1 = sheet1.round(error_limit)
    sheet2 = sheet2.round(error_limit)
    equal: bool = sheet1.equals(sheet2)
    return equal


def _sheet_print(books: _Books, r: dict[str, Any]) -> _Verdict:
    sheet1 = load_sheet(*books.paths(r["sheet_idx0"]))
    if sheet1 is None:
        return None
    sheet2 = load_sheet(*books.paths(r["sheet_idx1"]))
    if r.get("ignore_case", False):
        sheet1 = [line.lower() for line in sheet1]
        sheet2 = [line.lower() for line in sheet2]
    equal: bool = sheet1 == sheet2
    return equal


def _sheet_fuzzy(books: _Books, r: dict[str, Any]) -> _Verdict:
    sheet1 = books.paths(r["sheet_idx0"])
    sheet2 = books.paths(r["sheet_idx1"])
    total_metric = True
    metric = books.last
    for rl in r["rules"]:
        for rng in MultiCellRange(rl["range"]):
            for cdn in rng.cells:
                coordinate = f"{get_column_letter(cdn[1])}{cdn[0]:d}"
                value1 = str(read_cell_value(*sheet1, coordinate))
                value2 = str(read_cell_value(*sheet2, coordinate))
                for rplc in rl.get("normalization", []):
                    value1 = value1.replace(rplc[0], rplc[1])
                    value2 = value2.replace(rplc[0], rplc[1])
                if "trim_leadings" in rl:
                    value1 = value1.lstrip(rl["trim_leadings"])
                    value2 = value2.lstrip(rl["trim_leadings"])
                if "trim_trailings" in rl:
                    value1 = value1.rstrip(rl["trim_trailings"])
                    value2 = value2.rstrip(rl["trim_trailings"])
                if "ignore_chars" in rl:
                    ignore_chars = set(rl["ignore_chars"])
                    value1 = "".join(ch for ch in value1 if ch not in ignore_chars)
                    value2 = "".join(ch for ch in value2 if ch not in ignore_chars)
                if rl.get("ignore_case", False):
                    value1 = value1.lower()
                    value2 = value2.lower()
                if rl["type"] == "includes":
                    metric = value2 in value1
                elif rl["type"] == "included_by":
                    metric = value1 in value2
                elif rl["type"] == "fuzzy_match":
                    metric = fuzz.ratio(value1, value2) >= rl.get("threshold", 85.0)
                elif rl["type"] == "exact_match":
                    metric = value1 == value2
                elif metric is _UNBOUND:
                    # OSWorld keeps the last verdict for another type (a cell's, else the rule before's);
                    # before any, its `metric` is unbound.
                    raise UnboundLocalError("cannot access local variable 'metric' where it is not associated with a value")
                total_metric = total_metric and metric
    return total_metric


def _sparkline(books: _Books, r: dict[str, Any]) -> _Verdict:
    equal: bool = load_sparklines(*books.paths(r["sheet_idx0"])) == load_sparklines(*books.paths(r["sheet_idx1"]))
    return equal


def _chart(books: _Books, r: dict[str, Any]) -> _Verdict:
    equal: bool = load_charts(*books.xl(r["sheet_idx0"]), **r) == load_charts(*books.xl(r["sheet_idx1"]), **r)
    return equal


def _style(books: _Books, r: dict[str, Any]) -> _Verdict:
    styles1 = load_xlsx_styles(*books.xl(r["sheet_idx0"]), books.paths(r["sheet_idx0"])[0], **r)
    styles2 = load_xlsx_styles(*books.xl(r["sheet_idx1"]), books.paths(r["sheet_idx1"])[0], **r)
    return styles1 == styles2


def _freeze(books: _Books, r: dict[str, Any]) -> _Verdict:
    sheet1 = load_sheet(*books.xl(r["sheet_idx0"]))
    if sheet1 is None:
        return None
    sheet2 = load_sheet(*books.xl(r["sheet_idx1"]))
    equal: bool = sheet1.freeze_panes == sheet2.freeze_panes
    return equal


def _zoom(books: _Books, r: dict[str, Any]) -> _Verdict:
    sheet = load_sheet(*books.xl(r["sheet_idx"]))
    if sheet is None:
        return None
    zoom_scale = sheet.sheet_view.zoomScale or 100.0
    return match_value_to_rule(zoom_scale, r)


def _data_validation(books: _Books, r: dict[str, Any]) -> _Verdict:
    sheet = load_sheet(*books.xl(r["sheet_idx"]))
    if sheet is None:
        return None
    data_validators = sheet.data_validations.dataValidation
    total_metric = len(data_validators) >= len(r["dv_props"])
    for dat_vldt in data_validators:
        metric = False
        for prpt in r["dv_props"]:
            metric = metric or all(match_value_to_rule(getattr(dat_vldt, attrbt), mr) for attrbt, mr in prpt.items())
            if metric:
                break
        total_metric = total_metric and metric
        if not total_metric:
            break
    return total_metric


def _row_props(books: _Books, r: dict[str, Any]) -> _Verdict:
    return load_rows_or_cols(*books.xl(r["sheet_idx0"]), obj="row", **r) == \
        load_rows_or_cols(*books.xl(r["sheet_idx1"]), obj="row", **r)


def _col_props(books: _Books, r: dict[str, Any]) -> _Verdict:
    return load_rows_or_cols(*books.xl(r["sheet_idx0"]), obj="column", **r) == \
        load_rows_or_cols(*books.xl(r["sheet_idx1"]), obj="column", **r)


def _filter(books: _Books, r: dict[str, Any]) -> _Verdict:
    return load_filters(*books.xl(r["sheet_idx0"]), **r) == load_filters(*books.xl(r["sheet_idx1"]), **r)


def _pivot_table(books: _Books, r: dict[str, Any]) -> _Verdict:
    return load_pivot_tables(*books.xl(r["sheet_idx0"]), **r) == load_pivot_tables(*books.xl(r["sheet_idx1"]), **r)


def _check_cell(books: _Books, r: dict[str, Any]) -> _Verdict:
    try:
        sheet = load_sheet(*books.xl(r["sheet_idx"]))
        if sheet is None:
            return None
        cell = sheet[r["coordinate"]]
        metric = True
        for prpt, rule in r["props"].items():
            if prpt == "value":
                try:
                    val = read_cell_value(*books.paths(r["sheet_idx"]), r["coordinate"])
                except Exception:
                    val = None
            else:
                try:
                    val = read_cell_style(prpt, cell)
                except Exception:
                    val = None
            metric = metric and match_value_to_rule(val, rule)
    except Exception:
        return None
    return metric


_RULES: dict[str, Callable[[_Books, dict[str, Any]], _Verdict]] = {
    "sheet_name": _sheet_name, "sheet_data": _sheet_data, "sheet_print": _sheet_print, "sheet_fuzzy": _sheet_fuzzy,
    "sparkline": _sparkline, "chart": _chart, "style": _style, "freeze": _freeze, "zoom": _zoom,
    "data_validation": _data_validation, "row_props": _row_props, "col_props": _col_props, "filter": _filter,
    "pivot_table": _pivot_table, "check_cell": _check_cell,
}
