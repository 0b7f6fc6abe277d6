"""OSWorld's Writer metrics on a document's formatting: spacing, tab stops, fonts, page breaks, footers...

Ported from OSWorld's desktop_env/evaluators/metrics/docs.py (desktop-env 1.0.2, Apache-2.0) with
their logic and scores kept, quirks included (check_highlighted_words scores 1 when nothing is
highlighted; compare_subscript_contains compares runs pairwise). Only the imports differ: docs.py
imports easyocr and scikit-image for other metrics.
"""

from __future__ import annotations

import logging
import re
from io import BytesIO
from typing import Any

from docx import Document
from docx.enum.text import WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from odf.opendocument import load
from odf.text import Span
from PIL import Image
from rapidfuzz import fuzz

from cud.osworld.metrics.documents import compare_docx_files, paragraph_texts

__all__ = (
    "check_highlighted_words", "check_italic_font_size_14", "check_tabstops", "compare_docx_files_and_ignore_new_lines",
    "compare_docx_images",
    "compare_font_names", "compare_line_spacing", "compare_references", "compare_subscript_contains",
    "contains_page_break", "evaluate_strike_through_last_paragraph", "has_page_numbers_in_footers",
    "is_first_line_centered",
)

logger = logging.getLogger(__name__)

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _documents(*paths: str) -> list[Any] | None:
    """The documents, or None when one cannot be read (OSWorld's verdict then: 0, not an error)."""
    try:
        return [Document(path) for path in paths]
    except Exception as e:
        logger.error("Error: %s", e)
        return None


def contains_page_break(docx_file: str | None, rules: dict[str, Any]) -> float:
    """1 when the document has a page break (exactly ``page_break_count`` of them, if given)."""
    if not docx_file:
        return 0
    docs = _documents(docx_file)
    if docs is None:
        return 0
    try:
        expected_page_break_count = rules["page_break_count"]
    except Exception:  # OSWorld's: any rules without the key (or no mapping) mean "any count"
        expected_page_break_count = None
    page_break_count = 0
    for paragraph in docs[0].paragraphs:
        for run in paragraph.runs:
            for br in run.element.findall(".//w:br", {"w": _W}):
                if br is not None and f"{{{_W}}}type" in br.attrib and br.attrib[f"{{{_W}}}type"] == "page":
                    page_break_count += 1
    if expected_page_break_count is not None and page_break_count != expected_page_break_count:
        return 0
    return 1 if page_break_count > 0 else 0


def compare_line_spacing(docx_file1: str | None, docx_file2: str | None) -> float:
    """1 when the texts match (compare_docx_files) and each paragraph's line spacing is the same."""
    if not docx_file1 or not docx_file2:
        return 0
    if not compare_docx_files(docx_file1, docx_file2):
        return 0
    docs = _documents(docx_file1, docx_file2)
    if docs is None:
        return 0
    doc1, doc2 = docs
    if len(doc1.paragraphs) != len(doc2.paragraphs):
        return 0
    for para1, para2 in zip(doc1.paragraphs, doc2.paragraphs, strict=True):
        if para1.paragraph_format.line_spacing != para2.paragraph_format.line_spacing:
            return 0
    return 1


def compare_font_names(docx_file: str | None, rules: dict[str, Any]) -> float:
    """1 when every run of the body's paragraphs names the font ``font_name``."""
    if not docx_file:
        return 0
    docs = _documents(docx_file)
    if docs is None:
        return 0
    expected_font = rules["font_name"]
    for paragraph in docs[0].paragraphs:
        for run in paragraph.runs:
            if run.font.name != expected_font:
                return 0
    return 1


def compare_subscript_contains(docx_file1: str | None, docx_file2: str | None) -> float:
    """1 when some run, paired by position in paired paragraphs, is subscript in both documents."""
    if not docx_file1 or not docx_file2:
        return 0
    docs = _documents(docx_file1, docx_file2)
    if docs is None:
        return 0
    for para1, para2 in zip(docs[0].paragraphs, docs[1].paragraphs, strict=False):
        for run1, run2 in zip(para1.runs, para2.runs, strict=False):
            if run1.font.subscript and run2.font.subscript:
                return 1
    return 0


def has_page_numbers_in_footers(docx_file: str | None) -> float:
    """1 when each section's footer's first paragraph has a digit."""
    if not docx_file:
        return 0
    docs = _documents(docx_file)
    if docs is None:
        return 0
    for section in docs[0].sections:
        footer = section.footer
        if footer is None:
            return 0
        footer_text = footer.paragraphs[0].text if footer.paragraphs else ""
        if not any(char.isdigit() for char in footer_text):
            return 0
    return 1


def is_first_line_centered(docx_file: str | None) -> float:
    """1 when the first paragraph is centred (a document without paragraphs raises, as OSWorld's)."""
    if not docx_file:
        return 0
    docs = _documents(docx_file)
    if docs is None:
        return 0
    first_paragraph = docs[0].paragraphs[0]
    return 1 if first_paragraph.paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER else 0


def _counted_tab(tab: Any) -> bool:
    """False for a CLEAR tab stop and the default left one at 0, which OSWorld does not compare."""
    return not (tab.alignment == WD_TAB_ALIGNMENT.CLEAR or (tab.alignment == WD_TAB_ALIGNMENT.LEFT and tab.position == 0))


def check_tabstops(docx_file1: str | None, docx_file2: str | None, **kwargs: Any) -> float:
    """1 minus the mean, over non-blank paragraphs, of the tab stops' summed position difference
    over the text width; 0 when the counts or an alignment differ (or the word count before a tab
    is not ``word_number_split_by_tabstop``)."""
    if not docx_file1 or not docx_file2:
        return 0.0
    docs = _documents(docx_file1, docx_file2)
    if docs is None:
        return 0.0
    doc1, doc2 = docs
    para1 = [p for p in doc1.paragraphs if p.text.strip()]
    para2 = [p for p in doc2.paragraphs if p.text.strip()]
    if len(para1) != len(para2):
        return 0.0
    if kwargs.get("word_number_split_by_tabstop") is not None:
        number = kwargs["word_number_split_by_tabstop"]
        index = kwargs.get("index", 0)
        for p1 in para1:
            splits = p1.text.split("\t")
            if len(splits) == 0:
                return 0.0
            words = [x for x in re.split(r"\s", splits[index]) if x.strip()]
            if len(words) != number:
                return 0.0
    section = doc2.sections[0]
    paragraph_width = section.page_width - section.left_margin - section.right_margin
    minus = 0.0
    for p1, p2 in zip(para1, para2, strict=True):
        tabs1 = [tab for tab in p1.paragraph_format.tab_stops if _counted_tab(tab)]
        tabs2 = [tab for tab in p2.paragraph_format.tab_stops if _counted_tab(tab)]
        if len(tabs1) != len(tabs2):
            return 0.0
        difference = 0.0
        for t1, t2 in zip(tabs1, tabs2, strict=True):
            if t1.alignment != t2.alignment:
                return 0.0
            difference += abs(t1.position - t2.position)
        minus += difference / paragraph_width
    # OSWorld divides by the paragraph count unguarded: no non-blank paragraph raises, as there.
    score: float = 1 - (minus / len(para1))
    return score


def check_highlighted_words(file_path1: str | None, file_path2: str | None) -> float:
    """For .odt: 1 when the texts match and no span's automatic style has a yellow (#ffff00) background."""
    if not file_path1 or not file_path2:
        return 0
    if not compare_docx_files(file_path1, file_path2):
        return 0
    doc = load(file_path1)
    highlighted = False
    for span in doc.getElementsByType(Span):
        style_name = span.getAttribute("stylename")
        if style_name:
            for automatic_style in doc.automaticstyles.childNodes:
                if automatic_style.getAttribute("name") == style_name:
                    for prop in automatic_style.childNodes:
                        if prop.getAttribute("backgroundcolor") == "#ffff00":
                            highlighted = True
                            break
            if highlighted:
                break
    return 0 if highlighted else 1


def evaluate_strike_through_last_paragraph(file_path1: str | None, file_path2: str | None) -> float:
    """1 when the texts match and every run of the last paragraph is struck through."""
    if not file_path1 or not file_path2:
        return 0
    if not compare_docx_files(file_path1, file_path2):
        return 0
    docs = _documents(file_path1)
    if docs is None:
        return 0
    for run in docs[0].paragraphs[-1].runs:
        if not run.font.strike:
            return 0
    return 1


def check_italic_font_size_14(path1: str | None, path2: str | None) -> float:
    """1 when the texts match and every italic run is 14 pt."""
    if not path1 or not path2:
        return 0
    if not compare_docx_files(path1, path2):
        return 0
    docs = _documents(path1)
    if docs is None:
        return 0
    for paragraph in docs[0].paragraphs:
        for run in paragraph.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0
    return 1


def _docx_paragraph_texts(file1: str, file2: str) -> tuple[list[str], list[str]] | None:
    """Both .docx files' paragraph texts, or None (score 0) when not both .docx or one is unreadable: OSWorld's
    reader of compare_docx_files, which this metric's original takes no .odt of."""
    if not (file1.endswith(".docx") and file2.endswith(".docx")):
        logger.error("Unsupported file types or mismatch between file types: %s, %s", file1, file2)
        return None
    return paragraph_texts(file1, file2)


def compare_docx_files_and_ignore_new_lines(file1: str | None, file2: str | None, **options: Any) -> float:
    """1 when the non-empty paragraphs' texts match (blanks folded unless ``ignore_blanks`` is false)."""
    ignore_blanks = options.get("ignore_blanks", True)
    if not file1 or not file2:
        return 0
    both = _docx_paragraph_texts(file1, file2)
    if both is None:
        return 0
    doc1_paragraphs = [p for p in both[0] if p != ""]
    doc2_paragraphs = [p for p in both[1] if p != ""]
    if ignore_blanks:
        text1 = re.sub(r"\s+", " ", "\n".join(doc1_paragraphs)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(doc2_paragraphs)).strip()
        return 0 if text1 != text2 else 1
    if len(doc1_paragraphs) != len(doc2_paragraphs):
        return 0
    for p1, p2 in zip(doc1_paragraphs, doc2_paragraphs, strict=True):
        if p1 != p2:
            return 0
    return 1


def compare_references(file1: str | None, file2: str | None, **options: Any) -> float:
    """The mean fuzzy ratio of the paragraphs after the ``reference_indicator`` paragraph, rescaled
    so that ``reference_base_result`` (+0.01) and below score 0 and 1 scores 1."""
    if not file1 or not file2:
        return 0
    reference_indicator = options.get("reference_indicator", "References")
    reference_base_result = options.get("reference_base_result", 0.5)
    both = _docx_paragraph_texts(file1, file2)
    if both is None:
        return 0
    doc1_paragraphs, doc2_paragraphs = both
    ref1_idx = doc1_paragraphs.index(reference_indicator) if reference_indicator in doc1_paragraphs else -1
    ref2_idx = doc2_paragraphs.index(reference_indicator) if reference_indicator in doc2_paragraphs else -1
    if ref1_idx == -1 and ref2_idx == -1:
        return 1
    if ref1_idx == -1 or ref2_idx == -1:
        return 0
    ref1 = [p for p in doc1_paragraphs[ref1_idx + 1:] if p.strip()]
    ref2 = [p for p in doc2_paragraphs[ref2_idx + 1:] if p.strip()]
    if len(ref1) != len(ref2):
        return 0
    total_similarity = 0.0
    for r1, r2 in zip(ref1, ref2, strict=True):
        total_similarity += fuzz.ratio(r1, r2) / 100.0
    # OSWorld divides unguarded: no references after both indicators raises ZeroDivisionError, as there.
    result = total_similarity / len(ref1)
    epsilon = 0.01
    if result >= reference_base_result + epsilon:
        score: float = (result - reference_base_result) / (1 - reference_base_result)
        return score
    return 0


def _images(doc: Any) -> list[BytesIO]:
    """The document part's images, in its relationships' order."""
    return [BytesIO(rel.target_part.blob) for rel in doc.part.rels.values() if "image" in rel.reltype]


def compare_docx_images(docx_file1: str | None, docx_file2: str | None) -> float:
    """1 when both documents have as many images, pairwise equal in decoded pixels."""
    if not docx_file1 or not docx_file2:
        return 0
    docs = _documents(docx_file1, docx_file2)
    if docs is None:
        return 0
    images1, images2 = _images(docs[0]), _images(docs[1])
    if len(images1) != len(images2):
        return 0
    for img1, img2 in zip(images1, images2, strict=True):
        if Image.open(img1).tobytes() != Image.open(img2).tobytes():
            return 0
    return 1
