"""Generated workbooks for the OSWorld metric tests: a small model of one, Hypothesis strategies, and a writer.

A :class:`Book` is a few sheets of a few cells with the things compare_table's rules look at
(styles, freeze panes, zoom, row heights, column widths, a data validation, a conditional format,
an autofilter, a chart). :func:`book_pairs` draws a book and a copy changed in one such thing (or
not at all), so a differential test sees both agreeing and disagreeing pairs; :func:`write_book`
saves one with openpyxl, and the ``BOOK-SHEET.csv`` files OSWorld's ``sheet_print`` rule reads.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from openpyxl import Workbook
from openpyxl.chart import BarChart, Reference
from openpyxl.formatting.rule import CellIsRule, FormulaRule
from openpyxl.styles import Font, PatternFill
from openpyxl.worksheet.datavalidation import DataValidation

__all__ = ("MUTATIONS", "Book", "Sheet", "book_pairs", "table_rules", "write_book")

ROWS, COLS = 4, 3
SHEET_NAMES = ("Sheet1", "Data", "Sum", "x y")
NUMBER_FORMATS = ("General", "0.00", "0%", "#,##0")
COLOURS = ("FF000000", "FFFF0000", "FF00FF00")
MUTATIONS = ("none", "cell", "sheet_name", "style", "number_format", "freeze", "zoom", "row", "column", "filter",
             "chart", "validation", "order")

values = st.one_of(
    st.none(), st.integers(-1000, 1000),
    st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 5)),
    st.text(alphabet="abcAB xy,.-", max_size=6),
)


@dataclasses.dataclass
class Sheet:
    name: str
    cells: dict[tuple[int, int], Any]
    bold: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    colour: dict[tuple[int, int], str] = dataclasses.field(default_factory=dict)
    number_format: dict[tuple[int, int], str] = dataclasses.field(default_factory=dict)
    fill: dict[tuple[int, int], str] = dataclasses.field(default_factory=dict)
    freeze: str | None = None
    zoom: int | None = None
    row_height: dict[int, float] = dataclasses.field(default_factory=dict)
    hidden_rows: set[int] = dataclasses.field(default_factory=set)
    col_width: dict[str, float] = dataclasses.field(default_factory=dict)
    validation: str | None = None  # a list validation's formula1 over B2:B4
    cond_gt: int | None = None  # a cellIs greaterThan rule over A1:C4 that makes cells bold
    cond_expr: str | None = None  # an expression rule over A1:C4
    filter_ref: str | None = None
    chart_title: str | None = None


@dataclasses.dataclass
class Book:
    sheets: list[Sheet]


@st.composite
def sheets(draw: st.DrawFn, name: str) -> Sheet:
    coords = [(r, c) for r in range(1, ROWS + 1) for c in range(1, COLS + 1)]
    cells = {rc: draw(values) for rc in coords}
    some = st.sampled_from(coords)
    return Sheet(
        name=name, cells=cells,
        bold=set(draw(st.lists(some, max_size=3))),
        colour=draw(st.dictionaries(some, st.sampled_from(COLOURS), max_size=2)),
        number_format=draw(st.dictionaries(some, st.sampled_from(NUMBER_FORMATS), max_size=2)),
        fill=draw(st.dictionaries(some, st.sampled_from(COLOURS), max_size=2)),
        freeze=draw(st.sampled_from([None, "A2", "B2", "B3"])),
        zoom=draw(st.sampled_from([None, 75, 100, 150])),
        row_height=draw(st.dictionaries(st.integers(1, ROWS), st.sampled_from([12.0, 20.0, 30.5]), max_size=2)),
        hidden_rows=set(draw(st.lists(st.integers(1, ROWS), max_size=1))),
        col_width=draw(st.dictionaries(st.sampled_from("ABC"), st.sampled_from([8.0, 15.5, 30.0]), max_size=2)),
        validation=draw(st.sampled_from([None, '"a,b,c"', '"x,y"'])),
        cond_gt=draw(st.sampled_from([None, 0, 5, 100])),
        cond_expr=draw(st.sampled_from([None, "$A$1>0", 'ISNUMBER(A1)', "A1>$B$2"])),
        filter_ref=draw(st.sampled_from([None, "A1:C4", "A1:B3"])),
        chart_title=draw(st.sampled_from([None, "Sales", "Costs"])),
    )


@st.composite
def books(draw: st.DrawFn) -> Book:
    names = draw(st.lists(st.sampled_from(SHEET_NAMES), min_size=1, max_size=2, unique=True))
    return Book([draw(sheets(name)) for name in names])


@st.composite
def book_pairs(draw: st.DrawFn) -> tuple[Book, Book, str]:
    """A book, a copy changed in one thing (:data:`MUTATIONS`; "none" for an equal copy), and what changed."""
    book = draw(books())
    other = Book([dataclasses.replace(s, cells=dict(s.cells), bold=set(s.bold), colour=dict(s.colour),
                                      number_format=dict(s.number_format), fill=dict(s.fill),
                                      row_height=dict(s.row_height), hidden_rows=set(s.hidden_rows),
                                      col_width=dict(s.col_width)) for s in book.sheets])
    mutation = draw(st.sampled_from(MUTATIONS))
    sheet = draw(st.sampled_from(other.sheets))
    rc = (draw(st.integers(1, ROWS)), draw(st.integers(1, COLS)))
    if mutation == "cell":
        sheet.cells[rc] = draw(values)
    elif mutation == "sheet_name":
        sheet.name = draw(st.sampled_from([n for n in (*SHEET_NAMES, "Renamed") if n not in
                                           {s.name for s in other.sheets}]))
    elif mutation == "style":
        sheet.bold ^= {rc}
    elif mutation == "number_format":
        sheet.number_format[rc] = draw(st.sampled_from(NUMBER_FORMATS))
    elif mutation == "freeze":
        sheet.freeze = draw(st.sampled_from([None, "A2", "C2"]))
    elif mutation == "zoom":
        sheet.zoom = draw(st.sampled_from([None, 50, 120]))
    elif mutation == "row":
        sheet.row_height[rc[0]] = draw(st.sampled_from([15.0, 40.0]))
    elif mutation == "column":
        sheet.col_width["B"] = draw(st.sampled_from([9.0, 25.0]))
    elif mutation == "filter":
        sheet.filter_ref = draw(st.sampled_from([None, "A1:C3"]))
    elif mutation == "chart":
        sheet.chart_title = draw(st.sampled_from([None, "Other"]))
    elif mutation == "validation":
        sheet.validation = draw(st.sampled_from([None, '"q,r"']))
    elif mutation == "order":
        other.sheets.reverse()
    return book, other, mutation


def write_book(book: Book, path: Path) -> None:
    """Save ``book`` as an xlsx at ``path``, with ``STEM-SHEET.csv`` beside it for each sheet (its printed rows)."""
    workbook = Workbook()
    workbook.remove(workbook.active)
    for model in book.sheets:
        ws = workbook.create_sheet(model.name)
        for (r, c), value in model.cells.items():
            if value is not None:
                ws.cell(row=r, column=c, value=value)
        for (r, c) in model.bold:
            ws.cell(row=r, column=c).font = Font(bold=True, color=model.colour.get((r, c)))
        for (r, c), colour in model.colour.items():
            if (r, c) not in model.bold:
                ws.cell(row=r, column=c).font = Font(color=colour)
        for (r, c), fmt in model.number_format.items():
            ws.cell(row=r, column=c).number_format = fmt
        for (r, c), colour in model.fill.items():
            ws.cell(row=r, column=c).fill = PatternFill("solid", fgColor=colour)
        ws.freeze_panes = model.freeze
        if model.zoom is not None:
            ws.sheet_view.zoomScale = model.zoom
        for row, height in model.row_height.items():
            ws.row_dimensions[row].height = height
        for row in model.hidden_rows:
            ws.row_dimensions[row].hidden = True
        for col, width in model.col_width.items():
            ws.column_dimensions[col].width = width
        if model.validation is not None:
            dv = DataValidation(type="list", formula1=model.validation, allow_blank=True)
            dv.add("B2:B4")
            ws.add_data_validation(dv)
        if model.cond_gt is not None:
            ws.conditional_formatting.add("A1:C4", CellIsRule(operator="greaterThan", formula=[str(model.cond_gt)],
                                                              font=Font(bold=True, color="FF0000FF")))
        if model.cond_expr is not None:
            ws.conditional_formatting.add("A1:C4", FormulaRule(formula=[model.cond_expr], font=Font(italic=True)))
        if model.filter_ref is not None:
            ws.auto_filter.ref = model.filter_ref
            ws.auto_filter.add_filter_column(0, ["a", "b"])
        if model.chart_title is not None:
            chart = BarChart()
            chart.title = model.chart_title
            chart.add_data(Reference(ws, min_col=2, min_row=1, max_row=ROWS), titles_from_data=True)
            chart.set_categories(Reference(ws, min_col=1, min_row=2, max_row=ROWS))
            ws.add_chart(chart, "E2")
        with open(path.with_name(f"{path.stem}-{model.name}.csv"), "w", newline="") as f:
            writer = csv.writer(f)
            for r in range(1, ROWS + 1):
                writer.writerow(["" if model.cells[(r, c)] is None else model.cells[(r, c)] for c in range(1, COLS + 1)])
    workbook.save(path)


STYLE_PROPS = ("number_format", "font_name", "font_color", "font_bold", "font_italic", "font_size", "fill_type",
               "bgcolor", "hyperlink", "merge")


@st.composite
def sheet_indexes(draw: st.DrawFn, result: Book, expected: Book, side: str) -> int | str:
    """A rule's sheet index: mostly one that names a sheet of ``side`` ("R" or "E"), sometimes one that does not."""
    book = result if side == "R" else expected
    return draw(st.one_of(
        st.integers(0, len(book.sheets) - 1).map(lambda i: i if side == "R" else f"EI{i}"),
        st.integers(0, len(book.sheets) - 1).map(lambda i: f"{side}I{i}"),
        st.sampled_from([s.name for s in book.sheets]).map(lambda n: f"{side}N{n}"),
        st.sampled_from([5, "RI7", "EI3", "ENMissing", "RNMissing"]),
    ))


@st.composite
def table_rules(draw: st.DrawFn, result: Book, expected: Book) -> dict[str, Any]:
    """One compare_table rule over ``result`` (sheet_idx0) and ``expected`` (sheet_idx1), of any type cud lacks none of."""
    kind = draw(st.sampled_from(["sheet_name", "sheet_data", "sheet_print", "sheet_fuzzy", "sparkline", "chart",
                                 "style", "freeze", "zoom", "data_validation", "row_props", "col_props", "filter",
                                 "pivot_table", "check_cell"]))
    rule: dict[str, Any] = {"type": kind}
    # Mostly the same sheet on both sides (by position or by name), so a rule sees the one change.
    shared = [i for i in range(min(len(result.sheets), len(expected.sheets)))]
    same = draw(st.sampled_from(shared).flatmap(lambda i: st.sampled_from([
        (i, f"EI{i}"), (f"RI{i}", f"EI{i}"), (f"RN{result.sheets[i].name}", f"EN{expected.sheets[i].name}")])))
    pair = dict(zip(("sheet_idx0", "sheet_idx1"), draw(st.one_of(
        st.just(same), st.tuples(sheet_indexes(result, expected, "R"), sheet_indexes(result, expected, "E")))),
        strict=True))
    one = {"sheet_idx": draw(sheet_indexes(result, expected, "R"))}
    if kind == "sheet_data":
        rule.update(pair, **draw(st.fixed_dictionaries({}, optional={"precision": st.integers(0, 4)})))
    elif kind == "sheet_print":
        rule.update(pair, **draw(st.fixed_dictionaries({}, optional={"ignore_case": st.booleans()})))
    elif kind == "sheet_fuzzy":
        fuzzy = st.fixed_dictionaries(
            {"range": st.sampled_from([["A1:B2"], ["A1:C4"], ["B2:C3", "A4"]]),
             "type": st.sampled_from(["includes", "included_by", "fuzzy_match", "exact_match"])},
            optional={"threshold": st.sampled_from([50, 85, 100]), "ignore_case": st.booleans(),
                      "ignore_chars": st.sampled_from([" ", ",."]), "trim_leadings": st.just(" -"),
                      "trim_trailings": st.just(". "), "normalization": st.just([["a", "A"]])})
        rule.update(pair, rules=draw(st.lists(fuzzy, min_size=1, max_size=2)))
    elif kind == "chart":
        rule.update(pair, chart_props=draw(st.lists(st.sampled_from(["title", "legend", "anchor", "width", "height",
                                                                     "type", "direction", "xtitle", "ytitle"]),
                                                    max_size=4, unique=True)))
    elif kind == "style":
        rule.update(pair, props=draw(st.lists(st.sampled_from(STYLE_PROPS), min_size=1, max_size=4, unique=True)))
    elif kind == "zoom":
        rule.update(one, method=draw(st.sampled_from(["eq", "ge", "lt", "approx:10"])),
                    ref=draw(st.sampled_from([75, 100.0, 150])))
    elif kind == "data_validation":
        prop = st.fixed_dictionaries({}, optional={
            "type": st.just({"method": "eq", "ref": "list"}),
            "formula1": st.sampled_from([{"method": "eq", "ref": '"a,b,c"'}, {"method": "re", "ref": "x"}]),
            "allow_blank": st.just({"method": "eq", "ref": True})})
        rule.update(one, dv_props=draw(st.lists(prop, max_size=2)))
    elif kind == "row_props":
        rule.update(pair, props=draw(st.lists(st.sampled_from(["height", "hidden", "collapsed"]), max_size=2,
                                              unique=True)))
    elif kind == "col_props":
        rule.update(pair, props=draw(st.lists(st.sampled_from(["width", "hidden", "min", "max"]), max_size=2,
                                              unique=True)))
    elif kind == "pivot_table":
        rule.update(pair, pivot_props=["name", "location"])
    elif kind == "check_cell":
        checks = st.sampled_from([
            ("value", {"method": "eq", "ref": 1.0}), ("value", {"method": "re", "ref": "a"}),
            ("value", {"method": "approx:0.5", "ref": 3}), ("font_bold", {"method": "eq", "ref": True}),
            ("number_format", {"method": "eq", "ref": "0.00"}), ("font_color", {"method": "eq", "ref": "FFFF0000"}),
            ("value", {"method": "range.te", "ref": [0, 100]}), ("value", {"method": "str_set_eq", "ref": ["a"]}),
            ("value", {"method": "ne", "ref": "zzz"}), ("font_bold", {"method": "ne", "ref": True}),
            ("merge", {"method": "eq", "ref": False}),
        ])
        rule.update(one, coordinate=draw(st.sampled_from(["A1", "B2", "C4", "D9"])),
                    props=dict(draw(st.lists(checks, min_size=1, max_size=2))))
    elif kind != "sheet_name":
        rule.update(pair)
    return rule
