"""cud's compare_pptx_files gives OSWorld's verdicts on generated presentations.

Hypothesis writes a deck with python-pptx (slides of text boxes whose paragraphs have runs in
several fonts, a picture, a table, notes, a background) and a subtly changed copy (two slides
swapped, a font's size, name, boldness, italics, underline, colour or strike-through, a shape
moved, a word, an alignment, a level, a bullet, a note, a cell), and every option is drawn.

The reference is desktop-env 1.0.2's function; cud ports OSWorld's later version, which the task
files are written for (cud/osworld/metrics/slides.py says how it is more lenient). The generated
changes stay where the two versions agree (shapes that move have text; levels are 0, 2 or 3; a
changed level is examined), and the later version's own leniencies are tested by example below.
"""

from __future__ import annotations

import dataclasses
import io
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.text import PP_ALIGN
from pptx.oxml.ns import qn
from pptx.util import Emu, Pt

from cud.osworld.catalog import METRICS
from cud.osworld.metrics.slides import compare_pptx_files
from tests.support.osworld_reference import reference

WORDS = ["alpha", "Beta", "gamma", "x", "Product", "zeta"]
FONTS = [None, "Arial", "DejaVu Sans"]
ALIGNS = [None, PP_ALIGN.LEFT, PP_ALIGN.CENTER, PP_ALIGN.RIGHT]
COLORS = [None, "FF0000", "0000FF", "000000"]
# examine_shape_lenient_height is among them: task files pass it, neither version reads it.
BOOL_OPTIONS = sorted(name for name in METRICS["compare_pptx_files"].options if name.startswith("examine_"))


@dataclasses.dataclass(frozen=True)
class Run:
    text: str
    font: str | None = None
    size: int | None = None
    bold: bool | None = None
    italic: bool | None = None
    underline: bool | None = None
    color: str | None = None
    strike: bool = False


@dataclasses.dataclass(frozen=True)
class Para:
    runs: tuple[Run, ...]
    level: int = 0
    align: Any = None
    bullet: str | None = None


@dataclasses.dataclass(frozen=True)
class Box:
    paras: tuple[Para, ...]
    left: int = 914400
    top: int = 914400
    width: int = 3000000
    height: int = 900000


@dataclasses.dataclass(frozen=True)
class Slide:
    boxes: tuple[Box, ...]
    picture: bool = False
    table: tuple[Run, ...] | None = None  # a 2x2 table's cells, one run each
    notes: str = ""
    background: str | None = None
    group: tuple[Box, ...] = ()  # text boxes in one group shape (none: no group)


runs = st.builds(Run, st.sampled_from(WORDS).map(lambda w: w + " "), st.sampled_from(FONTS),
                 st.sampled_from([None, 12, 18]), st.sampled_from([None, True, False]),
                 st.sampled_from([None, True, False]), st.sampled_from([None, True, False]),
                 st.sampled_from(COLORS), st.booleans())
paras = st.builds(Para, st.lists(runs, min_size=1, max_size=3).map(tuple), st.sampled_from([0, 2, 3]),
                  st.sampled_from(ALIGNS), st.sampled_from([None, "•", "-"]))
boxes = st.builds(Box, st.lists(paras, min_size=1, max_size=3).map(tuple), st.integers(0, 5000000),
                  st.integers(0, 4000000), st.integers(100000, 4000000), st.integers(100000, 2000000))
slides = st.builds(Slide, st.lists(boxes, min_size=1, max_size=3).map(tuple), st.booleans(),
                   st.one_of(st.none(), st.lists(runs, min_size=4, max_size=4).map(tuple)),
                   st.sampled_from(["", "note", "other note"]), st.sampled_from([None, "FFFFFF", "123456"]),
                   st.lists(boxes, max_size=2).map(tuple))
decks = st.lists(slides, min_size=1, max_size=4)


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(out, "PNG")
    return out.getvalue()


PNG = _png()


def _fill_run(run: Any, spec: Run) -> None:
    run.text = spec.text
    font = run.font
    font.name = spec.font
    font.size = None if spec.size is None else Pt(spec.size)
    font.bold = spec.bold
    font.italic = spec.italic
    font.underline = spec.underline
    if spec.color is not None:
        font.color.rgb = RGBColor.from_string(spec.color)
    if spec.strike:
        font._element.set("strike", "sngStrike")


def _add_box(shapes: Any, box: Box) -> None:
    frame = shapes.add_textbox(Emu(box.left), Emu(box.top), Emu(box.width), Emu(box.height)).text_frame
    for n, para in enumerate(box.paras):
        p = frame.paragraphs[0] if n == 0 else frame.add_paragraph()
        p.level = para.level
        p.alignment = para.align
        if para.bullet is not None:
            etree.SubElement(p._p.get_or_add_pPr(), qn("a:buChar"), char=para.bullet)
        for run in para.runs:
            _fill_run(p.add_run(), run)


def write_deck(deck: list[Slide], path: Path) -> None:
    prs = Presentation()
    for spec in deck:
        slide = prs.slides.add_slide(prs.slide_layouts[6])  # blank: no placeholders
        if spec.background is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = RGBColor.from_string(spec.background)
        for box in spec.boxes:
            _add_box(slide.shapes, box)
        if spec.group:
            group = slide.shapes.add_group_shape()
            for box in spec.group:
                _add_box(group.shapes, box)
        if spec.picture:
            slide.shapes.add_picture(io.BytesIO(PNG), Emu(100000), Emu(100000))
        if spec.table is not None:
            table = slide.shapes.add_table(2, 2, Emu(500000), Emu(3000000), Emu(3000000), Emu(800000)).table
            for i, run in enumerate(spec.table):
                _fill_run(table.cell(i // 2, i % 2).text_frame.paragraphs[0].add_run(), run)
        slide.notes_slide.notes_text_frame.text = spec.notes
    prs.save(str(path))


def _replace_run(box: Box, p: int, r: int, **changes: Any) -> Box:
    para = box.paras[p]
    new_runs = list(para.runs)
    new_runs[r] = dataclasses.replace(new_runs[r], **changes)
    new_paras = list(box.paras)
    new_paras[p] = dataclasses.replace(para, runs=tuple(new_runs))
    return dataclasses.replace(box, paras=tuple(new_paras))


RUN_CHANGES = ["size", "font", "bold", "italic", "underline", "color", "strike", "word"]
BOX_CHANGES = ["move", "align", "level", "bullet"]
CELL_CHANGES = ["text", "bold", "italic", "underline", "color"]
KINDS = (["same", "swap_slides", "drop_slide", "notes", "background", "group_align", "group_word"]
         + [f"run_{k}" for k in RUN_CHANGES] + BOX_CHANGES + [f"cell_{k}" for k in CELL_CHANGES])


def _run_change(draw: st.DrawFn, what: str, run: Run) -> dict[str, Any]:
    """One attribute of a run changed (None, True and False all drawn: OSWorld treats None and False alike)."""
    if what == "size":
        return {"size": 20 if run.size != 20 else 12}
    if what == "font":
        return {"font": "Liberation Serif"}
    if what in ("bold", "italic", "underline"):
        return {what: draw(st.sampled_from([v for v in (None, True, False) if v is not getattr(run, what)]))}
    if what == "color":
        return {"color": "00FF00"}
    if what == "strike":
        return {"strike": not run.strike}
    return {"text": "changed "}


def _change_box(draw: st.DrawFn, kind: str, box: Box) -> tuple[Box, dict[str, Any]]:
    p = draw(st.integers(0, len(box.paras) - 1))
    para = box.paras[p]
    keep: dict[str, Any] = {}
    if kind.startswith("run_"):
        r = draw(st.integers(0, len(para.runs) - 1))
        return _replace_run(box, p, r, **_run_change(draw, kind[4:], para.runs[r])), keep
    if kind == "move":
        return dataclasses.replace(box, **draw(st.sampled_from([
            {"left": box.left + draw(st.integers(1, 100000))}, {"top": box.top + 1},
            {"width": box.width * 2}, {"height": box.height + draw(st.integers(1, 5000))}]))), keep
    if kind == "align":
        para = dataclasses.replace(para, align=PP_ALIGN.JUSTIFY)
    elif kind == "level":
        para = dataclasses.replace(para, level=(para.level + 2) % 4 or 3)
        keep["examine_indent"] = True  # else 1.0.2 compares bullet levels where the later version does not
    else:
        para = dataclasses.replace(para, bullet="*" if para.bullet else "•")
    return dataclasses.replace(box, paras=tuple(q if i != p else para for i, q in enumerate(box.paras))), keep


@st.composite
def changed(draw: st.DrawFn, deck: list[Slide]) -> tuple[list[Slide], dict[str, Any]]:
    """The deck with one change, and the options the change needs kept (so both versions agree)."""
    new = list(deck)
    s = draw(st.integers(0, len(new) - 1))
    slide = new[s]
    kind = draw(st.sampled_from(KINDS))
    keep: dict[str, Any] = {}
    if kind == "swap_slides" and len(new) > 1:
        new[0], new[-1] = new[-1], new[0]
    elif kind == "drop_slide" and len(new) > 1:
        del new[s]
    elif kind == "notes":
        new[s] = dataclasses.replace(slide, notes=slide.notes + " changed")
    elif kind == "background":
        new[s] = dataclasses.replace(slide, background="00FF00")
    elif kind.startswith("cell_") and any(x.table for x in new):
        s = next(i for i, x in enumerate(new) if x.table)
        cells = list(new[s].table or ())
        what = kind[5:]
        cells[0] = dataclasses.replace(cells[0], **_run_change(draw, "word" if what == "text" else what, cells[0]))
        new[s] = dataclasses.replace(new[s], table=tuple(cells))
    elif kind.startswith("group_") and slide.group:
        box, _ = _change_box(draw, "align" if kind == "group_align" else "run_word", slide.group[0])
        new[s] = dataclasses.replace(slide, group=(box, *slide.group[1:]))
    elif kind.startswith("run_") or kind in BOX_CHANGES:
        b = draw(st.integers(0, len(slide.boxes) - 1))
        box, keep = _change_box(draw, kind, slide.boxes[b])
        new[s] = dataclasses.replace(slide, boxes=tuple(x if i != b else box for i, x in enumerate(slide.boxes)))
    return new, keep


options = st.fixed_dictionaries(
    {}, optional={**{name: st.booleans() for name in BOOL_OPTIONS},
                  "approximately_tolerance": st.sampled_from([0.005, 0.05, 0.5])})


@settings(max_examples=60, deadline=None)
@given(data=st.data(), deck=decks)
def test_compare_pptx_files_verdicts_as_osworld(data: st.DataObject, deck: list[Slide]) -> None:
    other, keep = data.draw(changed(deck))
    with tempfile.TemporaryDirectory() as tmp:
        first, second = str(Path(tmp, "a.pptx")), str(Path(tmp, "b.pptx"))
        write_deck(deck, Path(first))
        write_deck(other, Path(second))
        for opts in [{}, *data.draw(st.lists(options, min_size=2, max_size=4))]:
            opts = {**opts, "enable_debug": False, **keep}
            ours = compare_pptx_files(first, second, **opts)
            theirs = reference("compare_pptx_files")(first, second, **opts)
            assert ours == theirs, (opts, deck, other)


def _scores(tmp_path: Path, deck1: list[Slide], deck2: list[Slide], **opts: Any) -> tuple[float, float]:
    """cud's score and desktop-env 1.0.2's on two decks."""
    write_deck(deck1, tmp_path / "a.pptx")
    write_deck(deck2, tmp_path / "b.pptx")
    first, second = str(tmp_path / "a.pptx"), str(tmp_path / "b.pptx")
    return compare_pptx_files(first, second, **opts), reference("compare_pptx_files")(first, second, **opts)


def _one_box(*paras: Para, **box: Any) -> list[Slide]:
    return [Slide((Box(paras, **box),))]


def test_a_shape_without_text_may_change_size(tmp_path: Path) -> None:
    """OSWorld's later version skips the size of shapes without text (1.0.2 did not)."""
    empty = Para(())
    assert _scores(tmp_path, _one_box(empty), _one_box(empty, width=5000000)) == (1, 0)
    texted = Para((Run("alpha "),))
    assert _scores(tmp_path, _one_box(texted), _one_box(texted, width=5000000)) == (0, 0)


def test_levels_none_0_and_1_are_alike(tmp_path: Path) -> None:
    run = (Run("alpha "),)
    assert _scores(tmp_path, _one_box(Para(run, level=0)), _one_box(Para(run, level=1))) == (1, 0)
    assert _scores(tmp_path, _one_box(Para(run, level=0)), _one_box(Para(run, level=2))) == (0, 0)


def test_examine_run_count_and_blank_paragraphs(tmp_path: Path) -> None:
    one_run = _one_box(Para((Run("alpha beta "),)))
    two_runs = _one_box(Para((Run("alpha "), Run("beta "))))
    assert _scores(tmp_path, one_run, two_runs) == (0, 0)
    # without the count, the runs zip: the first pair's fonts are alike
    assert _scores(tmp_path, one_run, two_runs, examine_run_count=False)[0] == 1
    # a blank paragraph: no run and one empty run are alike
    assert _scores(tmp_path, _one_box(Para(()), Para((Run("x "),))),
                   _one_box(Para((Run(""),)), Para((Run("x "),))))[0] == 1


def test_bullet_levels_matter_only_where_a_bullet_shows(tmp_path: Path) -> None:
    run = (Run("alpha "),)
    plain = _scores(tmp_path, _one_box(Para(run, level=2)), _one_box(Para(run, level=3)), examine_indent=False)
    assert plain == (1, 0)
    bulleted = _scores(tmp_path, _one_box(Para(run, level=2, bullet="•")), _one_box(Para(run, level=3, bullet="•")),
                       examine_indent=False)
    assert bulleted == (0, 0)


def test_examples_of_each_run_and_shape_rule(tmp_path: Path) -> None:
    """Fixed examples of rules the generated changes reach only now and then, against 1.0.2 too."""
    plain = Run("alpha ")
    cases = [
        (plain, dataclasses.replace(plain, strike=True), {}, (0, 0)),
        (plain, dataclasses.replace(plain, bold=False), {}, (1, 1)),  # None and False: not bold
        (plain, dataclasses.replace(plain, italic=False), {}, (1, 1)),
        (plain, dataclasses.replace(plain, underline=True), {}, (0, 0)),
        (plain, dataclasses.replace(plain, underline=False), {}, (1, 1)),
        (plain, dataclasses.replace(plain, bold=True), {"examine_font_bold": False}, (1, 1)),
    ]
    for run1, run2, opts, expected in cases:
        assert _scores(tmp_path, _one_box(Para((run1,))), _one_box(Para((run2,))), **opts) == expected, (run2, opts)
    # a table's cells compare boldness whatever examine_font_bold says
    table1 = [Slide((Box((Para((plain,)),)),), table=(plain,) * 4)]
    table2 = [Slide((Box((Para((plain,)),)),), table=(dataclasses.replace(plain, bold=True),) + (plain,) * 3)]
    assert _scores(tmp_path, table1, table2, examine_font_bold=False) == (0, 0)
    # a grouped text box's alignment is compared by the pass over every text shape
    box = Box((Para((plain,)),))
    grouped1 = [Slide((box,), group=(box,))]
    grouped2 = [Slide((box,), group=(Box((Para((plain,), align=PP_ALIGN.CENTER),)),))]
    assert _scores(tmp_path, grouped1, grouped2) == (0, 0)
    assert _scores(tmp_path, grouped1, grouped2, examine_alignment=False) == (1, 1)
