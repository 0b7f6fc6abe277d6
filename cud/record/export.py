"""The export layout (``cuctl export``): a task's raw record as plain files.

``cuctl export ID -o DIR`` writes a directory; ``-o FILE.tar``, ``FILE.tar.gz``
or ``FILE.tgz`` writes the same files into a tar archive under ``task-ID/``::

    DIR/manifest.json          {"format": "cud-export", "version": 1, "exported_at", "cud_version",
                                "task_id", "events", "files": [{"name", "bytes", "sha256"}]}
    DIR/task.json              the task as `cuctl show --json` prints it
    DIR/events.jsonl           every event, one JSON object a line, in order:
                               {"task_id", "seq", "at", "kind", "data"}
    DIR/screenshots/step-0001.png ...
                               each screenshot the daemon kept, under the name the
                               events use (a step event's "saw" and "screenshot")
    DIR/video.mp4 (or .webm)   the task's screen recording, if it was recorded
                               (docs/video.md; listed in the manifest's "files" too)
    DIR/verdict.json           a spec's verdict (docs/specs.md), as task.json's "verdict",
                               with the collected files' list: {"verdict", "artifacts"}
    DIR/artifacts/PATH ...     each file the spec's [collect] kept, at its path in the seat's
                               home (listed in the manifest's "files" as "artifacts/PATH")

The event kinds are :data:`cud.protocol.EVENT_KINDS`; docs/report.md says what each one's
``data`` holds.

Screens can show anything, so the directory is created 0700 and every file
0600, as the daemon keeps them. Nothing is overwritten: the export is written
beside the target and renamed into place. :func:`load_export` reads either form
back into a :class:`~cud.record.reading.Record` (``cud.record.replay`` turns one
into a scenario for the scripted model).
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Literal

import cud
from cud.errors import ConfigError, CudError
from cud.protocol import RECORD_FILE_NAME
from cud.record.reading import Record, is_artifact, is_video

__all__ = ("FORMAT", "VERSION", "load_export", "write_export")

FORMAT = "cud-export"
VERSION = 1
_ARCHIVES = (".tar", ".tar.gz", ".tgz")


def _documents(record: Record) -> dict[str, bytes]:
    """Every file of the export, by its path inside the export."""
    files = [
        {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in sorted(record.files.items())
    ]
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "cud_version": cud.__version__,
        "task_id": record.task["id"],
        "events": len(record.events),
        "files": files,
    }
    out = {
        "manifest.json": (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode(),
        "task.json": (json.dumps(record.task, ensure_ascii=False, indent=2) + "\n").encode(),
        "events.jsonl": "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in record.events).encode(),
    }
    if record.task.get("verdict") is not None or record.task.get("artifacts"):
        verdict = {"verdict": record.task.get("verdict"), "artifacts": record.task.get("artifacts") or []}
        out["verdict.json"] = (json.dumps(verdict, ensure_ascii=False, indent=2) + "\n").encode()
    for name, data in record.files.items():
        out[_place(name)] = data
    return out


def _place(name: str) -> str:
    """Where a record file goes in the export: screenshots in their folder, the video and collected files
    (``artifacts/PATH``) under their own names."""
    return name if is_video(name) or is_artifact(name) else f"screenshots/{name}"


def write_export(record: Record, target: Path) -> Path:
    """Write ``record`` to ``target`` (a new directory, or a tar archive by its suffix)."""
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise ConfigError(f"{str(target)!r} already exists; refusing to overwrite it", path=str(target))
    parent = target.parent if str(target.parent) else Path(".")
    documents = _documents(record)
    try:
        if target.name.endswith(_ARCHIVES):
            _write_archive(documents, target, parent, f"task-{record.task['id']}")
        else:
            _write_directory(documents, target, parent)
    except OSError as exc:
        raise CudError(f"cannot write the export to {str(target)!r}: {exc.strerror or exc}", path=str(target)) from None
    return target


def _write_directory(documents: dict[str, bytes], target: Path, parent: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))  # mkdtemp makes it 0700
    try:
        (staging / "screenshots").mkdir(mode=0o700)
        for relative, data in documents.items():
            for folder in reversed(Path(relative).parents[:-1]):  # artifacts/ and the folders of its files
                (staging / folder).mkdir(mode=0o700, exist_ok=True)
            fd = os.open(staging / relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        if target.is_dir():
            target.rmdir()  # empty (checked above); rename cannot replace a directory otherwise
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_archive(documents: dict[str, bytes], target: Path, parent: Path, top: str) -> None:
    mode: Literal["w:gz", "w"] = "w:gz" if target.name.endswith((".gz", ".tgz")) else "w"
    fd, staging = tempfile.mkstemp(prefix=f".{target.name}.", dir=parent)  # 0600
    try:
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode=mode) as archive:
            for relative, data in documents.items():
                info = tarfile.TarInfo(f"{top}/{relative}")
                info.size, info.mode = len(data), 0o600
                archive.addfile(info, io.BytesIO(data))
        os.rename(staging, target)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def load_export(source: str | os.PathLike[str]) -> Record:
    """Read an export (directory or tar archive) back; ConfigError names what is wrong with it."""
    path = Path(source)
    if path.is_dir():
        def read(relative: str) -> bytes | None:
            try:
                return (path / relative).read_bytes()
            except FileNotFoundError:
                return None
        return _load(read, str(path))
    if path.is_file() and tarfile.is_tarfile(path):
        with tarfile.open(path) as archive:
            # Read members by name only: nothing from an archive is ever extracted to disk.
            members = {m.name.split("/", 1)[1]: m for m in archive.getmembers() if m.isfile() and "/" in m.name}

            def read_member(relative: str) -> bytes | None:
                member = members.get(relative)
                handle = archive.extractfile(member) if member is not None else None
                return None if handle is None else handle.read()

            return _load(read_member, str(path))
    raise ConfigError(f"{str(path)!r} is neither an export directory nor a tar archive of one", path=str(path))


def _load(read: Any, where: str) -> Record:
    def document(relative: str) -> bytes:
        data = read(relative)
        if data is None:
            raise ConfigError(f"export {where!r} has no {relative}", path=where, file=relative)
        return data

    try:
        manifest = json.loads(document("manifest.json"))
        task = json.loads(document("task.json"))
        events = [json.loads(line) for line in document("events.jsonl").decode().splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"export {where!r} has a malformed file: {exc}", path=where) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ConfigError(f"export {where!r}: manifest.json is not a {FORMAT} manifest", path=where)
    if manifest.get("version") != VERSION:
        raise ConfigError(f"export {where!r} has format version {manifest.get('version')!r}; this cud reads {VERSION}",
                          path=where, version=manifest.get("version"))
    files: dict[str, bytes] = {}
    for entry in manifest.get("files", []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not RECORD_FILE_NAME.fullmatch(name):
            raise ConfigError(f"export {where!r} lists a bad file name {str(name)[:80]!r}", path=where)
        data = document(_place(name))
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise ConfigError(f"export {where!r}: {_place(name)} does not match its sha256 in the manifest",
                              path=where, file=name)
        files[name] = data
    return Record(task=task, events=events, files=files)
