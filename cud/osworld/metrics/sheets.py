"""What compare_table reads of a workbook beyond pandas: cell values from the XML, sparklines, charts, pivots.

From OSWorld's ``desktop_env/evaluators/metrics/utils.py`` (``read_cell_value``,
``load_sparklines``, ``load_charts``, ``load_pivot_tables``), desktop-env 1.0.2, Apache-2.0; the
logic is theirs, the debug logging left out.
"""

from __future__ import annotations

import itertools
import os
import zipfile
from typing import Any

import lxml.cssselect
import lxml.etree
import xmltodict
from openpyxl.utils import coordinate_to_tuple

__all__ = ("load_charts", "load_pivot_tables", "load_sparklines", "read_cell_value")

_xlsx_namespaces = [
    ("oo", "http://schemas.openxmlformats.org/spreadsheetml/2006/main"),
    ("x14", "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"),
    ("xm", "http://schemas.microsoft.com/office/excel/2006/main"),
]
_xlsx_ns_mapping = dict(_xlsx_namespaces)
_xlsx_ns_imapping: dict[str, str | None] = {uri: prefix for prefix, uri in _xlsx_namespaces}
_xlsx_ns_imapping["http://schemas.openxmlformats.org/spreadsheetml/2006/main"] = None
_sheet_name_selector = lxml.cssselect.CSSSelector("oo|sheets>oo|sheet", namespaces=_xlsx_ns_mapping)
_sparklines_selector = lxml.cssselect.CSSSelector("x14|sparkline", namespaces=_xlsx_ns_mapping)
_shared_str_selector = lxml.cssselect.CSSSelector("oo|sst>oo|si", namespaces=_xlsx_ns_mapping)
_shared_str_value_selector = lxml.cssselect.CSSSelector("oo|t", namespaces=_xlsx_ns_mapping)


def load_sparklines(xlsx_file: Any, sheet_name: str) -> dict[str, str]:
    """The sheet's sparklines, ``{"F3": "Sheet1!C3:E3"}``, read from the file's XML."""
    try:
        with zipfile.ZipFile(xlsx_file, "r") as z_f:
            with z_f.open("xl/workbook.xml") as f:
                workbook_database = lxml.etree.fromstring(f.read())
                sheets = _sheet_name_selector(workbook_database)
                sheet_names = {sh.get("name"): sh.get("sheetId") for sh in sheets}
            with z_f.open(f"xl/worksheets/sheet{sheet_names[sheet_name]}.xml") as f:
                sheet = lxml.etree.fromstring(f.read())
                sparklines = _sparklines_selector(sheet)
    except zipfile.BadZipFile:
        return {}
    sparklines_dict: dict[str, str] = {}
    for sp_l in sparklines:
        sparkline_xml = lxml.etree.tostring(sp_l, encoding="unicode")
        sparkline = xmltodict.parse(sparkline_xml, process_namespaces=True, namespaces=_xlsx_ns_imapping)
        sparklines_dict[sparkline["x14:sparkline"]["xm:sqref"]] = sparkline["x14:sparkline"]["xm:f"]
    return sparklines_dict


def _title(axis_or_chart: Any) -> Any:
    return axis_or_chart.title.tx.rich.p[0].r[0].t


def load_charts(xlsx_file: Any, sheet_name: str, **options: Any) -> dict[str, Any]:
    """The sheet's charts by their data source: ``{"values,categories;...": {prop: value}}``.

    ``chart_props``: title, legend, anchor, width, height, type, direction, xtitle, ytitle, ztitle.
    """
    try:
        worksheet = xlsx_file[sheet_name]
    except KeyError:
        return {}
    charts = worksheet._charts
    chart_set: dict[str, Any] = {}
    chart_props = set(options["chart_props"]) if "chart_props" in options else set()
    for ch in charts:
        series_list: list[str] = []
        for ser in ch.series:
            if hasattr(ser.val, "numRef") and hasattr(ser.val.numRef, "f"):
                value_str = ser.val.numRef.f
            elif hasattr(ser.val, "strRef") and hasattr(ser.val.strRef, "f"):
                value_str = ser.val.strRef.f
            else:
                value_str = ""
            if hasattr(ser.cat, "numRef") and hasattr(ser.cat.numRef, "f"):
                categ_str = ser.cat.numRef.f
            elif hasattr(ser.cat, "strRef") and hasattr(ser.cat.strRef, "f"):
                categ_str = ser.cat.strRef.f
            else:
                categ_str = ""
            series_list.append(f"{value_str},{categ_str}")
        series = ";".join(series_list)

        info: dict[str, Any] = {}
        if "title" in chart_props:
            try:
                info["title"] = _title(ch)
            except Exception:
                info["title"] = None
        if "legend" in chart_props:
            info["legend"] = ch.legend.position if ch.legend is not None else None
        if "anchor" in chart_props:
            # OSWorld's own list: the anchor's to.row twice, from.row never.
            info["anchor"] = [ch.anchor.editAs, ch.anchor._from.col, ch.anchor.to.row, ch.anchor.to.col, ch.anchor.to.row]
        if "width" in chart_props:
            info["width"] = ch.width
        if "height" in chart_props:
            info["height"] = ch.height
        if "type" in chart_props:
            info["type"] = ch.tagname
        if "direction" in chart_props:
            info["direction"] = ch.barDir
        for prop, axis in (("xtitle", "x_axis"), ("ytitle", "y_axis"), ("ztitle", "z_axis")):
            if prop in chart_props:
                try:
                    info[prop] = _title(getattr(ch, axis))
                except Exception:
                    info[prop] = None
        chart_set[series] = info
    return chart_set


def load_pivot_tables(xlsx_file: Any, sheet_name: str, **options: Any) -> dict[str, Any]:
    """The sheet's pivot tables by their source: ``{"type;(r, c):(r, c);sheet": {prop: value}}``.

    ``pivot_props``: name, show_total, show_empty_row, show_empty_col, show_headers, location,
    selection (``ordered``: as lists), filter, col_fields, row_fields, data_fields (``data_fields_name``).
    """
    try:
        worksheet = xlsx_file[sheet_name]
    except KeyError:
        return {}
    pivots = worksheet._pivots
    pivot_set: dict[str, Any] = {}
    pivot_props = set(options.get("pivot_props", []))
    for pvt in pivots:
        raw_selection = [[(itm.h, itm.x) for itm in f.items if itm.x is not None] for f in pvt.pivotFields]
        raw__selection = list(itertools.dropwhile(lambda r: len(r) == 0, raw_selection))
        left_bias = len(raw_selection) - len(raw__selection)
        selection = list(itertools.dropwhile(lambda r: len(r) == 0, reversed(raw__selection)))[::-1]
        right_bias = len(raw__selection) - len(selection)
        cache_source = pvt.cache.cacheSource
        first, last = cache_source.worksheetSource.ref.split(":")
        cell_range1 = coordinate_to_tuple(first)
        cell_range1 = (cell_range1[0], cell_range1[1] + left_bias)
        cell_range2 = coordinate_to_tuple(last)
        cell_range2 = (cell_range2[0], cell_range2[1] - right_bias)
        source = f"{cache_source.type};{cell_range1}:{cell_range2};{cache_source.worksheetSource.sheet}"

        info: dict[str, Any] = {}
        if "name" in pivot_props:
            info["name"] = pvt.name
        if "show_total" in pivot_props:
            info["show_total"] = pvt.visualTotals
        if "show_empty_row" in pivot_props:
            info["show_empty_row"] = pvt.showEmptyRow
        if "show_empty_col" in pivot_props:
            info["show_empty_col"] = pvt.showEmptyCol
        if "show_headers" in pivot_props:
            info["show_headers"] = pvt.showHeaders
        if "location" in pivot_props:
            info["location"] = pvt.location
        if "filter" in pivot_props or "selection" in pivot_props:
            info["selection"] = selection if "ordered" in pivot_props else [set(r) for r in selection]
        if "filter" in pivot_props:
            info["filter_fields"] = {f.fld for f in pvt.pageFields}
        if "col_fields" in pivot_props:
            info["col_fields"] = [f.x - left_bias for f in pvt.colFields]
        if "row_fields" in pivot_props:
            info["row_fields"] = [f.x - left_bias for f in pvt.rowFields]
        if "data_fields" in pivot_props:
            info["data_fields"] = [
                "{:d};{:};{:};{:}".format(f.fld - left_bias, f.name if "data_fields_name" in pivot_props else "",
                                          f.subtotal, f.showDataAs)
                for f in pvt.dataFields]
        pivot_set[source] = info
    return pivot_set


def read_cell_value(xlsx_file: Any, sheet_name: str, coordinate: str) -> Any:
    """The cell's value as stored in the file's XML (a float, a string, an error's text), None if absent."""
    if not os.path.exists(xlsx_file):
        return None
    try:
        with zipfile.ZipFile(xlsx_file, "r") as z_f:
            try:
                with z_f.open("xl/sharedStrings.xml") as f:
                    shared_str_xml = lxml.etree.fromstring(f.read())
                    str_elements = _shared_str_selector(shared_str_xml)
                    shared_strs = ["".join(t.text for t in _shared_str_value_selector(elm)) for elm in str_elements]
            except Exception:
                shared_strs = []
            with z_f.open("xl/workbook.xml") as f:
                workbook_database = lxml.etree.fromstring(f.read())
                sheets = _sheet_name_selector(workbook_database)
                sheet_names = {sh.get("name"): sh.get("sheetId") for sh in sheets}
            with z_f.open(f"xl/worksheets/sheet{sheet_names[sheet_name]}.xml") as f:
                sheet = lxml.etree.fromstring(f.read())
                cells = lxml.cssselect.CSSSelector(f'oo|row>oo|c[r="{coordinate}"]',
                                                   namespaces=_xlsx_ns_mapping)(sheet)
                if len(cells) == 0:
                    return None
                element = cells[0]
    except Exception:  # OSWorld: a bad zip, a sheet not there, anything else: None
        return None
    cell = xmltodict.parse(lxml.etree.tostring(element, encoding="unicode"), process_namespaces=True,
                           namespaces=_xlsx_ns_imapping)
    try:
        if "@t" not in cell["c"] or cell["c"]["@t"] == "n":
            return float(cell["c"]["v"])
        if cell["c"]["@t"] == "s":
            return shared_strs[int(cell["c"]["v"])]
        if cell["c"]["@t"] == "str":
            return cell["c"]["v"]
        if cell["c"]["@t"] == "inlineStr":
            return cell["c"]["is"]["t"]
        if cell["c"]["@t"] == "e":
            return cell["c"]["v"]
    except (KeyError, ValueError):
        return None
    return None
