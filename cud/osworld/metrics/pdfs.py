"""OSWorld's ``compare_pdfs``: the similarity of two PDFs' texts, pair by pair.

Ported from OSWorld's desktop_env/evaluators/metrics/chrome.py (desktop-env 1.0.2, Apache-2.0).
OSWorld extracts the text with PyMuPDF (fitz); cud uses pypdf instead, since PyMuPDF is over
100 MB and AGPL-licensed. The two extractors lay text out differently (spaces, line breaks), so
a partial score is not OSWorld's; the verdict is: a pair scores 1 exactly when its two texts are
equal, and pypdf's texts are equal where PyMuPDF's are (tests/test_osworld_metrics_pdfs.py
checks the verdicts against OSWorld's own function on generated PDFs). Pages are joined as
PyMuPDF's are, each page's text ending a line, so text moved across a page break still differs.
What cud cannot follow: PyMuPDF also opens other formats (plain text, images, EPUB) by their
names, which pypdf refuses, so such a file scores 0 here.
"""

from __future__ import annotations

import logging
from typing import Any

from pypdf import PdfReader
from rapidfuzz import fuzz

__all__ = ("compare_pdfs", "pdf_text")

logger = logging.getLogger(__name__)


def pdf_text(pdf_path: Any) -> str:
    """The text of every page, each ending a line, stripped.

    A None path is PyMuPDF's ``fitz.open(None)``: a new empty document, whose text is empty
    (so two absent files score 1 in OSWorld, and here).
    """
    if pdf_path is None or pdf_path == "":
        return ""
    if not isinstance(pdf_path, str):
        raise TypeError(f"bad filename: {pdf_path!r}")
    text = ""
    for page in PdfReader(pdf_path).pages:
        page_text = page.extract_text()
        if page_text:
            text += page_text if page_text.endswith("\n") else page_text + "\n"
    return text.strip()


def compare_pdfs(pdf1_path: Any, pdf2_path: Any) -> float:
    """The mean over the pairs of fuzz.ratio(text1, text2) / 100; a pair that fails to read adds 0."""
    if type(pdf2_path) is not list:
        pdf1_path, pdf2_path = [pdf1_path], [pdf2_path]
    score = 0.0
    for path1, path2 in zip(pdf1_path, pdf2_path, strict=False):
        try:
            text1 = pdf_text(path1)
            text2 = pdf_text(path2)
            score += fuzz.ratio(text1, text2) / 100
        except Exception as e:  # OSWorld's verdict for an unreadable file: that pair scores 0
            logger.info("[ERROR]: unexpected error occurred when comparing PDF files: %s", e)
    return score / len(pdf2_path)
