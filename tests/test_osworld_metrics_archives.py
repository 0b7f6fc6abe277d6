"""cud's compare_archive gives OSWorld's verdicts on honest archives, and keeps a hostile one in its folder.

Hypothesis draws two archives (zip, tar, tar.gz; members in folders, the same, one changed, one more
or another set) and the options the tasks give; cud's port (cud/osworld/metrics/archives.py) and
OSWorld's function (tests/support/osworld_reference.py) must score alike, or raise alike, each on
its own copies (both unpack beside the archive, and OSWorld reuses a gold folder it finds there).
Archives whose members climb out of their folder, or link out of it, are written by hand: cud's port
must write nothing outside the folder it unpacks into.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = {"zip": ".zip", "tar": ".tar", "gztar": ".tar.gz"}

names = st.sampled_from(["a.txt", "b.txt", "notes", "slides/lecture0.txt", "slides/lecture1.txt", "x..y.txt"])
members = st.dictionaries(names, st.text(alphabet="ab \n", max_size=6), max_size=4)


def write_archive(path: Path, files: dict[str, bytes], fmt: str) -> None:
    if fmt == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        return
    with tarfile.open(path, "w:gz" if fmt == "gztar" else "w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def agree(files: dict[str, bytes], gold: dict[str, bytes], fmt: str, **options: Any) -> None:
    """Both functions on fresh copies of the two archives (named as the tasks name theirs)."""
    outcomes = []
    for function in (metric("compare_archive"), reference("compare_archive")):
        with tempfile.TemporaryDirectory() as tmp:
            pred, expected = Path(tmp, "result", "book" + FORMATS[fmt]), Path(tmp, "expected", "book" + FORMATS[fmt])
            pred.parent.mkdir()
            expected.parent.mkdir()
            write_archive(pred, files, fmt)
            write_archive(expected, gold, fmt)
            outcomes.append((outcome(function, str(pred), str(expected), **options),
                             outcome(function, None, str(expected), **options)))
    ours, theirs = outcomes
    assert ours == theirs, f"compare_archive {files!r} {gold!r} {fmt} {options!r}: cud {ours}, OSWorld {theirs}"


def test_compare_archive_is_catalogued() -> None:
    assert FUNCTIONS["compare_archive"] == "archives:compare_archive"
    assert METRICS["compare_archive"].expected and METRICS["compare_archive"].options == {"file_path", "file_type"}


@SETTINGS
@given(members, st.sampled_from(["same", "changed", "more", "other"]), members, st.sampled_from(sorted(FORMATS)),
       st.fixed_dictionaries({}, optional={"file_path": st.sampled_from(["", "slides", "absent"]),
                                           "file_type": st.sampled_from(["text", "csv", "nope"])}))
def test_compare_archive_scores_as_osworld(files: dict[str, str], how: str, other: dict[str, str], fmt: str,
                                           options: dict[str, str]) -> None:
    gold = dict(files)
    if how == "changed" and gold:
        first = sorted(gold)[0]
        gold[first] += "!"
    elif how == "more":
        gold["slides/extra.txt"] = "x"
    elif how == "other":
        gold = other
    agree({k: v.encode() for k, v in files.items()}, {k: v.encode() for k, v in gold.items()}, fmt, **options)


def test_compare_archive_of_pdfs_scores_as_osworld() -> None:
    """The tasks' own case: folders of PDFs (file_type pdf), one the same and one with a word changed."""
    def pdf(text: str) -> bytes:
        doc = FPDF()
        doc.add_page()
        doc.set_font("helvetica", size=12)
        doc.text(10, 20, text)
        return bytes(doc.output())

    same = {"lecture_slides/lecture0.pdf": pdf("Functions, Variables"), "lecture_slides/lecture1.pdf": pdf("Loops")}
    changed = {**same, "lecture_slides/lecture1.pdf": pdf("Conditionals")}
    for fmt in ("zip", "gztar"):
        agree(same, same, fmt, file_path="lecture_slides", file_type="pdf")
        agree(same, changed, fmt, file_path="lecture_slides", file_type="pdf")


def hostile_tar(path: Path, kind: str) -> None:
    with tarfile.open(path, "w") as archive:
        fine = tarfile.TarInfo("a.txt")
        fine.size = 1
        archive.addfile(fine, io.BytesIO(b"x"))
        if kind == "climb":
            info = tarfile.TarInfo("../../outside.txt")
        elif kind == "absolute":
            info = tarfile.TarInfo(str(path.parent.parent / "outside.txt"))
        elif kind == "device":
            info = tarfile.TarInfo("null")
            info.type = tarfile.CHRTYPE
            info.devmajor, info.devminor = 1, 3
            archive.addfile(info)
            return
        else:  # a link out of the folder, then a file written through it
            link = tarfile.TarInfo("out")
            link.type = tarfile.SYMTYPE
            link.linkname = "../.." if kind == "relative link" else str(path.parent.parent)
            archive.addfile(link)
            info = tarfile.TarInfo("out/outside.txt")
        info.size = 4
        archive.addfile(info, io.BytesIO(b"evil"))


@pytest.mark.parametrize("kind", ["climb", "absolute", "relative link", "absolute link", "device"])
def test_a_tar_reaching_out_of_its_folder_writes_nothing_there(tmp_path: Path, kind: str) -> None:
    """OSWorld's shutil.unpack_archive writes the member where it points; cud's port refuses the archive."""
    for function, port in ((metric("compare_archive"), True), (reference("compare_archive"), False)):
        if kind == "device" and not port:  # a device node needs root to make: OSWorld's is not tried
            continue
        work = tmp_path / function.__module__ / "judge" / "result"
        work.mkdir(parents=True)
        hostile_tar(work / "pdf.tar", kind)
        write_archive(work.parent / "gold.tar", {"a.txt": b"x"}, "tar")
        done = outcome(function, str(work / "pdf.tar"), str(work.parent / "gold.tar"))
        if port:
            assert done == ("raised", "ValueError"), done
            assert not list((work / "pdf_pred").iterdir())  # refused before anything is written
        assert (work.parent / "outside.txt").exists() is not port, (function.__module__, kind)
    with pytest.raises(ValueError, match="does not unpack: only plain files and folders inside the archive's folder"):
        metric("compare_archive")(str(tmp_path / "cud.osworld.metrics.archives" / "judge" / "result" / "pdf.tar"),
                                  str(tmp_path / "gold.tar"))


def test_a_zip_reaching_out_of_its_folder_keeps_its_members_in(tmp_path: Path) -> None:
    """A zip's climbing and absolute names are skipped, as shutil skips them for OSWorld too: same score."""
    files = {"../../outside.txt": b"evil", "/tmp/abs.txt": b"evil", "a.txt": b"fine"}
    agree(files, {"a.txt": b"fine"}, "zip")
    work = tmp_path / "result"
    work.mkdir()
    write_archive(work / "book.zip", files, "zip")
    write_archive(tmp_path / "gold.zip", {"a.txt": b"fine"}, "zip")
    assert metric("compare_archive")(str(work / "book.zip"), str(tmp_path / "gold.zip")) == 1.0
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.txt", "a.txt", "book.zip", "gold.zip"]


@pytest.mark.parametrize("file_path", ["/etc", "../..", "a/../../b"])
def test_file_path_must_stay_in_the_archives_folder(tmp_path: Path, file_path: str) -> None:
    write_archive(tmp_path / "a.zip", {"a.txt": b"x"}, "zip")
    with pytest.raises(ValueError, match="must name a folder inside"):
        metric("compare_archive")(str(tmp_path / "a.zip"), str(tmp_path / "a.zip"), file_path=file_path)


def test_the_judge_runs_compare_archive_on_the_tasks_archives(tmp_path: Path) -> None:
    from cud.osworld.judge import judge

    for role in ("result", "expected"):
        (tmp_path / role).mkdir()
        write_archive(tmp_path / role / "pdf.tar.gz", {"a.txt": b"x", "b.txt": b"y"}, "gztar")
    request = {"metric": "compare_archive", "result": {"path": str(tmp_path / "result" / "pdf.tar.gz")},
               "expected": {"path": str(tmp_path / "expected" / "pdf.tar.gz")}, "options": {"file_type": "text"}}
    assert judge(request) == {"score": 1.0}
    assert judge({**request, "result": {"none": "absent"}}) == {"score": 0.0}
    shutil.rmtree(tmp_path / "result" / "pdf.tar_pred")
    write_archive(tmp_path / "result" / "pdf.tar.gz", {"a.txt": b"x"}, "gztar")
    assert judge(request) == {"score": 0.0}
