"""OSWorld's metric functions, ported: each catalog name's function, imported only when asked for.

The modules here are OSWorld's ``desktop_env/evaluators/metrics`` (Apache-2.0; desktop-env 1.0.2
from PyPI is the reference) with their logic kept and their heavy imports (easyocr, torch, cv2...)
left out; the differential tests hold each to OSWorld's own function. They need the
``cud[osworld]`` extra and run in the judge's process (:mod:`cud.osworld.judge`), never in the
daemon: importing this package imports none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ("FUNCTIONS", "metric")

#: Each metric's ``"module:function"`` under this package; every name is in cud.osworld.catalog.METRICS.
FUNCTIONS: Mapping[str, str] = MappingProxyType({
    "compare_table": "tables:compare_table",
    "compare_csv": "tables:compare_csv",
    "check_json_settings": "files:check_json_settings",
    "check_direct_json_object": "files:check_direct_json_object",
    "is_extension_installed": "files:is_extension_installed",
    "check_list": "files:check_list",
    "diff_text_file": "files:diff_text_file",
    "exact_match": "files:exact_match",
    "check_include_exclude": "files:check_include_exclude",
    "literal_match": "files:literal_match",
    "is_in_list": "files:is_in_list",
    "match_in_list": "files:match_in_list",
    "compare_text_file": "files:compare_text_file",
    "compare_docx_files": "documents:compare_docx_files",
    "compare_docx_tables": "documents:compare_docx_tables",
    "compare_pptx_files": "slides:compare_pptx_files",
    "compare_images": "images:compare_images",
    "compare_pdfs": "pdfs:compare_pdfs",
    "is_expected_bookmarks": "chrome:is_expected_bookmarks",
    "is_expected_active_tab": "chrome:is_expected_active_tab",
    "is_expected_active_tab_approximate": "chrome:is_expected_active_tab_approximate",
    "is_expected_url_pattern_match": "chrome:is_expected_url_pattern_match",
    "is_expected_tabs": "chrome:is_expected_tabs",
    # Small metrics, each of one or two tasks (misc.py)
    "check_json": "misc:check_json",
    "file_contains": "misc:file_contains",
    "fuzzy_place_math": "misc:fuzzy_place_math",
    "check_json_keybindings": "misc:check_json_keybindings",
    "compare_config": "misc:compare_config",
    "compare_result_files": "misc:compare_result_files",
    "is_utc_0": "misc:is_utc_0",
    "check_gnome_favorite_apps": "misc:check_gnome_favorite_apps",
    "compare_conference_city_in_order": "misc:compare_conference_city_in_order",
    "check_pdf_pages": "misc:check_pdf_pages",
    "compare_zip_files": "misc:compare_zip_files",
    "is_in_vm_clickboard": "misc:is_in_vm_clickboard",
    "check_line_number": "misc:check_line_number",
    # Writer formatting and LibreOffice settings (writer_format.py, office_settings.py)
    "check_highlighted_words": "writer_format:check_highlighted_words",
    "check_italic_font_size_14": "writer_format:check_italic_font_size_14",
    "check_tabstops": "writer_format:check_tabstops",
    "compare_docx_files_and_ignore_new_lines": "writer_format:compare_docx_files_and_ignore_new_lines",
    "compare_docx_images": "writer_format:compare_docx_images",
    "compare_font_names": "writer_format:compare_font_names",
    "compare_line_spacing": "writer_format:compare_line_spacing",
    "compare_references": "writer_format:compare_references",
    "compare_subscript_contains": "writer_format:compare_subscript_contains",
    "contains_page_break": "writer_format:contains_page_break",
    "evaluate_strike_through_last_paragraph": "writer_format:evaluate_strike_through_last_paragraph",
    "has_page_numbers_in_footers": "writer_format:has_page_numbers_in_footers",
    "is_first_line_centered": "writer_format:is_first_line_centered",
    "check_auto_saving_time": "office_settings:check_auto_saving_time",
    "check_left_panel": "office_settings:check_left_panel",
    "check_page_number_colors": "office_settings:check_page_number_colors",
    "check_presenter_console_disable": "office_settings:check_presenter_console_disable",
    "check_slide_orientation_Portrait": "office_settings:check_slide_orientation_Portrait",
    "check_transition": "office_settings:check_transition",
    "find_default_font": "office_settings:find_default_font",
    # GIMP's image metrics (gimp.py)
    "check_structure_sim": "gimp:check_structure_sim",
    "check_brightness_decrease_and_structure_sim": "gimp:check_brightness_decrease_and_structure_sim",
    "check_saturation_increase_and_structure_sim": "gimp:check_saturation_increase_and_structure_sim",
    "check_contrast_increase_and_structure_sim": "gimp:check_contrast_increase_and_structure_sim",
    "check_file_exists_and_structure_sim": "gimp:check_file_exists_and_structure_sim",
    "check_palette_and_structure_sim": "gimp:check_palette_and_structure_sim",
    "check_structure_sim_resized": "gimp:check_structure_sim_resized",
    "check_image_mirror": "gimp:check_image_mirror",
    "check_green_background": "gimp:check_green_background",
    "check_triangle_position": "gimp:check_triangle_position",
    "check_textbox_on_leftside": "gimp:check_textbox_on_leftside",
    "check_image_size": "gimp:check_image_size",
    "check_image_file_size": "gimp:check_image_file_size",
    "check_config_status": "gimp:check_config_status",
    "compare_image_list": "gimp:compare_image_list",
    # Thunderbird's profile files (thunderbird.py)
    "check_thunderbird_prefs": "thunderbird:check_thunderbird_prefs",
    "check_thunderbird_filter": "thunderbird:check_thunderbird_filter",
    "check_thunderbird_folder": "thunderbird:check_thunderbird_folder",
    # Two archives, member by member (archives.py)
    "compare_archive": "archives:compare_archive",
})


def metric(name: str) -> Callable[..., Any]:
    """The function of metric ``name`` (KeyError if there is none), importing its module now."""
    module_name, _, function_name = FUNCTIONS[name].partition(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    function: Callable[..., Any] = getattr(module, function_name)
    return function
