"""compare_table's sheet addressing and loading: which book and sheet a rule's ``sheet_idx`` names.

From OSWorld's ``desktop_env/evaluators/metrics/table.py`` (``_parse_sheet_idx``,
``_load_sheet``, ``_safe_read_file``), desktop-env 1.0.2, Apache-2.0; the logic is theirs, the
logging left out. A sheet index is an int (the result's sheet by position), ``RI0``/``EI0`` (the
result's/expected's by position) or ``RNSheet1``/``ENSheet1`` (by name).
"""

from __future__ import annotations

import itertools
import os.path
from typing import Any

import pandas as pd
from openpyxl import Workbook

__all__ = ("load_sheet", "parse_sheet_idx", "safe_read_file")

# The encodings OSWorld tries, in its order; latin-1 reads any bytes, so the later ones never run.
_ENCODINGS = ("utf-8", "utf-8-sig", "latin-1", "windows-1252", "gbk", "cp1251", "iso-8859-1")


def parse_sheet_idx(sheet_idx: int | str, result: Any, expected: Any, result_sheet_names: list[str],
                    expected_sheet_names: list[str] | None) -> tuple[Any, str]:
    """The book (``result`` or ``expected``) and the sheet name ``sheet_idx`` names ("" if it names none)."""
    if isinstance(sheet_idx, int):
        try:
            if not result_sheet_names or sheet_idx >= len(result_sheet_names):
                index = ""
            else:
                index = result_sheet_names[sheet_idx]
        except Exception:
            index = ""
        return result, index
    if sheet_idx.startswith("RI"):
        try:
            index = result_sheet_names[int(sheet_idx[2:])]
        except Exception:
            index = ""
        return result, index
    if sheet_idx.startswith("RN"):
        return result, sheet_idx[2:]
    if sheet_idx.startswith("EI"):
        try:
            index = expected_sheet_names[int(sheet_idx[2:])]  # type: ignore[index]  # None raises, as in OSWorld
        except Exception:
            index = ""
        return expected, index
    if sheet_idx.startswith("EN"):
        return expected, sheet_idx[2:]
    raise ValueError("Unrecognized sheet index")


def load_sheet(book: Any, index: str) -> Any:
    """The sheet: a DataFrame (pandas' book), a Worksheet (openpyxl's), or for a path the lines of the
    ``BOOK-SHEET.csv`` beside it, blank ones at the end dropped and in reverse order; None if it cannot."""
    try:
        if isinstance(book, str):
            csv_name = f"{os.path.splitext(book)[0]}-{index}.csv"
            try:
                all_lines = safe_read_file(csv_name)
                return list(itertools.dropwhile(lambda line: len(line) == 0, map(lambda line: line.strip(),
                                                                                 reversed(all_lines))))
            except OSError:
                return None
        if isinstance(book, pd.ExcelFile):
            return pd.read_excel(book, index)
        if isinstance(book, Workbook):
            return book[index]
        raise NotImplementedError("Not supported workbook format")
    except NotImplementedError:
        raise
    except Exception:
        return None


def safe_read_file(file_path: str) -> list[str]:
    """The file's lines, in the first of OSWorld's encodings that reads it."""
    last_error: UnicodeDecodeError | None = None
    for encoding in _ENCODINGS:
        try:
            with open(file_path, encoding=encoding) as f:
                return f.read().splitlines()
        except UnicodeDecodeError as e:
            last_error = e
            continue
    try:
        with open(file_path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except Exception as e:
        raise OSError(f"Cannot read file {file_path} with any supported encoding") from (last_error or e)
