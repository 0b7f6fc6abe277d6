"""cud's LibreOffice settings and presentation metrics give OSWorld's own scores.

Hypothesis writes a registrymodifications.xcu (Writer's default font, Impress's presenter screen,
the autosave interval, each present or not), a presentation (its size, a transition on a slide,
the slide master's fill colours) and an accessibility tree, and each metric of
cud.osworld.metrics.office_settings scores them as OSWorld's function from desktop-env
(tests/support/osworld_reference.py) does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from pptx import Presentation
from pptx.util import Inches

from cud.osworld.metrics import metric
from tests.support.osworld_reference import reference

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
FONTS = ["Times New Roman", "Arial", "Liberation Serif"]
COLOURS = ["FF0000", "0000FF", "00FF00", "000000", "808080", "C02020"]
TRANSITIONS = ["dissolve", "fade", "wipe"]


def outcome(function: Any, *args: Any) -> Any:
    """The score, or the exception's type: where OSWorld's function raises, ours must too."""
    try:
        return function(*args)
    except Exception as e:
        return type(e)


def same(name: str, *args: Any) -> Any:
    ours, theirs = outcome(metric(name), *args), outcome(reference(name), *args)
    assert ours == theirs, (name, args)
    return ours


def xcu(font: str | None, presenter: str | None, autosave: str | None) -> str:
    items = []
    if font is not None:
        items.append('<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" '
                     f'oor:op="fuse"><value>{font}</value></prop></item>')
    if presenter is not None:
        items.append('<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen" '
                     f'oor:op="fuse"><value>{presenter}</value></prop></item>')
    if autosave is not None:
        items.append('<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" '
                     f'oor:op="fuse"><value>{autosave}</value></prop></item>')
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:oor="http://openoffice.org/2001/registry">'
            + "".join(items) + "</oor:items>")


@settings(max_examples=25, deadline=None)
@given(font=st.none() | st.sampled_from(FONTS), presenter=st.none() | st.sampled_from(["false", "true", "False"]),
       autosave=st.none() | st.sampled_from(["3", "10", "x"]), broken=st.booleans())
def test_settings_metrics_score_as_osworld(font: str | None, presenter: str | None, autosave: str | None,
                                          broken: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "registrymodifications.xcu")
        text = xcu(font, presenter, autosave)
        path.write_text(text[:-5] if broken else text)
        for wanted in FONTS:
            same("find_default_font", str(path), {"font_name": wanted})
        same("check_presenter_console_disable", str(path))
        for minutes in (3, 10):
            same("check_auto_saving_time", str(path), {"minutes": minutes})
    same("find_default_font", None, {"font_name": "Arial"})
    same("check_presenter_console_disable", None)
    same("check_auto_saving_time", "/nonexistent/registrymodifications.xcu", {"minutes": 3})


def write_pptx(path: Path, width: int, height: int, transitions: list[str | None], colours: list[str]) -> None:
    presentation = Presentation()
    presentation.slide_width, presentation.slide_height = Inches(width), Inches(height)
    for transition in transitions:
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])
        if transition is not None:
            element = etree.SubElement(slide._element, f"{{{P}}}transition")
            etree.SubElement(element, f"{{{P}}}{transition}")
    holder = etree.SubElement(presentation.slide_master._element, f"{{{P}}}extLst")
    for colour in colours:
        fill = etree.SubElement(holder, f"{{{A}}}solidFill")
        etree.SubElement(fill, f"{{{A}}}srgbClr", val=colour)
    presentation.save(str(path))


@settings(max_examples=25, deadline=None)
@given(width=st.sampled_from([4, 10, 13]), height=st.sampled_from([5, 10, 7]),
       transitions=st.lists(st.none() | st.sampled_from(TRANSITIONS), max_size=3),
       colours=st.lists(st.sampled_from(COLOURS), max_size=3))
def test_presentation_metrics_score_as_osworld(width: int, height: int, transitions: list[str | None],
                                               colours: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp, "deck.pptx"))
        write_pptx(Path(path), width, height, transitions, colours)
        same("check_slide_orientation_Portrait", path)
        for slide_idx in range(4):
            for kind in TRANSITIONS:
                same("check_transition", path, {"slide_idx": slide_idx, "transition_type": kind})
        for colour in ("red", "blue", "green", "black", "purple"):
            same("check_page_number_colors", path, {"color": colour})


@given(names=st.lists(st.sampled_from(["Slides View", "Outline", "slides view", ""]), max_size=3))
@settings(max_examples=20, deadline=None)
def test_check_left_panel_scores_as_osworld(names: list[str]) -> None:
    frames = "".join(f'<document-frame name="{name}"/>' for name in names)
    tree = f'<desktop-frame><application name="soffice"><frame>{frames}</frame></application></desktop-frame>'
    same("check_left_panel", tree)


def test_the_generated_inputs_decide_verdicts_both_ways(tmp_path: Path) -> None:
    """Each metric passes and fails on these inputs: the generated ones exercise both verdicts."""
    good, bad = tmp_path / "good.xcu", tmp_path / "bad.xcu"
    good.write_text(xcu("Times New Roman", "false", "3"))
    bad.write_text(xcu("Arial", "true", "10"))
    assert [metric("find_default_font")(str(p), {"font_name": "Times New Roman"}) for p in (good, bad)] == [1, 0]
    assert [metric("check_presenter_console_disable")(str(p)) for p in (good, bad)] == [1, 0]
    assert [metric("check_auto_saving_time")(str(p), {"minutes": 3}) for p in (good, bad)] == [1, 0]
    tall, wide = tmp_path / "tall.pptx", tmp_path / "wide.pptx"
    write_pptx(tall, 5, 10, ["dissolve"], ["FF0000", "000000"])
    write_pptx(wide, 10, 5, [None], ["0000FF", "000000"])
    assert [metric("check_slide_orientation_Portrait")(str(p)) for p in (tall, wide)] == [1, 0]
    rules = {"slide_idx": 0, "transition_type": "dissolve"}
    assert [metric("check_transition")(str(p), rules) for p in (tall, wide)] == [1, 0]
    assert [metric("check_page_number_colors")(str(p), {"color": "red"}) for p in (tall, wide)] == [1, 0]
    panel = '<r><document-frame name="Slides View"/></r>'
    assert [metric("check_left_panel")(tree) for tree in (panel, "<r/>")] == [1, 0]
