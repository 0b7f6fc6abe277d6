"""cud's compare_docx_files and compare_docx_tables give OSWorld's own scores on generated documents.

Hypothesis writes a document (.docx with python-docx, or .odt with odfpy: paragraphs of words,
runs, tables) and a subtly changed copy (one word, a letter's case, a run made bold, blanks, two
paragraphs swapped, a table cell), and each option combination is scored by cud's port and by
OSWorld's function from desktop-env (tests/support/osworld_reference.py): the scores must be equal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docx
from hypothesis import given, settings
from hypothesis import strategies as st
from odf.opendocument import OpenDocumentText
from odf.text import P, Span

from cud.osworld.metrics.documents import compare_docx_files, compare_docx_tables
from tests.support.osworld_reference import reference

WORDS = ["alpha", "Beta", "gamma", "DELTA", "eps", "x", "zeta", "Ωmega"]
SEPARATORS = [" ", " ", " ", "  ", "\t"]
DOCX_OPTIONS = ("ignore_blanks", "content_only", "ignore_case", "ignore_order", "delete_empty_lines", "fuzzy_match")


@dataclasses.dataclass
class Doc:
    """A document as runs per paragraph (a run: text, bold) and tables of cell texts."""

    paragraphs: list[list[tuple[str, bool]]]
    tables: list[list[list[str]]]

    def copy(self) -> Doc:
        return Doc([list(p) for p in self.paragraphs], [[list(r) for r in t] for t in self.tables])


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, bool]]:
    words = draw(st.lists(st.sampled_from(WORDS), max_size=5))
    out = []
    for i, word in enumerate(words):
        sep = draw(st.sampled_from(SEPARATORS)) if i else draw(st.sampled_from(["", "", " "]))
        out.append((sep + word, draw(st.booleans())))
    return out


tables = st.lists(st.lists(st.lists(st.sampled_from(WORDS + ["", " x "]), min_size=2, max_size=2),
                           min_size=1, max_size=3), max_size=2)
docs = st.builds(Doc, st.lists(runs(), max_size=6), tables)


@st.composite
def changed(draw: st.DrawFn, doc: Doc) -> Doc:
    """The document with one small change, or none."""
    new = doc.copy()
    paras = new.paragraphs
    kind = draw(st.sampled_from(["same", "word", "case", "bold", "swap", "blank", "spaces", "drop", "cell",
                                 "cell_space", "row"]))
    i = draw(st.integers(0, max(len(paras) - 1, 0)))
    if kind == "word" and paras and paras[i]:
        j = draw(st.integers(0, len(paras[i]) - 1))
        text, bold = paras[i][j]
        paras[i][j] = (text.replace(text.strip(), draw(st.sampled_from(WORDS))), bold)
    elif kind == "case" and paras:
        paras[i] = [(text.upper(), bold) for text, bold in paras[i]]
    elif kind == "bold" and paras and paras[i]:
        paras[i] = [(text, not bold) for text, bold in paras[i]]
    elif kind == "swap" and len(paras) > 1:
        paras[0], paras[-1] = paras[-1], paras[0]
    elif kind == "blank":
        paras.insert(i, draw(st.sampled_from([[], [(" ", False)]])))
    elif kind == "spaces" and paras:
        paras[i] = [*paras[i], ("  ", False)]
    elif kind == "drop" and paras:
        del paras[i]
    elif kind in ("cell", "cell_space", "row") and new.tables:
        table = new.tables[draw(st.integers(0, len(new.tables) - 1))]
        row = table[draw(st.integers(0, len(table) - 1))]
        if kind == "cell":
            row[0] = draw(st.sampled_from(WORDS))
        elif kind == "cell_space":
            row[1] = f" {row[1]}\t"
        else:
            table.append(["new", "row"])
    return new


def write_docx(doc: Doc, path: Path) -> None:
    document = docx.Document()
    for paragraph in doc.paragraphs:
        p = document.add_paragraph()
        for text, bold in paragraph:
            p.add_run(text).bold = bold
    for rows in doc.tables:
        table = document.add_table(rows=len(rows), cols=2)
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                table.cell(r, c).text = text
    document.save(str(path))


def write_odt(doc: Doc, path: Path) -> None:
    document = OpenDocumentText()
    for paragraph in doc.paragraphs:
        p = P()
        for n, (text, _bold) in enumerate(paragraph):
            # alternate plain text and spans: OSWorld reads both
            p.addElement(Span(text=text)) if n % 2 else p.addText(text)
        document.text.addElement(p)
    document.save(str(path))


@contextlib.contextmanager
def each_file_read_once(*functions: Callable[..., Any]) -> Iterator[None]:
    """The functions' python-docx ``Document`` and odfpy ``load`` read each path once, then hand out the same
    object: 64 option combinations of two documents, each opened by both implementations, spent nine tenths
    of this module's time parsing the same XML. Both only read what they are given."""
    names = ("Document", "load")
    saved = [(function.__globals__, name, function.__globals__[name]) for function in functions for name in names
             if name in function.__globals__]
    memo = {reader: functools.cache(reader) for _, _, reader in saved}
    for namespace, name, reader in saved:
        namespace[name] = memo[reader]
    try:
        yield
    finally:
        for namespace, name, reader in saved:
            namespace[name] = reader


def both(name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    ours = {"compare_docx_files": compare_docx_files, "compare_docx_tables": compare_docx_tables}[name]
    return ours(*args, **kwargs), reference(name)(*args, **kwargs)


@settings(max_examples=20, deadline=None)
@given(data=st.data(), doc=docs, ext=st.sampled_from([".docx", ".odt"]))
def test_compare_docx_files_scores_as_osworld(data: st.DataObject, doc: Doc, ext: str) -> None:
    other = data.draw(changed(doc))
    with tempfile.TemporaryDirectory() as tmp:
        write = write_docx if ext == ".docx" else write_odt
        first, second = Path(tmp, "a" + ext), Path(tmp, "b" + ext)
        write(doc, first)
        write(other, second)
        ours, theirs = both("compare_docx_files", str(first), str(second))  # OSWorld's defaults, each file read anew
        assert ours == theirs, (doc, other)
        # every combination: some options matter only together (fuzzy_match and ignore_case without ignore_blanks)
        with each_file_read_once(compare_docx_files, reference("compare_docx_files")):
            for values in itertools.product([False, True], repeat=len(DOCX_OPTIONS)):
                opts = dict(zip(DOCX_OPTIONS, values, strict=True))
                ours, theirs = both("compare_docx_files", str(first), str(second), **opts)
                assert ours == theirs, (opts, doc, other)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), doc=docs)
def test_compare_docx_tables_scores_as_osworld(data: st.DataObject, doc: Doc) -> None:
    other = data.draw(changed(doc))
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp, "a.docx"), Path(tmp, "b.docx")
        write_docx(doc, first)
        write_docx(other, second)
        ours, theirs = both("compare_docx_tables", str(first), str(second))
        assert ours == theirs, (doc, other)


def test_what_osworld_scores_0_without_reading(tmp_path: Path) -> None:
    """Absent files, mixed or unknown kinds, and files that are not documents: 0, as OSWorld."""
    doc = Doc([[("alpha", False)]], [[["a", "b"]]])
    write_docx(doc, tmp_path / "a.docx")
    write_odt(doc, tmp_path / "a.odt")
    (tmp_path / "bad.docx").write_bytes(b"not a zip")
    (tmp_path / "a.txt").write_text("alpha")
    docx_path, odt_path = str(tmp_path / "a.docx"), str(tmp_path / "a.odt")
    pairs = [(None, docx_path), (docx_path, ""), (docx_path, odt_path), (str(tmp_path / "a.txt"),) * 2,
             (docx_path, str(tmp_path / "bad.docx"))]
    for first, second in pairs:
        assert both("compare_docx_files", first, second) == (0, 0)
    assert both("compare_docx_files", docx_path, docx_path) == (1, 1)
    assert both("compare_docx_files", odt_path, odt_path) == (1, 1)
    assert both("compare_docx_tables", None, docx_path) == (0, 0)
    assert both("compare_docx_tables", docx_path, str(tmp_path / "bad.docx")) == (0, 0)
    assert both("compare_docx_tables", docx_path, docx_path) == (1, 1)


def test_the_changes_decide_verdicts_both_ways(tmp_path: Path) -> None:
    """The generated changes are ones the options tell apart: a bold run passes, a changed word
    fails, swapped paragraphs pass only with ignore_order, a changed case only with ignore_case."""
    base = Doc([[("alpha", False), (" Beta", False)], [("gamma", False)]], [[["a", "b"]]])
    bold = base.copy()
    bold.paragraphs[0] = [("alpha", True), (" Beta", False)]
    word = base.copy()
    word.paragraphs[1] = [("zeta", False)]
    swapped = base.copy()
    swapped.paragraphs.reverse()
    upper = base.copy()
    upper.paragraphs[1] = [("GAMMA", False)]
    paths = {}
    for name, doc in [("base", base), ("bold", bold), ("word", word), ("swapped", swapped), ("upper", upper)]:
        paths[name] = str(tmp_path / f"{name}.docx")
        write_docx(doc, Path(paths[name]))
    assert compare_docx_files(paths["base"], paths["bold"]) == 1
    assert compare_docx_files(paths["base"], paths["word"]) == 0
    assert compare_docx_files(paths["base"], paths["swapped"]) == 0
    assert compare_docx_files(paths["base"], paths["swapped"], ignore_order=True) == 1
    assert compare_docx_files(paths["base"], paths["upper"]) == 0
    assert compare_docx_files(paths["base"], paths["upper"], ignore_case=True) == 1
    assert 0 < compare_docx_files(paths["base"], paths["word"], fuzzy_match=True) < 1


def test_the_judge_runs_the_document_slide_image_and_pdf_metrics(tmp_path: Path) -> None:
    """Each port is registered (FUNCTIONS, the catalog) and scores through the judge's request."""
    from fpdf import FPDF
    from PIL import Image
    from pptx import Presentation

    from cud.osworld.judge import judge

    write_docx(Doc([[("alpha", False)]], [[["a", "b"]]]), tmp_path / "a.docx")
    Presentation().save(str(tmp_path / "a.pptx"))
    Image.new("L", (10, 10), 128).save(tmp_path / "a.png")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.text(10, 20, "alpha")
    pdf.output(str(tmp_path / "a.pdf"))
    requests = [("compare_docx_files", "a.docx", {"ignore_case": True}), ("compare_docx_tables", "a.docx", {}),
                ("compare_pptx_files", "a.pptx", {"examine_run_count": False, "examine_shape_lenient_height": True}),
                ("compare_images", "a.png", {"reference_base_result": 0.5}), ("compare_pdfs", "a.pdf", {})]
    for metric, name, opts in requests:
        arg = {"path": str(tmp_path / name)}
        assert judge({"metric": metric, "result": arg, "expected": arg, "options": opts}) == {"score": 1.0}, metric
    gold = {"path": str(tmp_path / "a.docx")}
    missing = judge({"metric": "compare_docx_files", "result": {"none": "absent"}, "expected": gold})
    assert missing == {"score": 0.0}
