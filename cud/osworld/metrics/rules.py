"""OSWorld's value rules (``{"method": ..., "ref": ...}``), which several metrics match values against.

From OSWorld's ``desktop_env/evaluators/metrics/utils.py`` (``_match_record``,
``_multicellrange_containsby``, ``_match_value_to_rule``), desktop-env 1.0.2, Apache-2.0; the
logic is theirs.
"""

from __future__ import annotations

import builtins
import functools
import operator
import re
from collections.abc import Mapping
from typing import Any

from openpyxl.worksheet.cell_range import MultiCellRange

__all__ = ("match_record", "match_value_to_rule", "multicellrange_containsby")


def match_record(pattern: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    return all(k in item and item[k] == val for k, val in pattern.items())


def multicellrange_containsby(subset_candidate: Any, superset_candidate: Any) -> bool:
    return all(r in superset_candidate for r in subset_candidate)


def match_value_to_rule(value: Any, rule: Mapping[str, Any]) -> bool:
    """Whether ``value`` passes ``rule``: ``re[.FLAG...]``, eq/ne/le/lt/ge/gt, ``approx:THRESHOLD``,
    ``spreadsheet_range``, ``range.XY`` (t: <, e: <=), ``str_list_eq``, ``str_set_eq`` against ``rule["ref"]``."""
    method = rule["method"]
    if method.startswith("re"):  # re.FLAGs
        flags = (getattr(re, fl) for fl in method.split(".")[1:])
        flag = functools.reduce(operator.or_, flags, re.RegexFlag(0))
        return re.search(rule["ref"], value, flag) is not None
    if method in {"eq", "ne", "le", "lt", "ge", "gt"}:
        result: bool = getattr(operator, method)(value, rule["ref"])
        return result
    if method.startswith("approx"):  # approx:THRESHOLD
        threshold = float(method.split(":")[1])
        try:
            value = float(value)
        except (ValueError, TypeError):
            return False
        return bool(abs(value - rule["ref"]) <= threshold)
    if method == "spreadsheet_range":
        subset_limit = MultiCellRange(rule["ref"][0])
        superset_limit = MultiCellRange(rule["ref"][1])
        return multicellrange_containsby(subset_limit, value) and multicellrange_containsby(value, superset_limit)
    if method.startswith("range."):  # e.g., range.te [0, 2] -> 0 < x <= 2
        left_et = method[6]
        right_et = method[7]
        return bool(getattr(operator, "l" + left_et)(rule["ref"][0], value)
                    and getattr(operator, "l" + right_et)(value, rule["ref"][1]))
    if method in {"str_list_eq", "str_set_eq"}:
        container_type = getattr(builtins, method[4:-3])
        return bool(container_type(value.strip("\"'").split(",")) == container_type(rule["ref"]))
    raise NotImplementedError()
