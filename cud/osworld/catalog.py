"""The OSWorld metrics a ``metric`` check may name, and what each takes: light, importable anywhere.

A spec is checked at submit against this table (the metric's name, whether it takes an
expected value, its keyword options), so a typo is refused before anything runs; the
functions themselves (:mod:`cud.osworld.metrics`) load only in the judge's process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from cud.errors import SpecError
from cud.suggest import did_you_mean

__all__ = ("METRICS", "TABLE_RULES", "MetricInfo", "check_options")


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
        "examine_right_position", "examine_run_count", "examine_shape", "examine_shape_for_shift_size",
        "examine_strike_through", "examine_table_bottom_position", "examine_text", "examine_title_bottom_position",
        "examine_top_position",
        # Task files pass it; OSWorld's function never reads it (its **options takes any key): accepted, ignored.
        "examine_shape_lenient_height"})),
    MetricInfo("compare_docx_files", True, frozenset({"content_only", "delete_empty_lines", "fuzzy_match",
                                                      "ignore_blanks", "ignore_case", "ignore_order"})),
    MetricInfo("compare_docx_tables", True),
    MetricInfo("check_json_settings", True),
    MetricInfo("check_direct_json_object", True),
    MetricInfo("is_extension_installed", True),
    MetricInfo("check_list", True),
    MetricInfo("diff_text_file", True),
    MetricInfo("exact_match", True),
    MetricInfo("check_include_exclude", True),
    MetricInfo("literal_match", True, frozenset({"type", "ignore_case"})),
    MetricInfo("is_in_list", True),
    MetricInfo("match_in_list", True),
    MetricInfo("is_expected_bookmarks", True),
    MetricInfo("is_expected_active_tab", True),
    MetricInfo("is_expected_active_tab_approximate", True),
    MetricInfo("is_expected_url_pattern_match", True),
    MetricInfo("is_expected_tabs", True),
    MetricInfo("compare_text_file", True, frozenset({"ignore_blanks", "ignore_case"})),
    MetricInfo("compare_images", True, frozenset({"reference_base_result"})),
    MetricInfo("compare_pdfs", True),
    # Small metrics, each of one or two tasks (misc.py)
    MetricInfo("check_json", True),
    MetricInfo("file_contains", True),
    MetricInfo("fuzzy_place_math", True),
    MetricInfo("check_json_keybindings", True),
    # Task files pass containment_ok; OSWorld's function never reads it (its **options takes any key): accepted, ignored.
    MetricInfo("compare_config", True, frozenset({"containment_ok"})),
    MetricInfo("compare_result_files", True),
    MetricInfo("is_utc_0", False),
    MetricInfo("check_gnome_favorite_apps", True),
    MetricInfo("compare_conference_city_in_order", True),
    MetricInfo("check_pdf_pages", True),
    MetricInfo("compare_zip_files", True),
    MetricInfo("is_in_vm_clickboard", True),
    MetricInfo("check_line_number", True),
    # Writer formatting and LibreOffice settings (writer_format.py, office_settings.py); rules come as `expected`
    MetricInfo("check_highlighted_words", True),
    MetricInfo("check_italic_font_size_14", True),
    MetricInfo("check_tabstops", True, frozenset({"word_number_split_by_tabstop", "index"})),
    MetricInfo("compare_docx_files_and_ignore_new_lines", True, frozenset({"ignore_blanks"})),
    MetricInfo("compare_docx_images", True),
    MetricInfo("compare_font_names", True),
    MetricInfo("compare_line_spacing", True),
    MetricInfo("compare_references", True, frozenset({"reference_indicator", "reference_base_result",
                                                      # Its task passes it; the function never reads it: accepted, ignored.
                                                      "content_only"})),
    MetricInfo("compare_subscript_contains", True),
    MetricInfo("contains_page_break", True),
    MetricInfo("evaluate_strike_through_last_paragraph", True),
    MetricInfo("has_page_numbers_in_footers", False),
    MetricInfo("is_first_line_centered", False),
    MetricInfo("check_auto_saving_time", True),
    MetricInfo("check_left_panel", False),
    MetricInfo("check_page_number_colors", True),
    MetricInfo("check_presenter_console_disable", False),
    MetricInfo("check_slide_orientation_Portrait", False),
    MetricInfo("check_transition", True),
    MetricInfo("find_default_font", True),
    # GIMP's image metrics (gimp.py); a rule (check_image_size...) is the expected value
    MetricInfo("check_structure_sim", True),
    MetricInfo("check_brightness_decrease_and_structure_sim", True, frozenset({"threshold"})),
    MetricInfo("check_saturation_increase_and_structure_sim", True),
    MetricInfo("check_contrast_increase_and_structure_sim", True),
    MetricInfo("check_file_exists_and_structure_sim", True),
    MetricInfo("check_palette_and_structure_sim", True),
    MetricInfo("check_structure_sim_resized", True),
    MetricInfo("check_image_mirror", True),
    MetricInfo("check_green_background", True),
    MetricInfo("check_triangle_position", False),
    MetricInfo("check_textbox_on_leftside", False),
    MetricInfo("check_image_size", True),
    MetricInfo("check_image_file_size", True),
    MetricInfo("check_config_status", True),
    MetricInfo("compare_image_list", True),
    # Thunderbird's profile files (thunderbird.py); prefs and filter rules come as `expected`
    MetricInfo("check_thunderbird_prefs", True),
    MetricInfo("check_thunderbird_filter", True),
    MetricInfo("check_thunderbird_folder", True, frozenset({"ignore_status", "ignore_keys", "remove_deleted",
                                                           "remove_duplicate"})),
    # Two archives, member by member (archives.py); OSWorld passes its other options on to the members'
    # metric, which no task gives: left out.
    MetricInfo("compare_archive", True, frozenset({"file_path", "file_type"})),
)

#: The rule types of compare_table's ``rules`` (OSWorld's own list, all ported).
TABLE_RULES: frozenset[str] = frozenset({
    "sheet_name", "sheet_data", "sheet_print", "sheet_fuzzy", "sparkline", "chart", "style", "freeze", "zoom",
    "data_validation", "row_props", "col_props", "filter", "pivot_table", "check_cell",
})


def _refused(key: str, value: object, wanted: str) -> SpecError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return SpecError(f"spec key {key!r} must be {wanted}, got {shown}", key=key, value=shown)


def _join(key: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{key}[{part}]"
    return f"{key}.{part}" if key else part


def check_options(metric: str, options: Mapping[str, object], key: str) -> None:
    """Refuse (SpecError) an unknown ``metric``, an option it does not read, or a compare_table rule type cud lacks.

    ``key`` is the key path of the options table (``checks[2].options``); an unknown metric is
    named at its sibling ``metric`` key. Only names are checked here: the values are the metric's
    own business, as in OSWorld, and a bad one makes the judge's error.
    """
    if metric not in METRICS:
        at = _join(key.rpartition(".")[0] if "." in key else "", "metric")
        raise _refused(at, metric, f"an OSWorld metric cud has ({did_you_mean(metric, METRICS)}known: "
                                   f"{', '.join(sorted(METRICS))})")
    known = METRICS[metric].options
    for name in options:
        if name not in known:
            listed = f"known: {', '.join(sorted(known))}" if known else f"{metric} takes no options"
            raise _refused(_join(key, name), options[name], f"left out ({did_you_mean(name, known)}{listed})")
    if metric == "compare_table" and "rules" in options:
        rules = options["rules"]
        if not isinstance(rules, list):
            raise _refused(_join(key, "rules"), rules, "a list of rule tables")
        for i, rule in enumerate(rules):
            at = _join(_join(key, "rules"), i)
            if not isinstance(rule, Mapping):
                raise _refused(at, rule, "a rule table with a 'type'")
            kind = rule.get("type")
            if not isinstance(kind, str) or kind not in TABLE_RULES:
                near = did_you_mean(kind, TABLE_RULES) if isinstance(kind, str) else ""
                raise _refused(_join(at, "type"), kind, f"a compare_table rule type ({near}known: "
                                                        f"{', '.join(sorted(TABLE_RULES))})")
