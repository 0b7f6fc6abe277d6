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
    # mimages: GIMP's image metrics (gimp.py)
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
})


def metric(name: str) -> Callable[..., Any]:
    """The function of metric ``name`` (KeyError if there is none), importing its module now."""
    module_name, _, function_name = FUNCTIONS[name].partition(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    function: Callable[..., Any] = getattr(module, function_name)
    return function
