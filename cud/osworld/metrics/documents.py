"""OSWorld's word-processor metrics: ``compare_docx_files`` and ``compare_docx_tables``.

Ported from OSWorld's desktop_env/evaluators/metrics/docs.py (desktop-env 1.0.2, Apache-2.0),
with their logic and scores kept; only the imports differ (docs.py imports easyocr, and with it
torch, for other metrics) and the debugging prints are gone (the judge's stdout is its answer).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from docx import Document
from odf.element import Element
from odf.opendocument import load
from odf.text import P
from rapidfuzz import fuzz

__all__ = ("compare_docx_files", "compare_docx_tables", "paragraph_texts")

logger = logging.getLogger(__name__)


def _odt_paragraph_texts(document: Any) -> list[str]:
    """Each <text:p>'s own text and that of its direct <text:span>s, as OSWorld reads an .odt."""
    texts = []
    for paragraph in document.getElementsByType(P):
        parts = []
        for node in paragraph.childNodes:
            if node.nodeType == Element.TEXT_NODE:
                parts.append(node.data)
            elif node.nodeType == Element.ELEMENT_NODE and node.tagName == "text:span":
                parts.extend(child.data for child in node.childNodes if child.nodeType == Element.TEXT_NODE)
        texts.append("".join(parts))
    return texts


def paragraph_texts(file1: str, file2: str) -> tuple[list[str], list[str]] | None:
    """Both documents' paragraph texts, or None when they are not both .docx or both .odt, or one
    cannot be read (OSWorld scores both 0)."""
    if file1.endswith(".docx") and file2.endswith(".docx"):
        try:
            doc1 = Document(file1)
            doc2 = Document(file2)
        except Exception as e:  # OSWorld's verdict for an unreadable file: 0, not an error
            logger.error("Error: %s", e)
            return None
        return [p.text for p in doc1.paragraphs], [p.text for p in doc2.paragraphs]
    if file1.endswith(".odt") and file2.endswith(".odt"):
        try:
            odt1 = load(file1)
            odt2 = load(file2)
        except Exception as e:
            logger.error("Error: %s", e)
            return None
        return _odt_paragraph_texts(odt1), _odt_paragraph_texts(odt2)
    logger.error("Unsupported file types or mismatch between file types: %s, %s", file1, file2)
    return None


def compare_docx_files(file1: str | None, file2: str | None, **options: Any) -> float:
    """1 when the two documents' paragraphs' texts match as the options say, else 0 (or a
    similarity in [0, 1] with ``content_only`` or ``fuzzy_match``)."""
    ignore_blanks = options.get("ignore_blanks", True)
    ignore_case = options.get("ignore_case", False)
    ignore_order = options.get("ignore_order", False)
    content_only = options.get("content_only", False)
    fuzzy_match = options.get("fuzzy_match", False)
    delete_empty_lines = options.get("delete_empty_lines", False)

    if not file1 or not file2:
        return 0
    both = paragraph_texts(file1, file2)
    if both is None:
        return 0
    doc1_paragraphs, doc2_paragraphs = both
    if ignore_order:
        doc1_paragraphs = sorted(doc1_paragraphs)
        doc2_paragraphs = sorted(doc2_paragraphs)
    if delete_empty_lines:
        doc1_paragraphs = [p for p in doc1_paragraphs if p.strip()]
        doc2_paragraphs = [p for p in doc2_paragraphs if p.strip()]

    if content_only:
        text1 = re.sub(r"\s+", " ", "\n".join(doc1_paragraphs)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(doc2_paragraphs)).strip()
        if ignore_case:
            text1, text2 = text1.lower(), text2.lower()
        return fuzz.ratio(text1, text2) / 100.0

    if ignore_blanks:
        text1 = re.sub(r"\s+", " ", "\n".join(doc1_paragraphs)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(doc2_paragraphs)).strip()
        if ignore_case:
            text1, text2 = text1.lower(), text2.lower()
        if fuzzy_match:
            return fuzz.ratio(text1, text2) / 100.0
        if text1 != text2:
            return 0
        return 1

    if len(doc1_paragraphs) != len(doc2_paragraphs):
        return 0
    if fuzzy_match:
        if not doc1_paragraphs:
            return 1.0
        total_similarity: float = 0
        for p1, p2 in zip(doc1_paragraphs, doc2_paragraphs, strict=True):
            if ignore_case:
                p1, p2 = p1.lower(), p2.lower()
            total_similarity += fuzz.ratio(p1, p2) / 100.0
        return total_similarity / len(doc1_paragraphs)
    for p1, p2 in zip(doc1_paragraphs, doc2_paragraphs, strict=True):
        if ignore_case:
            p1, p2 = p1.lower(), p2.lower()
        if p1 != p2:
            return 0
    return 1


def compare_docx_tables(docx_file1: str | None, docx_file2: str | None) -> float:
    """1 when both documents have the same tables, cell by cell (text stripped), else 0."""
    if not docx_file1 or not docx_file2:
        return 0
    try:
        doc1 = Document(docx_file1)
        doc2 = Document(docx_file2)
    except Exception as e:  # OSWorld's verdict for an unreadable file: 0, not an error
        logger.error("Error: %s", e)
        return 0
    tables1 = doc1.tables
    tables2 = doc2.tables
    if len(tables1) != len(tables2):
        return 0
    for table1, table2 in zip(tables1, tables2, strict=True):
        if len(table1.rows) != len(table2.rows) or len(table1.columns) != len(table2.columns):
            return 0
        for i in range(len(table1.rows)):
            for j in range(len(table1.columns)):
                if table1.cell(i, j).text.strip() != table2.cell(i, j).text.strip():
                    return 0
    return 1
