"""The store's one SQLite connection (WAL) and what every group of rows shares through it: the
transaction, the events it publishes, the audit trail.

Every public method of the store that changes rows does so in ONE transaction (``_tx``), so a crash
leaves either all of a change or none of it. Events (``_event``) are published to subscribers only
after their transaction commits, so a follower never sees an event that a crash could take back.
A full disk makes a transaction fail whole with ``StorageFull`` (``writes.finishing`` retries the
writes that finish accepted work once the reserve is freed).

The groups of rows (:class:`~cud.daemon.store.counts.CountRows`,
:class:`~cud.daemon.store.spend.SpendRows`, and the tasks and approvals of
:class:`~cud.daemon.store.database.Store`) extend this class: these members are declared once, here.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cud.daemon.store.schema import MIGRATIONS, SCHEMA_VERSION, split_sql
from cud.daemon.store.writes import now_iso
from cud.errors import ConfigError, StorageFull
from cud.protocol import EVENT_KINDS, EventView

__all__ = ("StoreConnection", "Subscriber")

Subscriber = Callable[[EventView], None]


class StoreConnection:
    """The daemon's one connection to its database, migrated to this cud's schema. Used from the event loop's
    thread only."""

    def __init__(self, path: Path, on_full: Callable[[], bool] | None = None) -> None:
        self.path = path
        #: Frees room on a full disk (the space reserve); True if it freed any.
        self.on_full = on_full
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open database {str(path)!r}: {exc}", path=str(path)) from None
        self._db.row_factory = sqlite3.Row
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise ConfigError(f"database {str(path)!r} cannot use WAL (journal mode {mode!r})", path=str(path))
        # NORMAL in WAL mode survives a killed process; submit() asks for FULL so a
        # submission also survives a power loss before it is acknowledged.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._subscribers: list[Subscriber] = []
        self._pending: list[EventView] = []
        self._migrate()

    def close(self) -> None:
        self._db.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"database {str(self.path)!r} has schema version {version}, newer than this cud's "
                f"{SCHEMA_VERSION}; refusing to touch it",
                path=str(self.path),
                version=version,
            )
        # Foreign keys off while migrating: a rebuilt table is dropped and renamed, which
        # would otherwise cascade into its events (checked whole before each commit).
        self._db.execute("PRAGMA foreign_keys=OFF")
        try:
            for target in range(version, SCHEMA_VERSION):
                # executescript commits first, so run each step's statements in our own transaction.
                with self._tx() as db:
                    for statement in split_sql(MIGRATIONS[target]):
                        db.execute(statement)
                    broken = db.execute("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise ConfigError(f"migrating {str(self.path)!r} to schema {target + 1} broke "
                                          f"{len(broken)} references; nothing was changed", path=str(self.path))
                    db.execute(f"PRAGMA user_version = {target + 1}")
        finally:
            self._db.execute("PRAGMA foreign_keys=ON")

    @contextlib.contextmanager
    def _tx(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        if durable:
            self._db.execute("PRAGMA synchronous=FULL")
        pending: list[EventView] = []
        self._pending = pending
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:  # SQLite may have rolled back itself (SQLITE_FULL)
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
                raise StorageFull(
                    f"the disk holding {str(self.path)!r} is full; nothing was written",
                    path=str(self.path),
                ) from None
            raise
        finally:
            self._pending = []
            if durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
        for event in pending:
            for subscriber in list(self._subscribers):
                subscriber(event)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber) if subscriber in self._subscribers else None

    def _event(self, db: sqlite3.Connection, task_id: int, kind: str, data: dict[str, Any]) -> EventView:
        if kind not in EVENT_KINDS:  # a bug: the record, its readers and docs/report.md know only these
            raise ValueError(f"unknown event kind {kind!r}; add it to cud.protocol.EVENT_KINDS "
                             "(cud/protocol/replies.py) and docs/report.md")
        seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE task_id = ?", (task_id,)).fetchone()[0]
        at = now_iso()
        db.execute(
            "INSERT INTO events (task_id, seq, at, kind, data) VALUES (?, ?, ?, ?, ?)",
            (task_id, seq, at, kind, json.dumps(data, ensure_ascii=False)),
        )
        event: EventView = {"task_id": task_id, "seq": seq, "at": at, "kind": kind, "data": data}
        self._pending.append(event)
        return event

    def _audit(
        self, db: sqlite3.Connection, uid: int, name: str, request: str, target: int | None, outcome: str
    ) -> None:
        db.execute(
            "INSERT INTO audit (at, uid, name, request, target, outcome) VALUES (?, ?, ?, ?, ?, ?)",
            (now_iso(), uid, name, request, target, outcome),
        )
