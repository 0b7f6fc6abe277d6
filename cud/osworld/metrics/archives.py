"""OSWorld's compare_archive: two archives unpacked, their members listed and compared one by one.

From desktop-env 1.0.2 (Apache-2.0): ``desktop_env/evaluators/metrics/chrome.py`` (compare_archive).
The logic is theirs: each archive unpacked with ``shutil.unpack_archive`` (its format from its name)
into a folder beside it (``NAME_pred``, ``NAME_gold``; the judge's private directory), the names
under ``file_path`` compared sorted, then each pair of members by the ``file_type``'s metric, and
the mean score; an archive with no member under ``file_path`` divides by zero, as in OSWorld.

The result archive is the model's work, so where OSWorld trusts it, cud does not:

* a tar archive is unpacked only when each member is a plain file or folder whose name is relative
  and has no ``..`` part: a link (symbolic or hard), a device, a FIFO, an absolute name or a climbing
  one makes the metric raise (the judge's error), where OSWorld would write it, outside its folder
  too. Where tarfile has its ``data`` filter (Python 3.11.4 on), it is used as well: kept members
  lose setuid bits and group/other write permission. A zip is unpacked by shutil as OSWorld's is: it
  already skips absolute names and names holding ``..``, and writes no links.
* ``file_path`` (the task's option) must name a folder inside the archive's: an absolute one or one
  with a ``..`` part raises, where OSWorld would list whatever folder it names.
* the ``audio`` and ``video`` file types raise: their metrics (vlc.py) are not ported.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable
from typing import Any

__all__ = ("compare_archive",)


def _unpack(path: str, folder: str) -> None:
    """``shutil.unpack_archive(path, folder)``, a tar only when every member is a plain file or folder that stays
    in ``folder`` (tarfile's ``data`` filter comes with Python 3.11.4, and a judge may run an older 3.11)."""
    fmt = next((name for name, extensions, _ in shutil.get_unpack_formats()
                if any(path.endswith(ext) for ext in extensions)), None)
    if fmt is None or fmt == "zip":
        shutil.unpack_archive(path, folder, fmt)  # no format: ReadError, as OSWorld's call raises
        return
    try:
        with tarfile.open(path) as archive:
            members = archive.getmembers()
    except tarfile.TarError:
        members = []  # not a tar: shutil's ReadError below, as OSWorld's
    for member in members:
        if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in member.name.split("/"):
            kind = "link" if member.issym() or member.islnk() else "member" if member.isfile() or member.isdir() \
                else "special file"
            raise ValueError(f"archive {os.path.basename(path)!r} holds {kind} {member.name!r}, which compare_archive "
                             f"does not unpack: only plain files and folders inside the archive's folder")
    if hasattr(tarfile, "data_filter"):
        shutil.unpack_archive(path, folder, fmt, filter="data")
    else:
        shutil.unpack_archive(path, folder, fmt)


def _compare_function(file_type: str) -> Callable[..., Any]:
    # OSWorld imports each lazily, as here: a task reads one file type.
    if file_type == "text":
        from cud.osworld.metrics.files import compare_text_file
        return compare_text_file
    if file_type == "pdf":
        from cud.osworld.metrics.pdfs import compare_pdfs
        return compare_pdfs
    if file_type == "docx":
        from cud.osworld.metrics.documents import compare_docx_files
        return compare_docx_files
    if file_type == "ppt":
        from cud.osworld.metrics.slides import compare_pptx_files
        return compare_pptx_files
    if file_type == "image":
        from cud.osworld.metrics.images import compare_images
        return compare_images
    if file_type == "csv":
        from cud.osworld.metrics.tables import compare_csv
        return compare_csv
    if file_type == "table":
        from cud.osworld.metrics.tables import compare_table
        return compare_table
    if file_type in ("audio", "video"):
        raise ValueError(f"compare_archive's file_type {file_type!r} needs OSWorld's compare_{file_type}s, "
                         f"which cud has not ported")
    raise ValueError(f"[ERROR]: not support file type: {file_type}")


def compare_archive(pred_path: Any, gold_path: Any, **kwargs: Any) -> float:
    file_path = kwargs.pop("file_path", "")
    if isinstance(file_path, str) and (file_path.startswith("/") or ".." in file_path.split("/")):
        raise ValueError(f"compare_archive's file_path {file_path!r} must name a folder inside the archive's")

    if not pred_path:
        return 0.
    pred_folder = os.path.splitext(pred_path)[0] + "_pred"
    gold_folder = os.path.splitext(gold_path)[0] + "_gold"

    if os.path.exists(pred_folder):  # remove existing folder for new predictions
        shutil.rmtree(pred_folder, ignore_errors=True)
    os.makedirs(pred_folder)
    _unpack(pred_path, pred_folder)

    if not os.path.exists(gold_folder):  # use cache if exists
        os.makedirs(gold_folder)
        _unpack(gold_path, gold_folder)

    pred_files = sorted(os.listdir(os.path.join(pred_folder, file_path)))
    gold_files = sorted(os.listdir(os.path.join(gold_folder, file_path)))

    if pred_files != gold_files:
        return 0.

    score: float = 0
    compare_function = _compare_function(kwargs.pop("file_type", "text"))
    for f1, f2 in zip(pred_files, gold_files, strict=False):
        fp1 = os.path.join(pred_folder, file_path, f1)
        fp2 = os.path.join(gold_folder, file_path, f2)
        score += compare_function(fp1, fp2, **kwargs)
    return score / len(pred_files)
