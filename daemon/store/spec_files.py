"""A spec's files from the submitter's side: as they arrive (:class:`FileSpool`) and as stored (:class:`StoredFiles`).

The bytes of a ``submit``'s files come in chunks over a connection that may be cut at any
moment; the task and its files are stored in one transaction only once every byte is there
(:meth:`cud.daemon.store.database.Store.submit`). Until then they wait here: in a file
opened with ``O_TMPFILE`` (:func:`tempfile.TemporaryFile`), which has no name in any folder,
so an upload cut off, a refusal, or the daemon killed mid-way leaves nothing behind to
clean up. It is on the state directory's disk, which the full-disk reserve watches, not in
memory: a spec's files may be hundreds of megabytes. For the same reason a task's stored
files are read from the database one at a time, when setup or a check asks for one.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ("FileSpool", "StoredFiles")


@dataclasses.dataclass(frozen=True)
class _Entry:
    name: str
    offset: int
    size: int


class FileSpool(Mapping[str, bytes]):
    """Named files, written one after another (:meth:`begin`, :meth:`write`), read back whole by name."""

    def __init__(self, folder: Path) -> None:
        self._file = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (closed by close(), with the spool)
        self._entries: list[_Entry] = []
        self._end = 0

    def __enter__(self) -> FileSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def begin(self, name: str, size: int) -> None:
        """The next bytes written are file ``name``'s, ``size`` of them."""
        self._entries.append(_Entry(name, self._end, size))

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self._file.fileno()
        while view:
            written = os.pwrite(fd, view, self._end)
            view = view[written:]
            self._end += written

    def __iter__(self) -> Iterator[str]:
        return iter([entry.name for entry in self._entries])

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> bytes:
        """File ``name`` whole (one at a time: the store keeps each as one value)."""
        entry = next((e for e in self._entries if e.name == name), None)
        if entry is None:
            raise KeyError(name)
        data = os.pread(self._file.fileno(), entry.size, entry.offset)
        if len(data) != entry.size:  # only if its bytes never all came: never half a file stored
            raise OSError(f"spec file {name!r}: {len(data)} of its {entry.size} bytes are in the spool")
        return data


class StoredFiles(Mapping[str, bytes]):
    """A task's stored files by the names its spec gives them, each read from the database when asked for."""

    def __init__(self, db: sqlite3.Connection, task_id: int) -> None:
        self._db, self._task_id = db, task_id
        self._names = [row[0] for row in db.execute("SELECT name FROM task_files WHERE task_id = ? ORDER BY name",
                                                    (task_id,))]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, name: str) -> bytes:
        row = self._db.execute("SELECT data FROM task_files WHERE task_id = ? AND name = ?",
                               (self._task_id, name)).fetchone()
        if row is None:
            raise KeyError(name)
        return bytes(row[0])
