"""The text side of OSWorld's ``compare_pptx_files``: paragraphs, runs, bullets and tables.

Ported with :mod:`cud.osworld.metrics.slides` from OSWorld's desktop_env/evaluators/metrics/slides.py
(Apache-2.0); the checks and their order are OSWorld's.
"""

from __future__ import annotations

import dataclasses
import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from pptx.enum.text import PP_ALIGN

__all__ = ("PptxOptions", "Slides", "compare_alignments", "compare_table", "compare_text_frame")

logger = logging.getLogger("cud.osworld.metrics.slides")

_NAMESPACES = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
}


@dataclasses.dataclass(frozen=True)
class PptxOptions:
    """The keyword options OSWorld's compare_pptx_files reads, with its defaults."""

    approximately_tolerance: float = 0.005
    examine_number_of_slides: bool = True
    examine_shape: bool = True
    examine_text: bool = True
    examine_indent: bool = True
    examine_font_name: bool = True
    examine_font_size: bool = True
    examine_font_bold: bool = True
    examine_font_italic: bool = True
    examine_color_rgb: bool = True
    examine_font_underline: bool = True
    examine_strike_through: bool = True
    examine_alignment: bool = True
    examine_title_bottom_position: bool = False
    examine_table_bottom_position: bool = False
    examine_right_position: bool = False
    examine_top_position: bool = False
    examine_shape_for_shift_size: bool = False
    examine_image_size: bool = False
    examine_modify_height: bool = False
    examine_bullets: bool = True
    examine_background_color: bool = True
    examine_note: bool = True
    examine_run_count: bool = True

    @classmethod
    def read(cls, options: Mapping[str, Any]) -> PptxOptions:
        # OSWorld reads each with options.get(name, default) and ignores any other key
        # (enable_debug only turns its debug logging on; task files also pass keys it never reads).
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in options.items() if name in names})

    def approximately_equal(self, val1: Any, val2: Any) -> bool:
        """Equal within approximately_tolerance of the larger magnitude (OSWorld's is_approximately_equal)."""
        if val1 == val2:
            return True
        if val1 == 0 and val2 == 0:
            return True
        if val1 == 0 or val2 == 0:
            return False
        return bool(abs(val1 - val2) / max(abs(val1), abs(val2)) <= self.approximately_tolerance)


class Slides:
    """One comparison's state: the slide being compared (for the log) and each part's bullets."""

    def __init__(self) -> None:
        self.slide = 0
        self._bullets: dict[int, tuple[Any, list[tuple[Any, ...]] | None]] = {}

    def mismatch(self, what: str) -> bool:
        logger.debug("slide %d: %s", self.slide, what)
        return False

    def bullets(self, part: Any) -> list[tuple[Any, ...]] | None:
        """The bullets of a slide's XML, or None when it cannot be parsed (OSWorld then skips the check).

        OSWorld parses the part again for every run; the result is the same for each (reading a
        run's font adds an empty <a:rPr>, which no bullet reads), so it is kept per part.
        """
        key = id(part)
        if key not in self._bullets:
            try:
                found: list[tuple[Any, ...]] | None = _extract_bullets(part.blob.decode("utf-8"))
            except Exception:  # OSWorld's bare except around the bullets: skip the check
                found = None
            self._bullets[key] = (part, found)  # the part is held so its id stays its own
        return self._bullets[key][1]


def _extract_bullets(xml_data: str) -> list[tuple[Any, ...]]:
    root = ET.fromstring(xml_data)
    bullets = []
    for paragraph in root.findall(".//a:p", _NAMESPACES):
        pPr = paragraph.find("a:pPr", _NAMESPACES)
        if pPr is not None:
            lvl = pPr.get("lvl")
            buChar = pPr.find("a:buChar", _NAMESPACES)
            char = buChar.get("char") if buChar is not None else "No Bullet"
            buClr = pPr.find("a:buClr/a:srgbClr", _NAMESPACES)
            color = buClr.get("val") if buClr is not None else "No Color"
        else:
            lvl = "No Level"
            char = "No Bullet"
            color = "No Color"
        text = "".join(t.text for t in paragraph.findall(".//a:t", _NAMESPACES))  # type: ignore[misc]
        if text.strip():
            bullets.append((lvl, char, text, color))
    return bullets


def _bullets_alike(bullets1: list[tuple[Any, ...]], bullets2: list[tuple[Any, ...]]) -> bool:
    """Same texts and bullet characters; levels only where a bullet shows; colours not compared."""
    if len(bullets1) != len(bullets2):
        return False
    for (lvl1, char1, text1, _color1), (lvl2, char2, text2, _color2) in zip(bullets1, bullets2, strict=True):
        if text1 != text2 or char1 != char2:
            return False
        if char1 != "No Bullet" or char2 != "No Bullet":
            if ("0" if lvl1 is None else lvl1) != ("0" if lvl2 is None else lvl2):
                return False
    return True


def _nonempty_runs(para: Any) -> list[Any]:
    return [r for r in para.runs if (r.text or "").strip() != ""]


def _runs(para1: Any, para2: Any) -> tuple[list[Any], list[Any]]:
    """Both paragraphs' runs; when both are blank, only runs with text (0 runs and 1 empty run are alike)."""
    if (para1.text or "").strip() == "" and (para2.text or "").strip() == "":
        return _nonempty_runs(para1), _nonempty_runs(para2)
    return list(para1.runs), list(para2.runs)


def _not_set(value: Any) -> bool:
    return value is None or value is False


def _color_matches(opts: PptxOptions, run1: Any, run2: Any, slides: Slides) -> bool:
    font1, font2 = run1.font, run2.font
    if hasattr(font1.color, "rgb") and hasattr(font2.color, "rgb"):
        if font1.color.rgb != font2.color.rgb and opts.examine_color_rgb:
            return slides.mismatch(f"the colour of run {run1.text!r} differs: {font1.color.rgb} and {font2.color.rgb}")
    return True


def _underline_matches(opts: PptxOptions, run1: Any, run2: Any, slides: Slides, *, in_table: bool) -> bool:
    """Underlines differ when both are set and unequal, or one is None and the other True
    (None and False are alike); a table's cells compare them whatever examine_font_underline says."""
    u1, u2 = run1.font.underline, run2.font.underline
    if u1 != u2 and (in_table or opts.examine_font_underline):
        if u1 is not None and u2 is not None:
            return slides.mismatch(f"the underline of run {run1.text!r} differs: {u1} and {u2}")
        if (u1 is None and u2 is True) or (u1 is True and u2 is None):
            return slides.mismatch(f"the underline of run {run1.text!r} differs: {u1} and {u2}")
    return True


def _bold_italic_match(opts: PptxOptions, run1: Any, run2: Any, slides: Slides, *, in_table: bool) -> bool:
    """Bold, then italic: None and False are alike; a table's cells compare them whatever the options say."""
    font1, font2 = run1.font, run2.font
    if font1.bold != font2.bold and (in_table or opts.examine_font_bold):
        if not (_not_set(font1.bold) and _not_set(font2.bold)):
            return slides.mismatch(f"the boldness of run {run1.text!r} differs: {font1.bold} and {font2.bold}")
    if font1.italic != font2.italic and (in_table or opts.examine_font_italic):
        if not (_not_set(font1.italic) and _not_set(font2.italic)):
            return slides.mismatch(f"the italics of run {run1.text!r} differ: {font1.italic} and {font2.italic}")
    return True


def compare_table(opts: PptxOptions, table1: Any, table2: Any, slides: Slides) -> bool:
    """A table's shape, and each cell's runs: their count, colour, bold, italic, underline."""
    if len(table1.rows) != len(table2.rows) or len(table1.columns) != len(table2.columns):
        return slides.mismatch("a table's dimensions differ")
    for row_idx in range(len(table1.rows)):
        for col_idx in range(len(table1.columns)):
            cell1 = table1.cell(row_idx, col_idx)
            cell2 = table2.cell(row_idx, col_idx)
            if len(cell1.text_frame.paragraphs) != len(cell2.text_frame.paragraphs):
                return slides.mismatch(f"cell [{row_idx},{col_idx}] has a different number of paragraphs")
            for para1, para2 in zip(cell1.text_frame.paragraphs, cell2.text_frame.paragraphs, strict=True):
                runs1, runs2 = _runs(para1, para2)
                if len(runs1) != len(runs2) and opts.examine_run_count:
                    return slides.mismatch(f"cell [{row_idx},{col_idx}] has {len(runs1)} and {len(runs2)} runs")
                # OSWorld's order in a table: colour first, then bold and italic, then underline
                for run1, run2 in zip(runs1, runs2, strict=False):
                    if not (_color_matches(opts, run1, run2, slides)
                            and _bold_italic_match(opts, run1, run2, slides, in_table=True)
                            and _underline_matches(opts, run1, run2, slides, in_table=True)):
                        return False
    return True


def _alignment(para: Any) -> Any:
    # None is the default, left
    return PP_ALIGN.LEFT if para.alignment is None else para.alignment


def compare_alignments(frame1: Any, frame2: Any, slides: Slides) -> bool:
    """The paragraphs' count and alignments (OSWorld's second pass over the text shapes)."""
    if len(frame1.paragraphs) != len(frame2.paragraphs):
        return slides.mismatch("a text shape has a different number of paragraphs")
    for para1, para2 in zip(frame1.paragraphs, frame2.paragraphs, strict=True):
        if _alignment(para1) != _alignment(para2):
            return slides.mismatch(f"a paragraph's alignment differs: {_alignment(para1)} and {_alignment(para2)}")
    return True


def _run_matches(opts: PptxOptions, run1: Any, run2: Any, slides: Slides) -> bool:
    font1, font2 = run1.font, run2.font
    if font1.name != font2.name and opts.examine_font_name:
        return slides.mismatch(f"the font of run {run1.text!r} differs: {font1.name} and {font2.name}")
    if font1.size != font2.size and opts.examine_font_size:
        return slides.mismatch(f"the font size of run {run1.text!r} differs: {font1.size} and {font2.size}")
    if not (_bold_italic_match(opts, run1, run2, slides, in_table=False)
            and _color_matches(opts, run1, run2, slides)
            and _underline_matches(opts, run1, run2, slides, in_table=False)):
        return False
    if (font1._element.attrib.get("strike", "noStrike") != font2._element.attrib.get("strike", "noStrike")
            and opts.examine_strike_through):
        return slides.mismatch(f"the strike-through of run {run1.text!r} differs")
    if opts.examine_bullets:
        bullets1 = slides.bullets(run1.part)
        bullets2 = slides.bullets(run2.part)
        if bullets1 is not None and bullets2 is not None and not _bullets_alike(bullets1, bullets2):
            return slides.mismatch("the slides' bullets differ")
    return True


def compare_text_frame(opts: PptxOptions, frame1: Any, frame2: Any, slides: Slides) -> bool:
    """Two shapes' paragraphs: count, alignment, text, level, runs and each run's font."""
    if len(frame1.paragraphs) != len(frame2.paragraphs):
        return slides.mismatch("a shape has a different number of paragraphs")
    for para1, para2 in zip(frame1.paragraphs, frame2.paragraphs, strict=True):
        if opts.examine_alignment and _alignment(para1) != _alignment(para2):
            return slides.mismatch(f"a paragraph's alignment differs: {_alignment(para1)} and {_alignment(para2)}")
        if para1.text != para2.text and opts.examine_text:
            return slides.mismatch(f"a paragraph's text differs: {para1.text!r} and {para2.text!r}")
        if para1.level != para2.level and opts.examine_indent:
            # Levels None, 0 and 1 look alike (the same continuation indent in different XML).
            n1 = 0 if para1.level is None else para1.level
            n2 = 0 if para2.level is None else para2.level
            if not (n1 in (0, 1) and n2 in (0, 1)):
                return slides.mismatch(f"a paragraph's level differs: {para1.level} and {para2.level}")
        runs1, runs2 = _runs(para1, para2)
        if len(runs1) != len(runs2) and opts.examine_run_count:
            return slides.mismatch(f"paragraph {para1.text!r} has {len(runs1)} and {len(runs2)} runs")
        for run1, run2 in zip(runs1, runs2, strict=False):
            if not _run_matches(opts, run1, run2, slides):
                return False
    return True
