"""OSWorld's small one-task metrics on text files, JSON, command output and a .docx's words.

From desktop-env 1.0.2 (Apache-2.0): ``desktop_env/evaluators/metrics/general.py`` (check_json,
file_contains, fuzzy_place_math, check_line_number), ``vscode.py`` (check_json_keybindings, compare_config,
compare_result_files) and ``basic_os.py`` (is_utc_0, check_gnome_favorite_apps, is_in_vm_clickboard). The logic is
theirs, line for line, with their logging left out (it decides nothing); also ``table.py``
(compare_conference_city_in_order), ``pdf.py`` (check_pdf_pages) and ``vscode.py``'s
compare_zip_files, whose PDF members' text is read with pypdf (PyPDF2's successor, the extra's PDF
reader) in memory, where OSWorld writes them to ``temp.pdf`` in the working directory and reads
them with PyPDF2. Two more departures, both
outside what the tasks give: check_json reads JSON only (its ``is_yaml`` option needs PyYAML, which
cud's extra lacks, so the catalog refuses the option), and check_gnome_favorite_apps reads the
gsettings list with ``ast.literal_eval`` where OSWorld calls ``eval`` on the command's output: a list
literal gives the same list, and the seat's output is never run as code.
"""

from __future__ import annotations

import ast
import io
import json
import operator
import os
import re
import zipfile
from difflib import SequenceMatcher
from typing import Any

import openpyxl
from docx import Document
from pypdf import PdfReader
from rapidfuzz import fuzz

from cud.osworld.metrics.rules import match_value_to_rule

__all__ = (
    "check_gnome_favorite_apps", "check_json", "check_json_keybindings", "check_pdf_pages",
    "compare_conference_city_in_order", "compare_config", "compare_result_files", "compare_zip_files",
    "check_line_number", "file_contains", "fuzzy_place_math", "is_in_vm_clickboard", "is_utc_0",
)
#: check_line_number's clock time: a line holding one counts.
_CLOCK = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")


def check_json(result: Any, rules: Any, is_yaml: bool = False) -> float:
    # OSWorld's parameters, so a spec's options fit both (the catalog refuses is_yaml: no PyYAML in the extra).
    if is_yaml:
        raise ValueError("check_json's is_yaml needs PyYAML, which the osworld extra does not install")
    if result is None:
        return 0.
    if not os.path.exists(result):
        return 0.
    try:
        with open(result, encoding="utf-8") as f:
            try:
                result_data: Any = json.load(f)
            except Exception:  # OSWorld: JSONDecodeError and any other parse error score 0
                return 0.
    except Exception:  # OSWorld: an unreadable file scores 0
        return 0.

    expect_rules = rules.get("expect", {})
    unexpect_rules = rules.get("unexpect", {})

    metric: Any = True
    for r in expect_rules:
        value = result_data
        try:
            for k in r["key"]:
                try:
                    value = value[k]
                except (KeyError, TypeError):
                    return 0.
            metric = metric and match_value_to_rule(value, r)
        except Exception:
            return 0.

    for r in unexpect_rules:
        value = result_data
        try:
            for k in r["key"]:
                try:
                    value = value[k]
                except (KeyError, TypeError):
                    value = None
                    break
            metric = metric and not match_value_to_rule(value, r)
        except Exception:
            return 0.

    return float(metric)


def file_contains(file_path: Any, config: Any) -> float:
    if not file_path:
        return 0.
    try:
        with open(file_path) as f:
            file_text = f.read()
        for text in config["expected"]:
            if text not in file_text:
                return 0.
    except Exception:  # OSWorld's bare except: any failure scores 0
        return 0.
    return 1.


def fuzzy_place_math(result_file_path: Any, rules: Any) -> float:
    if result_file_path is None:
        return 0.
    expect = rules["expected"]
    doc = Document(result_file_path)
    words_list: list[str] = []
    for para in doc.paragraphs:
        words_list.extend(para.text.split())
    fuzzy_score_list = []
    for word in words_list:
        max_score: float = 0
        for ans in expect:
            score = fuzz.ratio(word, ans) / 100
            max_score = max(max_score, score)
        fuzzy_score_list.append(max_score)
    if len(fuzzy_score_list) != 3:
        return 0.
    return sum(fuzzy_score_list) / 3


def check_json_keybindings(actual: Any, expected: Any, **options: Any) -> float:
    def direct_load_json(fp: Any) -> Any:
        try:
            with open(fp) as f:
                return json.load(f)
        except Exception:
            return None

    def skip_first_line_load_json(fp: Any) -> Any:
        try:
            with open(fp) as f:
                f.readline()
                return json.load(f)
        except Exception:
            return None

    for func in [direct_load_json, skip_first_line_load_json]:
        data = func(actual)
        if data is not None and type(data) is list:
            break
    else:
        return 0.0
    expected = expected["expected"]
    if expected in data:
        return 1.0
    return 0.0


def compare_config(actual: Any, rules: Any, **options: Any) -> float:
    if not actual:
        return 0.
    with open(actual) as f1:
        actual_text = f1.read()
    if actual_text == rules["expected"]:
        return 1.0
    return 0.0


def compare_result_files(src_path: Any, tgt_path: Any) -> float:
    if not src_path or not tgt_path:
        return 0.0
    with open(src_path) as f:
        src_content = f.read().strip()
    with open(tgt_path) as f:
        tgt_content = f.read().strip()
    try:
        tgt_content_num = float(tgt_content)
        if tgt_content in src_content:
            # OSWorld: the result may be a sentence holding the number
            return 1.0
        src_content_num = float(src_content)
        if abs(src_content_num - tgt_content_num) < 1e-4:
            return 1.0
        return 0.0
    except Exception:  # OSWorld's bare except: not numbers, so compared as text
        if src_content == tgt_content:
            return 1.0
    return 0.0


def is_utc_0(timedatectl_output: Any) -> int:
    utc_line = timedatectl_output.split("\n")[3]
    if utc_line.endswith("+0000)"):
        return 1
    return 0


def check_gnome_favorite_apps(apps_str: Any, rule: Any) -> int:
    apps = ast.literal_eval(apps_str)
    expected_apps = rule["expected"]
    if len(apps) != len(expected_apps):
        return 0
    if set(apps) == set(expected_apps):
        return 1
    return 0


def compare_conference_city_in_order(actual_city_list_path: Any, expected_city: Any) -> float:
    expected_city_list = expected_city["expected"]
    wb = openpyxl.load_workbook(actual_city_list_path)
    sheet = wb.active
    actual_city_list = []
    for row in sheet["C2:C22"]:
        for cell in row:
            actual_city_list.append(cell.value)
    try:
        for i in range(len(actual_city_list)):
            if isinstance(expected_city_list[i], str):
                if expected_city_list[i] not in actual_city_list[i]:
                    return 0.0
            elif isinstance(expected_city_list[i], list):
                if not any(possible_str in actual_city_list[i] for possible_str in expected_city_list[i]):
                    return 0.0
            else:
                raise TypeError("Expected city should be a string or a list of strings")
    except Exception:  # OSWorld's bare except: a short list, an empty cell, a bad rule all score 0
        return 0.0
    return 1.0


def check_pdf_pages(pdf_file: Any, rules: Any) -> float:
    if pdf_file is None:
        return 0.0
    reader = PdfReader(pdf_file)
    nb_pages: int = len(reader.pages)
    return float(getattr(operator, rules["relation"])(nb_pages, rules["ref_value"]))


def _compare_pdf_content(content1: bytes, content2: bytes, text_similarity_threshold: float) -> bool:
    def extract_text_from_pdf(content: bytes) -> str:
        pdf_reader = PdfReader(io.BytesIO(content))
        text = ""
        for page_num in range(len(pdf_reader.pages)):
            text += pdf_reader.pages[page_num].extract_text()
        return text

    text1 = extract_text_from_pdf(content1)
    text2 = extract_text_from_pdf(content2)
    similarity_ratio = SequenceMatcher(None, text1, text2).ratio()
    return similarity_ratio >= text_similarity_threshold


def compare_zip_files(actual: Any, expected: Any, **options: Any) -> float:
    if not actual:
        return 0.
    with zipfile.ZipFile(actual, "r") as zip_file1, zipfile.ZipFile(expected, "r") as zip_file2:
        file_list1 = set(zip_file1.namelist())
        file_list2 = set(zip_file2.namelist())
        if file_list1 != file_list2:
            return 0.0
        for file_name in file_list1:
            content1 = zip_file1.read(file_name)
            content2 = zip_file2.read(file_name)
            if file_name.lower().endswith(".pdf"):
                if _compare_pdf_content(content1, content2, 0.95):
                    continue
                return 0.0
            if content1 != content2:
                return 0.0
    return 1.0


def is_in_vm_clickboard(config: dict[str, Any], terminal_output: str) -> float:
    """1 when the clipboard's text (the command's output) holds ``expected``, or each of a list of them."""
    expected_results = config["expected"]
    if not isinstance(expected_results, list):
        return 1 if expected_results in terminal_output else 0
    return 1 if all(result in terminal_output for result in expected_results) else 0


def check_line_number(file_path: str | None, line_number: dict[str, Any]) -> float:
    """1 when as many of the file's lines hold a clock time (``HH:MM:SS``) as ``expected`` says; 0 for no file,
    or one OSWorld could not read or count (its bare ``except``)."""
    if file_path is None or not os.path.isfile(file_path):
        return 0.
    try:
        with open(file_path) as f:
            line_count = sum(1 for line in f if _CLOCK.search(line))
        return 1 if line_count == int(line_number["expected"]) else 0
    except Exception:  # OSWorld's bare except: an undecodable file, an expected that is no number
        return 0.
