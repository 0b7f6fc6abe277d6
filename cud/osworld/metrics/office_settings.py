"""OSWorld's LibreOffice metrics on settings and presentation properties: the default font, the
presenter console, autosave, slide orientation, transitions, the slide pane, page-number colour.

Ported from OSWorld's desktop_env/evaluators/metrics/docs.py (find_default_font) and slides.py
(the rest), desktop-env 1.0.2, Apache-2.0, with their logic and scores kept, quirks included:
check_auto_saving_time scores None (no score: the judge's error) for an unparsable file, and
check_page_number_colors reads the slide master's second-to-last solid fill colour, and its
channels from the value's second character (OOXML's values have no '#'; OSWorld's later version
fixes that and looks for the slide-number placeholder first: 1.0.2's is the one ported).
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
import zipfile
from typing import Any

from pptx import Presentation

__all__ = (
    "check_auto_saving_time", "check_left_panel", "check_page_number_colors", "check_presenter_console_disable",
    "check_slide_orientation_Portrait", "check_transition", "find_default_font",
)

logger = logging.getLogger(__name__)

_OOR = "http://openoffice.org/2001/registry"
_PPTX_NS = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
}


def find_default_font(config_file_path: str | None, rules: dict[str, Any]) -> float:
    """1 when registrymodifications.xcu sets Writer's standard default font to ``font_name``."""
    default_font = None
    expected_font = rules["font_name"]
    if not config_file_path:
        return 0
    try:
        root = ET.parse(config_file_path).getroot()
        namespace = {"oor": _OOR}
        for elem in root.findall('.//item[@oor:path="/org.openoffice.Office.Writer/DefaultFont"]', namespace):
            for prop in elem.findall('.//prop[@oor:name="Standard"]', namespace):
                for value in prop.findall("value", namespace):
                    default_font = value.text
    except Exception as e:  # OSWorld's verdict for an unreadable file: no font found, not an error
        logger.error("Error: %s", e)
    return 1 if default_font == expected_font else 0


def check_presenter_console_disable(config_file_path: str | None) -> float:
    """1 when the first EnablePresenterScreen setting of Impress's Misc/Start is false."""
    try:
        root = ET.parse(config_file_path).getroot()  # type: ignore[arg-type]  # None raises, scored 0 below
        path = ".//item[@oor:path='/org.openoffice.Office.Impress/Misc/Start']/prop[@oor:name='EnablePresenterScreen']"
        for item in root.findall(path, {"oor": _OOR}):
            presenter_screen_enabled = item.find("value").text  # type: ignore[union-attr]
            return 1.0 if presenter_screen_enabled.lower() == "false" else 0.0  # type: ignore[union-attr]
        return 0.0
    except Exception as e:  # OSWorld scores any failure (no file, no value) 0
        logger.error("Error: %s", e)
        return 0.0


def check_auto_saving_time(pptx_file: str | None, rules: dict[str, Any]) -> float | None:
    """1 when the xcu's Save/Document AutoSaveTimeIntervall is ``minutes``; None when it is unparsable
    or absent (OSWorld's function then falls off its end)."""
    minutes = rules["minutes"]
    try:
        root = ET.parse(pptx_file).getroot()  # type: ignore[arg-type]  # None raises TypeError, as OSWorld's
        autosave_time = None
        for item in root.findall(".//item"):
            if item.get(f"{{{_OOR}}}path") == "/org.openoffice.Office.Common/Save/Document":
                for prop in item.findall(".//prop"):
                    if prop.get(f"{{{_OOR}}}name") == "AutoSaveTimeIntervall":
                        autosave_time = prop.find(".//value").text  # type: ignore[union-attr]
                        break
        if autosave_time is None:
            return 0
        return 1 if int(autosave_time) == minutes else 0
    except ET.ParseError as e:
        logger.error("Error parsing XML: %s", e)
    except FileNotFoundError:
        logger.error("File not found: %s", pptx_file)
    return None


def check_slide_orientation_Portrait(pptx_path: str | None) -> float:
    """1 when the slides are narrower than tall."""
    presentation = Presentation(pptx_path)
    return 1 if presentation.slide_width < presentation.slide_height else 0


def check_left_panel(accessibility_tree: str) -> float:
    """1 when the accessibility tree has a document-frame named "Slides View" (the slide pane is open)."""
    root = ET.fromstring(accessibility_tree)
    for doc_frame in root.iter("document-frame"):
        if doc_frame.attrib.get("name") == "Slides View":
            return 1.0
    return 0.0


def check_transition(pptx_file: str | None, rules: dict[str, Any]) -> float:
    """1 when slide ``slide_idx`` (from 0) has a transition with a ``transition_type`` element."""
    slide_idx = rules["slide_idx"]
    transition_type = rules["transition_type"]
    with zipfile.ZipFile(pptx_file, "r") as zip_ref:  # type: ignore[call-overload]  # None raises, as OSWorld's
        slide_name = f"ppt/slides/slide{slide_idx + 1}.xml"
        try:
            zip_ref.getinfo(slide_name)
        except KeyError:
            return 0.0
        with zip_ref.open(slide_name) as slide_file:
            root = ET.parse(slide_file).getroot()
    transition = root.find(".//p:transition", _PPTX_NS)
    if transition is None:
        return 0.0
    return 1.0 if transition.find(f".//p:{transition_type}", _PPTX_NS) is not None else 0.0


def _channels(rgb_str: str) -> tuple[int, int, int]:
    return int(rgb_str[1:3], 16), int(rgb_str[3:5], 16), int(rgb_str[5:7], 16)


def _is_colour(color: str, rgb_str: str, threshold: int = 50) -> bool:
    """OSWorld's is_red/is_blue/is_green/is_black; any other colour name passes."""
    r, g, b = _channels(rgb_str)
    if color == "red":
        return r > g + threshold and r > b + threshold
    if color == "blue":
        return b > g + threshold and b > r + threshold
    if color == "green":
        return g > r + threshold and g > b + threshold
    if color == "black":
        return r < threshold and g < threshold and b < threshold
    return True


def check_page_number_colors(pptx_file: str | None, rules: dict[str, Any]) -> float:
    """1 when the first slide master's second-to-last solid fill colour is ``color``
    (red/blue/green/black, judged by channel margins; any other name passes)."""
    color = rules["color"]
    with zipfile.ZipFile(pptx_file, "r") as zip_ref:  # type: ignore[call-overload]  # None raises, as OSWorld's
        with zip_ref.open("ppt/slideMasters/slideMaster1.xml") as slide_master_file:
            root = ET.parse(slide_master_file).getroot()
    color_elems = root.findall(".//a:solidFill//a:srgbClr", _PPTX_NS)
    # OSWorld reads the element before the last one, as the page number's colour of its task's file.
    slides_color_val = color_elems[-2].get("val")
    if slides_color_val is None:
        return 0
    return 1 if _is_colour(color, slides_color_val) else 0
