"""cud's compare_pdfs (pypdf's text) gives OSWorld's verdicts (PyMuPDF's text) on generated PDFs.

fpdf2 writes pages of text lines and a changed copy (a word, two lines swapped, a line moved or
resized, a line pushed to the next page, a blank page); OSWorld's own compare_pdfs from
desktop-env, which reads the text with PyMuPDF, and cud's must agree. On these PDFs the two
extractors give the same text, so the scores are equal too.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fpdf import FPDF
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.osworld.metrics.pdfs import compare_pdfs
from tests.support.osworld_reference import reference

WORDS = ["alpha", "Beta", "gamma", "x", "café", "über", "fi", "end.", "(1)", "a-b", "12,5"]


def osworld_compare_pdfs() -> Callable[..., Any]:
    with warnings.catch_warnings():
        # PyMuPDF warns that its old name (fitz, as OSWorld imports it) is deprecated
        warnings.simplefilter("ignore", FutureWarning)
        return reference("compare_pdfs")


@dataclasses.dataclass(frozen=True)
class Line:
    text: str
    x: float = 10.0
    y_shift: float = 0.0
    size: int = 12


Pages = list[list[Line]]

lines = st.builds(Line, st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join))
documents = st.lists(st.lists(lines, max_size=5), min_size=1, max_size=3)


@st.composite
def changed(draw: st.DrawFn, pages: Pages) -> Pages:
    new = [list(page) for page in pages]
    page = new[draw(st.integers(0, len(new) - 1))]
    i = draw(st.integers(0, max(len(page) - 1, 0)))
    kind = draw(st.sampled_from(["same", "word", "swap", "move", "size", "next_page", "blank_page"]))
    if kind == "word" and page:
        page[i] = dataclasses.replace(page[i], text=page[i].text + " " + draw(st.sampled_from(WORDS)))
    elif kind == "swap" and len(page) > 1:
        page[0], page[-1] = dataclasses.replace(page[0], text=page[-1].text), dataclasses.replace(page[-1], text=page[0].text)
    elif kind == "move" and page:
        # less than the line spacing: each line keeps a baseline of its own
        page[i] = dataclasses.replace(page[i], x=draw(st.floats(5, 60)), y_shift=draw(st.floats(-3, 3)))
    elif kind == "size" and page:
        page[i] = dataclasses.replace(page[i], size=draw(st.sampled_from([8, 14, 20])))
    elif kind == "next_page" and page:
        new.insert(new.index(page) + 1, [page.pop()])
    elif kind == "blank_page":
        new.insert(draw(st.integers(0, len(new))), [])
    return new


def write_pdf(pages: Pages, path: Path) -> None:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for page in pages:
        pdf.add_page()
        for n, line in enumerate(page):
            pdf.set_font_size(line.size)
            pdf.text(line.x, 20 + 12 * n + line.y_shift, line.text)
    pdf.output(str(path))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), pages=documents)
def test_compare_pdfs_scores_as_osworld(data: st.DataObject, pages: Pages) -> None:
    other = data.draw(changed(pages))
    with tempfile.TemporaryDirectory() as tmp:
        first, second = str(Path(tmp, "a.pdf")), str(Path(tmp, "b.pdf"))
        write_pdf(pages, Path(first))
        write_pdf(other, Path(second))
        for args in [(first, second), (second, first), ([first, second], [second, second])]:
            assert compare_pdfs(*args) == osworld_compare_pdfs()(*args), (pages, other)


def test_unreadable_and_absent_files_score_as_osworld(tmp_path: Path) -> None:
    """An unreadable file scores 0; an absent one (None) is PyMuPDF's new empty document: no text."""
    good, empty, bad = tmp_path / "good.pdf", tmp_path / "empty.pdf", tmp_path / "bad.pdf"
    write_pdf([[Line("alpha")]], good)
    write_pdf([[]], empty)
    bad.write_bytes(b"%PDF-1.4 not really")
    cases = [(str(good), str(bad)), (str(good), str(tmp_path / "missing.pdf")), (None, None), (None, str(empty)),
             (None, str(good)), ([str(good), str(bad)], [str(good), str(good)])]
    for first, second in cases:
        assert compare_pdfs(first, second) == osworld_compare_pdfs()(first, second), (first, second)
    assert compare_pdfs(None, None) == 1.0
    assert compare_pdfs(str(good), str(good)) == 1.0
