"""Metric checks on a real seat: OSWorld's metrics judge what setup left, in the judge's process, as its own user.

One task's setup puts spreadsheets made here with openpyxl (the right one, one with a single cell
wrong, one that is no spreadsheet) and a JSON and a text file in the seat's home; its checks run
``compare_table``, ``check_direct_json_object`` and ``diff_text_file`` over every form of result
(a home file, a command's output, a fixture, a value) and must pass, fail or end in error as
their names say: a missing file scores 0 as in OSWorld, a spreadsheet compare_table cannot open is
0 (OSWorld catches it), an expected one it cannot open and a command's output that is not JSON are
errors. Two checks read files by a value's path: one only the judge's user can read passes, one only
root can read is an error, so the judge runs as ``[sessions] judge_user``, not as root.
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import openpyxl
import pytest
from PIL import Image

from cud.daemon.session.commands import Completed
from cud.daemon.session.user import SeatUser
from cud.daemon.spec.metric import JUDGE_ARGV, _answer, _limits
from cud.spec import parse_spec
from tests.support.daemon import scenario
from tests.support.judge_python import judge_python
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

ANSWER = scenario({"message": "Done."}, look_first=False)
RULES = '[{ type = "sheet_data", sheet_idx0 = "RI0", sheet_idx1 = "EI0" }]'
NOTES = "first line\nsecond line\n"


@functools.cache  # openpyxl stamps the time into the file: the size the check names is of these bytes
def workbook(wrong_cell: bool = False) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sales"
    sheet.append(["month", "units", "price"])
    for month in range(1, 13):
        sheet.append([f"2026-{month:02}", month * 10, 2.5])
    if wrong_cell:
        sheet["B7"] = 61  # 60 in the right one: one cell of 39
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def judge(seat_users: SeatUsers) -> SeatUser:
    return seat_users.make()


@pytest.fixture(scope="module")
def secrets(judge: SeatUser) -> Iterator[tuple[Path, Path]]:
    """A file only the judge's user can read, and one only root can read (each in a directory closed to others)."""
    top = Path(tempfile.mkdtemp(prefix="cud-metric-secrets-", dir="/tmp"))
    try:
        top.chmod(0o755)
        theirs, roots = top / "judge", top / "root"
        for place in (theirs, roots):
            place.mkdir(mode=0o700)
            (place / "secret.txt").write_text(NOTES)
            (place / "secret.txt").chmod(0o600)
        for path in (theirs, theirs / "secret.txt"):
            os.chown(path, judge.uid, judge.gid)
        yield theirs / "secret.txt", roots / "secret.txt"
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers, judge: SeatUser) -> Iterator[SpecSeat]:
    with judge_python(judge) as python, \
            spec_seat(seat_users, ANSWER, config=f'[sessions]\njudge_user = "{judge.name}"\n', python=python) as s:
        yield s


def test_metric_checks_pass_fail_and_error_as_osworld_would(seat: SpecSeat, secrets: tuple[Path, Path],
                                                            judge: SeatUser) -> None:
    theirs, roots = secrets
    spec = seat.write("metrics.toml", f"""
prompt = "Fill in the sales table."
seat = "s1"
[[setup]]
files = [{{ src = "fixtures/gold.xlsx", dest = "Desktop/out.xlsx" }},
         {{ src = "fixtures/wrong.xlsx", dest = "Desktop/wrong.xlsx" }},
         {{ src = "fixtures/broken.xlsx", dest = "Desktop/broken.xlsx" }},
         {{ src = "fixtures/notes.txt", dest = "notes.txt" }}]
[[setup]]
run = ["/bin/sh", "-c", "printf '{{\\"theme\\": \\"dark\\", \\"size\\": 12}}' > settings.json"]
[[checks]]
name = "pass: compare_table"
metric = "compare_table"
result = {{ file = "Desktop/out.xlsx" }}
expected = {{ fixture = "fixtures/gold.xlsx" }}
options = {{ rules = {RULES} }}
[[checks]]
name = "fail: compare_table, one cell wrong"
metric = "compare_table"
result = {{ file = "Desktop/wrong.xlsx" }}
expected = {{ fixture = "fixtures/gold.xlsx" }}
options = {{ rules = {RULES} }}
[[checks]]
name = "fail: compare_table, no file"
metric = "compare_table"
result = {{ file = "Desktop/never-saved.xlsx" }}
expected = {{ fixture = "fixtures/gold.xlsx" }}
options = {{ rules = {RULES} }}
[[checks]]
name = "fail: compare_table, a result it cannot open"
metric = "compare_table"
result = {{ file = "Desktop/broken.xlsx" }}
expected = {{ fixture = "fixtures/gold.xlsx" }}
options = {{ rules = {RULES} }}
[[checks]]
name = "error: compare_table, an expected file it cannot open"
metric = "compare_table"
result = {{ file = "Desktop/out.xlsx" }}
expected = {{ fixture = "fixtures/broken.xlsx" }}
options = {{ rules = {RULES} }}
[[checks]]
name = "pass: check_direct_json_object"
metric = "check_direct_json_object"
result = {{ command = ["/bin/cat", "settings.json"] }}
expected = {{ value = {{ expected = {{ theme = "dark", size = 12 }} }} }}
[[checks]]
name = "fail: check_direct_json_object"
metric = "check_direct_json_object"
result = {{ command = ["/bin/cat", "settings.json"] }}
expected = {{ value = {{ expected = {{ theme = "dark", size = 13 }} }} }}
[[checks]]
name = "error: check_direct_json_object, not JSON"
metric = "check_direct_json_object"
result = {{ command = ["/bin/cat", "notes.txt"] }}
expected = {{ value = {{ expected = {{ theme = "dark" }} }} }}
[[checks]]
name = "pass: diff_text_file"
metric = "diff_text_file"
result = {{ file = "notes.txt" }}
expected = {{ fixture = "fixtures/notes.txt" }}
[[checks]]
name = "pass: the judge's user reads its own file"
metric = "diff_text_file"
result = {{ value = "{theirs}" }}
expected = {{ fixture = "fixtures/notes.txt" }}
[[checks]]
name = "error: the judge is not root"
metric = "diff_text_file"
result = {{ value = "{roots}" }}
expected = {{ fixture = "fixtures/notes.txt" }}
[[checks]]
name = "error: a result command past the timeout"
metric = "check_include_exclude"
result = {{ command = ["/bin/sleep", "30"] }}
expected = {{ value = {{ include = ["x"] }} }}
timeout = 1
""", {"fixtures/gold.xlsx": workbook(), "fixtures/wrong.xlsx": workbook(wrong_cell=True),
      "fixtures/broken.xlsx": b"PK\x03\x04 not a spreadsheet", "fixtures/notes.txt": NOTES})
    before = judges_dirs(judge)
    code, task = seat.submit(spec)
    assert task["state"] == "succeeded" and code == 1, (task["error"], task["reason"])
    results = task["verdict"]["checks"]
    wrong = [(r["name"], r["outcome"], r["why"]) for r in results if r["outcome"] != r["name"].split(":")[0]
             .replace("pass", "passed").replace("fail", "failed")]
    assert wrong == []
    by_name = {r["name"]: r for r in results}
    print(json.dumps([(r["name"], r["outcome"], r["why"], r["observed"], r["ms"]) for r in results], indent=1))
    passed = by_name["pass: compare_table"]
    assert passed["kind"] == "metric" and passed["observed"]["score"] == 1.0
    size = len(workbook())
    assert passed["why"] == f"OSWorld's compare_table scored 1 of 1 on Desktop/out.xlsx ({size} bytes)"
    assert passed["expected"] == ("OSWorld's compare_table of Desktop/out.xlsx against fixture fixtures/gold.xlsx "
                                  "scores 1")
    assert by_name["fail: compare_table, one cell wrong"]["why"].startswith("OSWorld's compare_table scored 0 of 1 ")
    missing = by_name["fail: compare_table, no file"]
    assert missing["observed"] == {"score": 0.0, "result": "no file Desktop/never-saved.xlsx"}
    assert by_name["error: compare_table, an expected file it cannot open"]["why"] == (
        f"OSWorld's compare_table could not judge Desktop/out.xlsx ({size} bytes): compare_table raised BadZipFile: "
        "File is not a zip file (result: Desktop/out.xlsx; expected: fixtures/broken.xlsx)")
    assert "JSONDecodeError" in by_name["error: check_direct_json_object, not JSON"]["why"]
    not_root = by_name["error: the judge is not root"]["why"]
    assert not_root.startswith("OSWorld's diff_text_file could not judge the value ") and "Permission denied" in \
        not_root, not_root
    assert by_name["error: a result command past the timeout"]["why"] == (
        "could not look: the result's command /bin/sleep ran past the check's timeout of 1 s and was stopped")
    # Nothing of the judge's is left behind in the temporary directory (its directories are its user's).
    assert judges_dirs(judge) == before


SHEET = "month,units\n2026-01,10\n2026-02,20\n"
PRINT = '[{ type = "sheet_print", sheet_idx0 = "RNSheet1", sheet_idx1 = "ENSheet1" }]'


def image(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(out, "PNG")
    return out.getvalue()


@pytest.fixture
def planted() -> Iterator[Path]:
    """A file outside the home that anyone may read, holding the gold sheet: a link to it must not be followed."""
    top = Path(tempfile.mkdtemp(prefix="cud-metric-planted-", dir="/tmp"))
    try:
        top.chmod(0o755)
        (top / "gold-Sheet1.csv").write_text(SHEET)
        (top / "gold-Sheet1.csv").chmod(0o644)
        yield top / "gold-Sheet1.csv"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_several_files_reach_the_judge_side_by_side_under_their_names(seat: SpecSeat, planted: Path,
                                                                      judge: SeatUser) -> None:
    """compare_table's sheet_print reads BOOK-Sheet1.csv beside each book: it passes only when the sibling was
    copied beside the book under its name; a link the seat's user planted is refused, never read."""
    spec = seat.write("several.toml", f"""
prompt = "Save the sheet as CSV beside the book."
seat = "s1"
[[setup]]
files = [{{ src = "fixtures/gold.xlsx", dest = "Desktop/book.xlsx" }},
         {{ src = "fixtures/gold.csv", dest = "Desktop/book-Sheet1.csv" }},
         {{ src = "fixtures/gold.xlsx", dest = "Desktop/wrong.xlsx" }},
         {{ src = "fixtures/wrong.csv", dest = "Desktop/wrong-Sheet1.csv" }},
         {{ src = "fixtures/gold.xlsx", dest = "Desktop/linked.xlsx" }},
         {{ src = "fixtures/red.png", dest = "Desktop/red.png" }},
         {{ src = "fixtures/blue.png", dest = "Desktop/blue.png" }}]
[[setup]]
run = ["/bin/ln", "-s", "{planted}", "Desktop/linked-Sheet1.csv"]
[[checks]]
name = "pass: the sheet printed as the gold one"
metric = "compare_table"
result = {{ files = ["Desktop/book.xlsx", "Desktop/book-Sheet1.csv"] }}
expected = {{ fixtures = ["fixtures/gold.xlsx", "fixtures/gold.csv"], names = ["gold.xlsx", "gold-Sheet1.csv"] }}
options = {{ rules = {PRINT} }}
[[checks]]
name = "fail: the sheet printed otherwise"
metric = "compare_table"
result = {{ files = ["Desktop/wrong.xlsx", "Desktop/wrong-Sheet1.csv"] }}
expected = {{ fixtures = ["fixtures/gold.xlsx", "fixtures/gold.csv"], names = ["gold.xlsx", "gold-Sheet1.csv"] }}
options = {{ rules = {PRINT} }}
[[checks]]
name = "fail: the sibling under another name"
metric = "compare_table"
result = {{ files = ["Desktop/book.xlsx", "Desktop/book-Sheet1.csv"] }}
expected = {{ fixtures = ["fixtures/gold.xlsx", "fixtures/gold.csv"], names = ["gold.xlsx", "gold.csv"] }}
options = {{ rules = {PRINT} }}
[[checks]]
name = "error: a planted link"
metric = "compare_table"
result = {{ files = ["Desktop/linked.xlsx", "Desktop/linked-Sheet1.csv"] }}
expected = {{ fixtures = ["fixtures/gold.xlsx", "fixtures/gold.csv"], names = ["gold.xlsx", "gold-Sheet1.csv"] }}
options = {{ rules = {PRINT} }}
[[checks]]
name = "pass: a list of expected files, the second one matching"
metric = "compare_csv"
result = {{ file = "Desktop/book-Sheet1.csv" }}
expected = {{ fixtures = ["fixtures/wrong.csv", "fixtures/gold.csv"], gives = [0, 1] }}
[[checks]]
name = "pass: lists of images, each its gold"
metric = "compare_image_list"
result = {{ files = ["Desktop/red.png", "Desktop/blue.png"], gives = [0, 1] }}
expected = {{ fixtures = ["fixtures/red.png", "fixtures/blue.png"], names = ["red_gold.png", "blue_gold.png"], gives = [0, 1] }}
[[checks]]
name = "fail: lists of images, one of them missing"
metric = "compare_image_list"
result = {{ files = ["Desktop/red.png", "Desktop/never-saved.png"], gives = [0, 1] }}
expected = {{ fixtures = ["fixtures/red.png", "fixtures/blue.png"], gives = [0, 1] }}
""", {"fixtures/gold.xlsx": workbook(), "fixtures/gold.csv": SHEET,
      "fixtures/wrong.csv": SHEET.replace("20", "21"), "fixtures/red.png": image("red"),
      "fixtures/blue.png": image("blue")})
    before = judges_dirs(judge)
    code, task = seat.submit(spec)
    assert task["state"] == "succeeded" and code == 1, (task["error"], task["reason"])
    results = task["verdict"]["checks"]
    print(json.dumps([(r["name"], r["outcome"], r["why"], r["observed"]) for r in results], indent=1))
    assert [(r["name"], r["outcome"]) for r in results] == [
        (r["name"], r["name"].split(":")[0].replace("pass", "passed").replace("fail", "failed")) for r in results]
    by_name = {r["name"]: r for r in results}
    size = len(workbook())
    assert by_name["pass: the sheet printed as the gold one"]["why"] == (
        f"OSWorld's compare_table scored 1 of 1 on Desktop/book.xlsx ({size} bytes), Desktop/book-Sheet1.csv "
        f"({len(SHEET)} bytes)")
    linked = by_name["error: a planted link"]["why"]
    assert linked.startswith("could not look: ") and "Desktop/linked-Sheet1.csv" in linked, linked
    assert by_name["fail: lists of images, one of them missing"]["observed"] == {
        "score": 0.0, "result": f"Desktop/red.png ({len(image('red'))} bytes), no file Desktop/never-saved.png"}
    assert judges_dirs(judge) == before


def archive(kind: str) -> bytes:
    """A zip of two text files; or a tar whose second member climbs out of the folder it is unpacked in."""
    out = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("book/a.txt", "alpha\n")
            z.writestr("book/b.txt", "beta\n")
        return out.getvalue()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name in ("a.txt", "../../../escaped.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            t.addfile(info, io.BytesIO(b"x\n"))
    return out.getvalue()


def test_archive_and_thunderbird_metrics_judge_the_seats_files_as_the_judges_user(seat: SpecSeat,
                                                                                 judge: SeatUser) -> None:
    """compare_archive unpacks in the judge's private directory under its limits; a tar member climbing out is
    the check's error and lands nowhere; check_thunderbird_prefs reads a profile under a dot-directory."""
    spec = seat.write("archives.toml", """
prompt = "Pack the book."
seat = "s1"
[[setup]]
files = [{ src = "fixtures/book.zip", dest = "Desktop/book.zip" },
         { src = "fixtures/evil.tar", dest = "Desktop/pdf.tar" },
         { src = "fixtures/prefs.js", dest = ".thunderbird/t5q2a5hp.default-release/prefs.js" }]
[[checks]]
name = "pass: compare_archive"
metric = "compare_archive"
result = { file = "Desktop/book.zip" }
expected = { fixture = "fixtures/book.zip" }
options = { file_path = "book", file_type = "text" }
[[checks]]
name = "error: compare_archive, a member climbing out"
metric = "compare_archive"
result = { file = "Desktop/pdf.tar" }
expected = { fixture = "fixtures/evil.tar" }
[[checks]]
name = "pass: check_thunderbird_prefs"
metric = "check_thunderbird_prefs"
result = { file = ".thunderbird/t5q2a5hp.default-release/prefs.js" }
expected = { value = { expect = { "mail.identity.id1.auto_quote" = { method = "eq", ref = false } } } }
""", {"fixtures/book.zip": archive("zip"), "fixtures/evil.tar": archive("tar"),
      "fixtures/prefs.js": 'user_pref("mail.identity.id1.auto_quote", false);\n'})
    before = judges_dirs(judge)
    code, task = seat.submit(spec)
    outcomes = {r["name"]: (r["outcome"], r["why"]) for r in task["verdict"]["checks"]}
    assert outcomes["pass: compare_archive"][0] == "passed", outcomes
    assert outcomes["pass: check_thunderbird_prefs"][0] == "passed", outcomes
    outcome, why = outcomes["error: compare_archive, a member climbing out"]
    assert outcome == "error" and "does not unpack" in why and "'../../../escaped.txt'" in why, outcomes
    assert not list(Path(tempfile.gettempdir()).glob("escaped.txt"))
    assert task["state"] == "succeeded" and code == 3, (task["error"], task["reason"])  # 3: a check's error
    assert judges_dirs(judge) == before


def judges_dirs(judge: SeatUser) -> set[Path]:
    """The judge's directories in the temporary directory (its user's uid may be a removed user's of before)."""
    return {p for p in Path(tempfile.gettempdir()).glob("cud-judge-*") if p.lstat().st_uid == judge.uid}


def test_the_judge_starts_as_its_user_with_its_limits_and_can_start_nothing(seat: SpecSeat,
                                                                            judge: SeatUser) -> None:
    """bounded.py as the daemon runs it: the user's, every limit set, a fork refused (RLIMIT_NPROC 0)."""
    probe = ("import json, os, resource\n"
             "limits = {n: resource.getrlimit(getattr(resource, n))[0] for n in " + repr(sorted(_limits(30))) + "}\n"
             "try:\n    os.fork()\n    forked = 'yes'\nexcept OSError as exc:\n    forked = exc.strerror\n"
             "print(json.dumps({'uid': os.getuid(), 'groups': os.getgroups(), 'limits': limits, 'fork': forked}))")
    bounded = Path(__file__).resolve().parents[1] / "daemon" / "session" / "bounded.py"
    python = seat.daemon.python
    told, failed = os.pipe()
    done = subprocess.run([sys.executable, "-I", "-S", str(bounded), json.dumps(_limits(30)), str(judge.uid),
                           str(judge.gid), ",".join(map(str, judge.groups)), str(failed), "--", python, "-I", "-c",
                           probe], capture_output=True, text=True, timeout=60, pass_fds=(failed,), cwd="/")
    os.close(failed)
    with os.fdopen(told, "rb") as pipe:
        assert pipe.read() == b""  # nothing kept it from starting
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["uid"], seen["limits"]) == (judge.uid, _limits(30))
    assert set(seen["groups"]) == set(judge.groups)
    assert seen["fork"] == "Resource temporarily unavailable"


def test_a_judge_that_cannot_start_says_why() -> None:
    """An interpreter the user cannot run: bounded.py's exec fails and its pipe says so."""
    bounded = Path(__file__).resolve().parents[1] / "daemon" / "session" / "bounded.py"
    told, failed = os.pipe()
    done = subprocess.run([sys.executable, "-I", "-S", str(bounded), "{}", "-", "-", "", str(failed), "--",
                           "/nonexistent/python"], capture_output=True, timeout=60, pass_fds=(failed,))
    os.close(failed)
    with os.fdopen(told, "rb") as pipe:
        assert json.loads(pipe.read()) == [2, "No such file or directory"]
    assert done.returncode == 127


def completed(exit_code: int | None, stdout: bytes = b"", stderr: bytes = b"", *, timed_out: bool = False,
              truncated: bool = False) -> Completed:
    return Completed(JUDGE_ARGV, exit_code, stdout, stderr, timed_out, truncated)


CHECK = parse_spec({"prompt": "p", "checks": [{"metric": "compare_table", "result": {"file": "out.xlsx"},
                                               "expected": {"value": "x"}, "timeout": 5}]}).checks[0]


@pytest.mark.parametrize(("done", "looked", "passed", "why"), [
    (completed(0, b'{"score": 1.0}\n'), True, True, "OSWorld's compare_table scored 1 of 1 on out.xlsx (9 bytes)"),
    (completed(0, b'{"score": 0.999}\n'), True, False, "OSWorld's compare_table scored 0.999 of 1 on out.xlsx (9 bytes)"),
    (completed(0, b'{"score": 2}'), True, True, "OSWorld's compare_table scored 2 of 1 on out.xlsx (9 bytes)"),
    (completed(0, b'{"error": "compare_table raised KeyError: \'rules\'"}'), False, False,
     "OSWorld's compare_table could not judge out.xlsx (9 bytes): compare_table raised KeyError: 'rules'"),
    (completed(None, timed_out=True), False, False,
     "OSWorld's compare_table ran past the check's timeout of 5 s and was stopped"),
    (completed(-24, stderr=b"..."), False, False,
     "the judge of OSWorld's compare_table crashed: killed by SIGXCPU (its CPU time ran out); it said: ..."),
    (completed(1, stderr=b"Traceback: MemoryError"), False, False,
     "the judge of OSWorld's compare_table crashed: exit status 1; it said: Traceback: MemoryError"),
    (completed(0, b'{"score": NaN}'), False, False,
     "the judge of OSWorld's compare_table crashed: its answer is not a score: '{\"score\": NaN}'"),
    (completed(0, b'{"score": true}'), False, False,
     "the judge of OSWorld's compare_table crashed: its answer is not a score: '{\"score\": true}'"),
    (completed(0, b"score: 1"), False, False, "the judge of OSWorld's compare_table crashed: its answer is not a "
                                              "score: 'score: 1'"),
    (completed(0, b'{"error": "' + b"x" * 100, truncated=True), False, False,
     "the judge of OSWorld's compare_table crashed: its answer is over 65536 bytes"),
])
def test_the_judges_answer_decides_the_check(done: Completed, looked: bool, passed: bool, why: str) -> None:
    judged = _answer(CHECK, done, "out.xlsx (9 bytes)", {})
    assert (judged.looked, judged.passed, judged.why) == (looked, passed, why)


def test_values_and_options_reach_the_metric_as_the_spec_wrote_them(seat: SpecSeat) -> None:
    """Through the socket, the store and the judge's stdin: literal_match's ``type = "list"`` compares lists."""
    spec = seat.write("literal.toml", 'prompt = "p"\nseat = "s1"\n' + "".join(
        f"[[checks]]\nmetric = \"literal_match\"\nresult = {{ value = {v} }}\nexpected = {{ value = [1, 2] }}\n"
        f"options = {{ type = \"list\" }}\nname = \"{name}\"\n" for name, v in (("pass", "[1, 2]"), ("fail", "[2, 1]"))))
    code, task = seat.submit(spec)
    assert code == 1 and [r["outcome"] for r in task["verdict"]["checks"]] == ["passed", "failed"]


def test_a_link_the_seat_user_planted_is_never_followed_to_what_it_names(seat: SpecSeat,
                                                                        secrets: tuple[Path, Path]) -> None:
    """The model's user plants links where a check reads its result: at the file, and as a folder on the way.
    Root's daemon reads the home confined, so neither is followed: the secret (the same text as the fixture,
    so a followed link would pass) never reaches the judge, and the check does not pass."""
    _, roots = secrets
    spec = seat.write("links.toml", f"""
prompt = "p"
seat = "s1"
[[setup]]
run = ["/bin/sh", "-c", "mkdir -p Desktop && ln -s \\"$1\\" Desktop/out.txt && ln -s \\"${{1%/*}}\\" Desktop/there",
       "links", "{roots}"]
[[checks]]
name = "the file is a link"
metric = "diff_text_file"
result = {{ file = "Desktop/out.txt" }}
expected = {{ fixture = "fixtures/notes.txt" }}
[[checks]]
name = "a folder on the way is a link"
metric = "diff_text_file"
result = {{ file = "Desktop/there/{roots.name}" }}
expected = {{ fixture = "fixtures/notes.txt" }}
""", {"fixtures/notes.txt": NOTES})
    code, task = seat.submit(spec)
    results = task["verdict"]["checks"]
    print(json.dumps([(r["name"], r["outcome"], r["why"], r["observed"]) for r in results], indent=1))
    assert [(r["outcome"], r["observed"]) for r in results] == [("error", None)] * 2
    assert results[0]["why"] == (f"could not look: path 'Desktop/out.txt' leads out of the seat's home: a symlink "
                                 f"points to '{roots}'")
    assert results[1]["why"].startswith(f"could not look: path 'Desktop/there/{roots.name}' leads out of the seat's "
                                        f"home: a symlink points to ")
    assert code == 3 and task["verdict"]["verdict"] == "error"
