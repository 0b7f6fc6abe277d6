"""The OSWorld metrics a ``metric`` check may name, and what each takes: light, importable anywhere.

A spec is checked at submit against this table (the metric's name, whether it takes an
expected value, its keyword options), so a typo is refused before anything runs; the
functions themselves (:mod:`cud.osworld.metrics`) load only in the judge's process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ("METRICS", "MetricInfo")


@dataclasses.dataclass(frozen=True)
class MetricInfo:
    """One metric: its name, whether an expected value follows the result, the options it reads."""

    name: str
    expected: bool
    options: frozenset[str] = frozenset()


def _table(*infos: MetricInfo) -> Mapping[str, MetricInfo]:
    return MappingProxyType({info.name: info for info in infos})


#: Filled in with the metrics' implementations (cud/osworld/metrics/); the options are the
#: keyword options OSWorld's own function reads.
METRICS: Mapping[str, MetricInfo] = _table(
    MetricInfo("compare_table", True, frozenset({"rules"})),
    MetricInfo("compare_csv", True, frozenset({"ignore_case", "strict"})),
    MetricInfo("compare_pptx_files", True, frozenset({
        "approximately_tolerance", "enable_debug", "examine_alignment", "examine_background_color",
        "examine_bullets", "examine_color_rgb", "examine_font_bold", "examine_font_italic",
        "examine_font_name", "examine_font_size", "examine_font_underline", "examine_image_size",
        "examine_indent", "examine_modify_height", "examine_note", "examine_number_of_slides",
        "examine_right_position", "examine_shape", "examine_shape_for_shift_size", "examine_strike_through",
        "examine_table_bottom_position", "examine_text", "examine_title_bottom_position",
        "examine_top_position"})),
    MetricInfo("compare_docx_files", True, frozenset({"content_only", "delete_empty_lines", "fuzzy_match",
                                                      "ignore_blanks", "ignore_case", "ignore_order"})),
    MetricInfo("compare_docx_tables", True),
    MetricInfo("check_json_settings", True),
    MetricInfo("check_direct_json_object", True),
    MetricInfo("is_extension_installed", True),
    MetricInfo("check_list", True),
    MetricInfo("diff_text_file", True),
    MetricInfo("compare_images", True, frozenset({"reference_base_result"})),
    MetricInfo("compare_pdfs", True),
)
