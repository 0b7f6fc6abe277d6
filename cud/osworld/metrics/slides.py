"""OSWorld's ``compare_pptx_files``: two presentations compared slide by slide, shape by shape.

Ported from OSWorld's desktop_env/evaluators/metrics/slides.py (Apache-2.0) as the task files
cud converts use it: the version beside them (/work/osw, OSWorld's main after desktop-env 1.0.2),
which reads ``examine_run_count`` and is lenient where 1.0.2 was strict (shapes without text may
differ in size; paragraph levels None, 0 and 1 are alike; an empty paragraph's runs without text
are not counted; bullet levels matter only where a bullet shows). The checks run in OSWorld's
order, each with the option that gates it; the first mismatch scores 0. Its debug logging
(``enable_debug``) becomes a debug log line naming the mismatch. The per-paragraph and per-run
checks are in :mod:`cud.osworld.metrics.slides_text`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE

from cud.osworld.metrics.slides_text import PptxOptions, Slides, compare_alignments, compare_table, compare_text_frame

__all__ = ("compare_pptx_files",)

logger = logging.getLogger(__name__)

_PICTURE = 13  # MSO_SHAPE_TYPE.PICTURE, as OSWorld compares the number
_TABLE = 19  # MSO_SHAPE_TYPE.TABLE
_FREEFORM = 5  # MSO_SHAPE_TYPE.FREEFORM


def _all_text_shapes(slide: Any) -> list[Any]:
    """Every shape with text, groups' members included (OSWorld's get_all_text_shapes)."""

    def extract(shape: Any) -> list[Any]:
        results = [shape] if hasattr(shape, "text") and hasattr(shape, "text_frame") else []
        if hasattr(shape, "shapes"):
            for sub_shape in shape.shapes:
                results.extend(extract(sub_shape))
        return results

    return [found for shape in slide.shapes for found in extract(shape)]


def _background_color(slide: Any) -> Any:
    fill = slide.background.fill
    if fill.type == 1:  # solid
        return fill.fore_color.rgb
    if fill.type == 5:  # background: the master's
        master_fill = slide.slide_layout.slide_master.background.fill
        if master_fill.type == 1:
            return master_fill.fore_color.rgb
    return None


def _notes(slide: Any) -> Any:
    notes_slide = slide.notes_slide
    return notes_slide.notes_text_frame.text if notes_slide else None


def _box_differs(equal: Callable[[Any, Any], bool], shape1: Any, shape2: Any) -> bool:
    return (not equal(shape1.left, shape2.left) or not equal(shape1.top, shape2.top)
            or not equal(shape1.width, shape2.width) or not equal(shape1.height, shape2.height))


def _empty_text(shape: Any) -> bool:
    return not getattr(shape, "text", None) or (shape.text or "").strip() == ""


def _shape_matches(opts: PptxOptions, slide_idx: int, shape1: Any, shape2: Any, slides: Slides) -> bool:
    """OSWorld's checks of one pair of shapes, in its order; False at the first mismatch."""
    equal = opts.approximately_equal
    both_text = hasattr(shape1, "text") and hasattr(shape2, "text")
    if opts.examine_title_bottom_position:
        if both_text and shape1.text == shape2.text:
            if shape1.text == "Product Comparison" and (shape1.top <= shape2.top or shape1.top < 3600000):
                return slides.mismatch("the title 'Product Comparison' did not move down")
        elif _box_differs(equal, shape1, shape2):
            return slides.mismatch("a shape's position or size differs (examine_title_bottom_position)")
    if opts.examine_table_bottom_position:
        if slide_idx == 3 and shape1.shape_type == _TABLE and shape2.shape_type == _TABLE:
            if shape1.top <= shape2.top or shape1.top < 3600000:
                return slides.mismatch("the table on slide 3 did not move down")
        elif _box_differs(equal, shape1, shape2):
            return slides.mismatch("a shape's position or size differs (examine_table_bottom_position)")
    if opts.examine_right_position and slide_idx == 2 and not hasattr(shape1, "text") and not hasattr(shape2, "text"):
        if shape1.left <= shape2.left or shape1.left < 4320000:
            return slides.mismatch("a shape without text on slide 2 did not move right")
    if opts.examine_top_position and slide_idx == 2 and shape1.shape_type == _PICTURE and shape2.shape_type == _PICTURE:
        if shape1.top >= shape2.top or shape1.top > 1980000:
            return slides.mismatch("a picture on slide 2 did not move up")
    if opts.examine_shape_for_shift_size and _box_differs(equal, shape1, shape2):
        if not (both_text and shape1.text == shape2.text and shape1.text == "Elaborate on what you want to discuss."):
            return slides.mismatch("a shape's position or size differs (examine_shape_for_shift_size)")
    # Shapes without text (decorations) often differ in size between saves: OSWorld lets them.
    both_empty_text = _empty_text(shape1) and _empty_text(shape2)
    if _box_differs(equal, shape1, shape2) and opts.examine_shape and not both_empty_text:
        return slides.mismatch(f"a shape's position or size differs: ({shape1.left}, {shape1.top}, {shape1.width}, "
                               f"{shape1.height}) and ({shape2.left}, {shape2.top}, {shape2.width}, {shape2.height})")
    if opts.examine_image_size:
        if shape1.shape_type == _PICTURE and shape2.shape_type == _PICTURE:
            if not equal(shape1.width, shape2.width) or not equal(shape1.height, shape2.height):
                return slides.mismatch("a picture's size differs")
        elif _box_differs(equal, shape1, shape2):
            return slides.mismatch("a shape's position or size differs (examine_image_size)")
    if opts.examine_modify_height:
        # OSWorld's precedence: (neither has text) or (both are freeforms)
        if (not hasattr(shape1, "text") and not hasattr(shape2, "text")
                or shape1.shape_type == _FREEFORM and shape2.shape_type == _FREEFORM):
            if not equal(shape1.height, shape2.height):
                return slides.mismatch("a shape's height differs (examine_modify_height)")
        elif _box_differs(equal, shape1, shape2):
            return slides.mismatch("a shape's position or size differs (examine_modify_height)")
    if shape1.shape_type == MSO_SHAPE_TYPE.TABLE and not compare_table(opts, shape1.table, shape2.table, slides):
        return False
    if both_text:
        if shape1.text.strip() != shape2.text.strip() and opts.examine_text:
            return slides.mismatch(f"a shape's text differs: {shape1.text.strip()!r} and {shape2.text.strip()!r}")
        if not compare_text_frame(opts, shape1.text_frame, shape2.text_frame, slides):
            return False
    return True


def _slide_matches(opts: PptxOptions, slide_idx: int, slide1: Any, slide2: Any, slides: Slides) -> bool:
    if _background_color(slide1) != _background_color(slide2) and opts.examine_background_color:
        return slides.mismatch(f"slide {slide_idx}'s background colours differ")
    if _notes(slide1).strip() != _notes(slide2).strip() and opts.examine_note:
        return slides.mismatch(f"slide {slide_idx}'s notes differ")
    text_shapes1 = _all_text_shapes(slide1)
    text_shapes2 = _all_text_shapes(slide2)
    if len(slide1.shapes) != len(slide2.shapes):
        return slides.mismatch(f"slide {slide_idx} has {len(slide1.shapes)} and {len(slide2.shapes)} shapes")
    for shape1, shape2 in zip(slide1.shapes, slide2.shapes, strict=True):
        if not _shape_matches(opts, slide_idx, shape1, shape2, slides):
            return False
    # OSWorld's second pass, over every shape with text including groups' members
    if opts.examine_alignment and len(text_shapes1) == len(text_shapes2):
        for tshape1, tshape2 in zip(text_shapes1, text_shapes2, strict=True):
            if tshape1.text.strip() != tshape2.text.strip() and opts.examine_text:
                return slides.mismatch(f"slide {slide_idx}: a text shape's text differs")
            if not compare_alignments(tshape1.text_frame, tshape2.text_frame, slides):
                return False
    elif len(text_shapes1) != len(text_shapes2):
        return slides.mismatch(f"slide {slide_idx} has {len(text_shapes1)} and {len(text_shapes2)} text shapes")
    return True


def compare_pptx_files(file1_path: Any, file2_path: Any, **options: Any) -> float:
    """1 when the two presentations match in every examined respect, else 0."""
    prs1 = Presentation(file1_path)
    prs2 = Presentation(file2_path)
    opts = PptxOptions.read(options)
    slides = Slides()
    if len(prs1.slides) != len(prs2.slides) and opts.examine_number_of_slides:
        slides.mismatch(f"{len(prs1.slides)} and {len(prs2.slides)} slides")
        return 0
    # Without examine_number_of_slides, OSWorld compares the slides both have.
    for slide_idx, (slide1, slide2) in enumerate(zip(prs1.slides, prs2.slides, strict=False), start=1):
        slides.slide = slide_idx
        if not _slide_matches(opts, slide_idx, slide1, slide2, slides):
            return 0
    return 1
