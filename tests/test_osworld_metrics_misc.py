"""cud's small one-task metrics give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws the files and command outputs these metrics read (JSON objects and keybinding lists,
text holding numbers, timedatectl's lines, gsettings' lists, .docx paragraphs) and the rules the tasks
give; cud's port (cud/osworld/metrics/misc.py) and OSWorld's function
(tests/support/osworld_reference.py) must score alike, or raise alike.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import docx
import openpyxl
from fpdf import FPDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ("check_json", "file_contains", "fuzzy_place_math", "check_json_keybindings", "compare_config",
         "compare_result_files", "is_utc_0", "check_gnome_favorite_apps", "compare_conference_city_in_order",
         "check_pdf_pages", "compare_zip_files", "is_in_vm_clickboard", "check_line_number")

words = st.text(alphabet="abAB {}\"x1.:,\n", max_size=10)
keys = st.sampled_from(["a", "b", "mode", "name"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["a", "smart", "b smart x"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                       st.dictionaries(keys, inner, max_size=3)), max_leaves=5)


def agree(name: str, *args: Any, **options: Any) -> None:
    ours, theirs = outcome(metric(name), *args, **options), outcome(reference(name), *args, **options)
    assert ours == theirs, f"{name}{args!r} {options!r}: cud {ours}, OSWorld {theirs}"


def test_each_metric_is_catalogued() -> None:
    for name in NAMES:
        assert name in FUNCTIONS and name in METRICS
    assert not METRICS["is_utc_0"].expected and METRICS["check_json"].options == frozenset()


rule_list = st.lists(st.fixed_dictionaries({
    "key": st.lists(keys, min_size=1, max_size=2),
    "method": st.sampled_from(["eq", "ne", "re", "gt"]),
    "ref": st.one_of(scalars, st.sampled_from(["\\bsmart\\b", "^a"]))}), max_size=2)


@SETTINGS
@given(st.one_of(st.dictionaries(keys, values, max_size=3), values), st.sampled_from(["json", "broken", "absent"]),
       st.fixed_dictionaries({}, optional={"expect": rule_list, "unexpect": rule_list}))
def test_check_json_scores_as_osworld(data: Any, how: str, rules: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "x.json")
        if how != "absent":
            path.write_text(json.dumps(data) + ("}" if how == "broken" else ""))
        agree("check_json", str(path), rules)
        agree("check_json", None, rules)


@SETTINGS
@given(words, st.lists(st.sampled_from(["a", "B", "x1", "\n", "{"]), max_size=3))
def test_text_metrics_score_as_osworld(text: str, wanted: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "x.txt")
        path.write_text(text)
        agree("file_contains", str(path), {"expected": wanted})
        agree("file_contains", None, {"expected": wanted})
        agree("file_contains", str(Path(tmp, "absent")), {"expected": wanted})
        agree("compare_config", str(path), {"expected": text})
        agree("compare_config", str(path), {"expected": text + "x"}, containment_ok=True)
        agree("compare_config", None, {"expected": text})


numbers = st.one_of(st.sampled_from(["42", "42.00001", "41.99999", "41.995", "4.2e1", " 42\n", "nan", "-0", "x"]), words)


@SETTINGS
@given(numbers, numbers, st.sampled_from(["", "The answer is ", "answer: "]))
def test_compare_result_files_scores_as_osworld(result: str, gold: str, prefix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = Path(tmp, "result.txt"), Path(tmp, "gold.txt")
        src.write_text(prefix + result)
        tgt.write_text(gold)
        agree("compare_result_files", str(src), str(tgt))
        agree("compare_result_files", None, str(tgt))


def test_compare_result_files_tolerance_is_osworld() -> None:
    """Numbers near the gold one, where OSWorld's 1e-4 tolerance decides (drawn rarely above)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = Path(tmp, "result.txt"), Path(tmp, "gold.txt")
        tgt.write_text("42")
        for result in ("41.99999", "41.995", "41.9999", "42.0001", "4.2e1"):
            src.write_text(result)
            agree("compare_result_files", str(src), str(tgt))


@SETTINGS
@given(st.sampled_from(["['a.desktop']", "[]", "{'x': 1}", "[1, 2]", "@as []", "('a', 'a')"]),
       st.lists(st.sampled_from(["google-chrome.desktop", "thunderbird.desktop", "vim.desktop"]), max_size=4),
       st.lists(st.sampled_from(["google-chrome.desktop", "thunderbird.desktop", "vim.desktop"]), max_size=3),
       st.sampled_from(["Time zone: Etc/UTC (UTC, +0000)", "Time zone: Asia/Tokyo (JST, +0900)", "+0000)", ""]),
       st.integers(0, 5))
def test_command_output_metrics_score_as_osworld(odd: str, apps: list[str], wanted: list[str], zone: str,
                                                 at: int) -> None:
    agree("check_gnome_favorite_apps", repr(apps), {"expected": wanted})
    agree("check_gnome_favorite_apps", repr(apps) + "\n", {"expected": wanted})
    agree("check_gnome_favorite_apps", odd, {"expected": wanted})
    lines = ["Local time: Thu", "Universal time: Thu", "RTC time: Thu", "", "NTP service: inactive"]
    lines.insert(at, zone)
    agree("is_utc_0", "\n".join(lines))
    agree("is_utc_0", "\n".join(lines) + "\n")


keybindings = st.lists(st.fixed_dictionaries({"key": st.sampled_from(["ctrl+j", "ctrl+f"]),
                                              "command": st.sampled_from(["a", "-list.find"])},
                                             optional={"when": st.sampled_from(["terminalFocus", "x"])}), max_size=3)


@SETTINGS
@given(st.one_of(keybindings, st.dictionaries(keys, scalars, max_size=2)), keybindings,
       st.sampled_from(["plain", "comment", "broken"]))
def test_check_json_keybindings_scores_as_osworld(data: Any, wanted: list[dict[str, str]], how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "keybindings.json")
        text = json.dumps(data)
        path.write_text({"plain": text, "comment": "// Place your key bindings\n" + text, "broken": text + "]"}[how])
        for one in wanted[:1] or [{"key": "ctrl+j"}]:
            agree("check_json_keybindings", str(path), {"expected": one})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["深圳市福田区", "深圳市南山区", "Place", "a b", ""]), max_size=4),
       st.lists(st.sampled_from(["深圳市福田区", "深圳市南山区x", "Plaza"]), min_size=1, max_size=3))
def test_fuzzy_place_math_scores_as_osworld(paragraphs: list[str], expected: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "AllLocations.docx")
        document = docx.Document()
        for text in paragraphs:
            document.add_paragraph(text)
        document.save(str(path))
        agree("fuzzy_place_math", str(path), {"expected": expected})
        agree("fuzzy_place_math", None, {"expected": expected})


def test_the_judge_runs_a_metric_without_an_expected_value() -> None:
    """is_utc_0 is the catalog's metric of the result alone: the judge calls it with the one argument."""
    lines = ["Local time: Thu", "Universal time: Thu", "RTC time: Thu"]
    for zone, score in (("Time zone: Etc/UTC (UTC, +0000)", 1.0), ("Time zone: Asia/Tokyo (JST, +0900)", 0.0)):
        request = {"metric": "is_utc_0", "result": {"value": "\n".join([*lines, zone])}, "expected": None,
                   "options": {}}
        done = subprocess.run([sys.executable, "-I", "-m", "cud.osworld.judge"], input=json.dumps(request),
                              capture_output=True, text=True, check=True, timeout=120)
        assert json.loads(done.stdout) == {"score": score}


cities = st.sampled_from(["Scottsdale", "Atlanta, GA", "Lake Tahoe", "Montréal", "Stateline", "x"])


@st.composite
def city_columns(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """The rule's cities, and a column C (a header, then rows 2..) naming them, or not: a cell changed or left out."""
    expected = draw(st.lists(st.one_of(cities, st.lists(cities, min_size=1, max_size=2)), min_size=21, max_size=22))
    column: list[Any] = ["City"] + [f"{draw(st.sampled_from(['', 'in ']))}"
                                    f"{want if isinstance(want, str) else draw(st.sampled_from(want))}"
                                    for want in expected]
    how = draw(st.sampled_from(["same", "same", "cell", "short", "number", "rule"]))
    if how == "cell" and len(column) > 1:
        column[draw(st.integers(1, len(column) - 1))] = draw(st.one_of(cities, st.none()))
    elif how == "short":
        column = column[:draw(st.integers(0, len(column)))]
    elif how == "number" and len(column) > 1:
        column[-1] = 7
    elif how == "rule" and expected:
        expected[draw(st.integers(0, len(expected) - 1))] = draw(st.sampled_from([1, None, []]))
    return column, expected


@SETTINGS
@given(city_columns())
def test_compare_conference_city_in_order_scores_as_osworld(case: tuple[list[Any], list[Any]]) -> None:
    column, expected = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "ConferenceCity.xlsx")
        book = openpyxl.Workbook()
        for row, value in enumerate(column, start=1):
            book.active.cell(row=row, column=3, value=value)
        book.save(path)
        agree("compare_conference_city_in_order", str(path), {"expected": expected})


def write_pdf(pages: list[str], path: Path) -> None:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.text(20, 20, text)
    pdf.output(str(path))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["Recruitment and retention", "of health", "professionals"]), min_size=1, max_size=3),
       st.sampled_from(["eq", "gt", "le", "ne"]), st.integers(0, 4))
def test_check_pdf_pages_scores_as_osworld(pages: list[str], relation: str, ref: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "out.pdf")
        write_pdf(pages, path)
        agree("check_pdf_pages", str(path), {"relation": relation, "ref_value": ref})
        agree("check_pdf_pages", None, {"relation": relation, "ref_value": ref})


members = st.dictionaries(st.sampled_from(["a.txt", "essay.PDF", "b/c.bin", "essay2.pdf"]),
                          st.lists(st.sampled_from(["Recruitment and retention", "of health professionals",
                                                    "in Europe", "abc"]), min_size=1, max_size=3), min_size=1, max_size=3)


def write_zip(contents: dict[str, list[str]], path: Path, tmp: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, texts in contents.items():
            if name.lower().endswith(".pdf"):
                write_pdf(texts, Path(tmp, "member.pdf"))
                archive.write(Path(tmp, "member.pdf"), name)
            else:
                archive.writestr(name, " ".join(texts))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members, st.sampled_from(["same", "word", "line", "other"]), members)
def test_compare_zip_files_scores_as_osworld(actual: dict[str, list[str]], how: str,
                                            other: dict[str, list[str]]) -> None:
    """The gold archive: the same, one member with a word more (a PDF's text stays above OSWorld's 0.95 likeness)
    or a line more, or another archive."""
    gold = {name: list(texts) for name, texts in actual.items()}
    if how in ("word", "line") and gold:
        pdfs = sorted(name for name in gold if name.lower().endswith(".pdf"))
        texts = gold[(pdfs or sorted(gold))[0]]
        if how == "word":
            texts[-1] += "s"
        else:
            texts.append("in Europe")
    elif how == "other":
        gold = other
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):  # OSWorld's PDF text goes by ./temp.pdf
        first, second = Path(tmp, "submission.zip"), Path(tmp, "gold.zip")
        write_zip(actual, first, tmp)
        write_zip(gold, second, tmp)
        agree("compare_zip_files", str(first), str(second))
        agree("compare_zip_files", None, str(second))


clock_lines = st.lists(st.one_of(st.sampled_from(["12:00:01 all 3.2", "Average: all", "23:59:60", "24:00:00 x",
                                                  "7:05:09", "CPU %user", "00:00:00", "19:61:00"]), words),
                       max_size=6)


@SETTINGS
@given(clock_lines, st.one_of(st.integers(0, 6).map(str), st.integers(0, 6), st.sampled_from(["x", "", " 3"])),
       st.sampled_from(["utf-8", "latin-1 bytes", "absent"]))
def test_check_line_number_scores_as_osworld(lines: list[str], expected: Any, how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "report.txt")
        if how == "utf-8":
            path.write_text("\n".join(lines))
        elif how == "latin-1 bytes":
            path.write_bytes("\n".join(lines).encode() + b"\xff\xfe 12:00:00")
        agree("check_line_number", str(path), {"expected": expected})
        agree("check_line_number", None, {"expected": expected})


@SETTINGS
@given(st.one_of(st.sampled_from(["/home/user/Data3/List3/secret.docx", "", "secret"]),
                 st.lists(st.sampled_from(["a", "secret", "/home/user"]), max_size=3)),
       st.sampled_from(["/home/user/Data3/List3/secret.docx", "", "/home/user/Data3/List3/secret.docx\n", "a secret"]))
def test_is_in_vm_clickboard_scores_as_osworld(expected: Any, clipboard: str) -> None:
    agree("is_in_vm_clickboard", {"expected": expected}, clipboard)
