"""What compare_table reads of a sheet's looks: cell styles (conditional formats applied), rows, columns, filters.

From OSWorld's ``desktop_env/evaluators/metrics/utils.py`` (``_read_cell_style``,
``_process_xlsx_cf_operator``, ``load_xlsx_styles``, ``load_rows_or_cols``, ``load_filters``),
desktop-env 1.0.2, Apache-2.0; the logic is theirs, the debug logging left out. Conditional
formats' formulas are evaluated with ``formulas``, as OSWorld does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import formulas
from openpyxl.cell.cell import MergedCell
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import CellRange

from cud.osworld.metrics.sheets import read_cell_value

__all__ = ("load_filters", "load_rows_or_cols", "load_xlsx_styles", "read_cell_style")


def read_cell_style(style_name: str, cell: Any, diff_style: Any = None) -> Any:
    """One style of a cell (or of a conditional format's differential style ``diff_style``).

    number_format, font_name, font_family, font_color (aRGB), font_bold, font_italic,
    font_underline, font_size, fill_type, bgcolor/fgcolor (aRGB), hyperlink, merge.
    """
    if style_name == "number_format":
        return (cell.number_format if diff_style is None else diff_style.numFmt.formatCode) \
            if cell.value is not None and cell.data_type == "n" else None
    if style_name == "font_name":
        return (diff_style or cell).font.name if cell.value is not None else None
    if style_name == "font_family":
        return (diff_style or cell).font.family if cell.value is not None else None
    if style_name == "font_color":
        return (diff_style or cell).font.color.rgb if cell.value is not None else None
    if style_name == "font_bold":
        return (diff_style or cell).font.bold if cell.value is not None else None
    if style_name == "font_italic":
        return (diff_style or cell).font.italic if cell.value is not None else None
    if style_name == "font_underline":
        return (diff_style or cell).font.underline if cell.value is not None else None
    if style_name == "font_size":
        return (diff_style or cell).font.size if cell.value is not None else None
    if style_name == "fill_type":
        try:
            return (diff_style or cell).fill.tagname
        except Exception:
            return None
    if style_name == "bgcolor" or style_name == "fgcolor":
        try:
            if diff_style is not None:
                return diff_style.fill.bgColor.rgb
            return cell.fill.fgColor.rgb
        except Exception:
            return None
    if style_name == "hyperlink":
        # OSWorld's precedence: hyperlink or ("" if the cell has a value else None).
        return cell.hyperlink or "" if cell.value is not None else None
    if style_name == "merge":
        return isinstance(cell, MergedCell)
    raise NotImplementedError(f"Unsupported Style: {style_name}")


def _process_xlsx_cf_operator(operator: str, value: Any, ref: list[Any]) -> bool:
    try:
        if operator == "lessThanOrEqual":
            result: bool = value <= ref[0]
        elif operator == "lessThan":
            result = value < ref[0]
        elif operator == "equal":
            result = value == ref[0]
        elif operator == "greaterThanOrEqual":
            result = value >= ref[0]
        elif operator == "notEqual":
            result = value != ref[0]
        elif operator == "greaterThan":
            result = value > ref[0]
        elif operator == "between":
            small_one, large_one = min(ref), max(ref)
            result = value >= small_one and value <= large_one
        elif operator == "notBetween":
            small_one, large_one = min(ref), max(ref)
            result = value < small_one or value > large_one
        else:
            # OSWorld leaves `result` unbound here: the UnboundLocalError makes the cell inactive.
            raise UnboundLocalError(f"Not Implemented CondFormat Operator: {operator}")
        return result
    except TypeError:
        return False
    except IndexError:
        return False


_absolute_range_pattern = re.compile(r"""\$(?P<col1>[A-Z]{1,3})\$(?P<row1>\d+) # coord1
                                        (?::
                                          \$(?P<col2>[A-Z]{1,3})\$(?P<row2>\d+) # coord2
                                        )?
                                     """, re.X)


def _never_set(*args: Any) -> bool:
    # OSWorld's `is_active` before any rule set it: a NameError, caught per cell as inactive.
    raise NameError("is_active")


def load_xlsx_styles(xlsx_file: Any, sheet_name: str, book_name: str, **options: Any) -> dict[str, list[Any]]:
    """Each cell's ``props`` styles, ``{"A1": [style, ...]}``, with conditional formats applied to the cells they hit."""
    try:
        worksheet = xlsx_file[sheet_name]
    except KeyError:
        return {}
    style_dict: dict[str, list[Any]] = {}
    concerned_styles: list[str] = options.get("props", [])
    for col in worksheet.iter_cols():
        for c in col:
            style_dict[c.coordinate] = [read_cell_style(st, c) for st in concerned_styles]

    formula_parser = formulas.Parser()
    # OSWorld's function-level variables, which its `is_active` lambdas read when called, not when made:
    # a rule of a type it does not handle reuses the last lambda with whatever they hold by then.
    now: dict[str, Any] = {"is_active": _never_set}
    for fmt in worksheet.conditional_formatting:
        for r in fmt.rules:
            active_cells = []
            formulae: list[Callable[..., Any]] = []
            argument_lists: list[list[Any]] = []
            has_error = False
            for fml in r.formula:
                try:
                    formula_func = formula_parser.ast("=" + fml)[1].compile()
                except Exception:
                    has_error = True
                    break
                now["arguments"] = arguments = []
                for m in _absolute_range_pattern.findall(fml):
                    # findall gives "" for an absent group, never None: OSWorld's test is always false.
                    if m[2] is None and m[3] is None:
                        arguments.append(read_cell_value(book_name, sheet_name, coordinate=f"{m[0]}{m[1]}"))
                    else:
                        arguments.append([read_cell_value(book_name, sheet_name,
                                                          coordinate=f"{get_column_letter(c[1])}{c[0]}")
                                          for c in CellRange(f"{m[0]}{m[1]}:{m[2]}{m[3]}").cells])
                formulae.append(formula_func)
                argument_lists.append(arguments)
            if has_error:
                continue

            if r.type in {"expression", "containsText", "notContainsText", "endsWith", "beginsWith",
                          "containsErrors", "notContainsErrors"}:
                now["condition"] = formulae[0]
                now["arguments"] = argument_lists[0]
                now["is_active"] = lambda v: now["condition"](v, *now["arguments"])
            elif r.type == "cellIs":
                now["operator"] = r.operator
                try:
                    now["references"] = [fml() for fml in formulae]
                except Exception:
                    continue
                now["is_active"] = lambda v: _process_xlsx_cf_operator(now["operator"], v, now["references"])

            nb_contiguous_nothings = 0
            for rge in fmt.cells:
                for c in rge.cells:
                    cell = worksheet.cell(row=c[0], column=c[1])
                    cell_value = read_cell_value(book_name, sheet_name,
                                                 coordinate=f"{get_column_letter(c[1])}{c[0]:d}")
                    if cell_value is None:
                        nb_contiguous_nothings += 1
                        if nb_contiguous_nothings > 50:
                            break
                        continue
                    try:
                        satisfies_condition = now["is_active"](cell_value)
                    except Exception:
                        satisfies_condition = False
                    if satisfies_condition:
                        active_cells.append(cell)
            for c in active_cells:
                style_dict[c.coordinate] = [read_cell_style(st, c, r.dxf) for st in concerned_styles]
    return style_dict


def load_rows_or_cols(xlsx_file: Any, sheet_name: str, **options: Any) -> dict[Any, dict[str, Any]]:
    """Each row's or column's (``obj``: "row" | "column") ``props``: hidden, collapsed, height / width, auto_size, min, max."""
    try:
        worksheet = xlsx_file[sheet_name]
    except KeyError:
        return {}
    objs = getattr(worksheet, "{:}_dimensions".format(options["obj"]))
    obj_set: dict[Any, Any] = {}
    obj_props = set(options.get("props", []))
    for obj_no, obj_dms in objs.items():
        obj_set[obj_no] = {prop: getattr(obj_dms, prop) for prop in obj_props}
    return obj_set


def load_filters(xlsx_file: Any, sheet_name: str, **options: Any) -> dict[str, Any]:
    """The sheet's autofilter: its range, its filter columns, its sort state."""
    try:
        worksheet = xlsx_file[sheet_name]
    except KeyError:
        return {}
    filters = worksheet.auto_filter
    filter_dict: dict[str, Any] = {"ref": filters.ref}
    filter_column_set: list[dict[str, Any]] = []
    for flt_clm in filters.filterColumn:
        filter_column: dict[str, Any] = {"col_id": flt_clm.colId, "hidden_button": flt_clm.hiddenButton,
                                         "show_button": flt_clm.showButton}
        if flt_clm.filters is not None:
            filter_column["filters_blank"] = flt_clm.filters.blank
            filter_column["filters"] = set(flt_clm.filters.filter)
        if flt_clm.customFilters is not None:
            filter_column["custom_filters_op"] = flt_clm.customFilters._and
            filter_column["custom_filters"] = {(flt.operator, flt.val) for flt in flt_clm.customFilters.customFilter}
        filter_column_set.append(filter_column)
    filter_dict["filter_column"] = sorted(filter_column_set, key=lambda d: d["col_id"])
    sort_state = filters.sortState
    if sort_state is not None:
        filter_dict["sort_state"] = {
            "sort": sort_state.columnSort, "case": sort_state.caseSensitive, "method": sort_state.sortMethod,
            "ref": sort_state.ref,
            "condition": [{"descending": cdt.descending, "key": cdt.sortBy, "ref": cdt.ref,
                           "custom_list": cdt.customList, "dxf_id": cdt.dxfId, "icon": cdt.iconSet,
                           "iconid": cdt.iconId} for cdt in sort_state.sortCondition],
        }
    return filter_dict
