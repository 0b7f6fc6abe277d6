"""Durable state: tasks, their events, approvals and an audit trail in one SQLite file (WAL).

The connection, its one-transaction writes, the events published after commit and the full-disk
failure are :mod:`cud.daemon.store.connection`'s; the schema and its migrations are in
:mod:`cud.daemon.store.schema`. Writes that finish or decide work already accepted (``finishing``)
ask ``on_full`` on a full disk to free the space reserve (``daemon/store/disk_reserve.py``) and try
once more; a submission does not.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cud.budget import format_amount
from cud.daemon.store.counts import CountRows

# SCHEMA_VERSION is schema.py's, kept importable from here (tests, the fixture scripts in tests/data/).
from cud.daemon.store.schema import SCHEMA_VERSION as SCHEMA_VERSION
from cud.daemon.store.schema import approval_view, task_view
from cud.daemon.store.spec_files import StoredFiles
from cud.daemon.store.spend import SpendRows
from cud.daemon.store.writes import finishing, iso_to_epoch, now_iso
from cud.errors import NotFound
from cud.protocol import (
    FINAL_STATES,
    LIVE_STATES,
    ApprovalView,
    ArtifactView,
    EventView,
    GuardView,
    TaskView,
    UsageView,
    VerdictView,
)
from cud.seat_needs import SeatNeeds
from cud.spec import Spec

__all__ = ()

#: An approval with the seat of its task: an approver of several seats must know which screen it is.
_APPROVALS = "SELECT approvals.*, tasks.seat AS seat FROM approvals JOIN tasks ON tasks.id = approvals.task_id"


def _page_query(uid: int | None, key: str | None, key_prefix: str | None, limit: int | None,
                before: int | None) -> tuple[str, list[Any]]:
    """:meth:`Store.tasks`'s SQL, built from the filters given: a ``?1 IS NULL OR ...`` term would keep
    SQLite from any index, so each filter is a term only when it is there."""
    terms: list[str] = []
    args: list[Any] = []
    if key is not None or key_prefix is not None:
        terms.append("submitter_uid = ?")
        args.append(uid)
    if key is not None:
        terms.append("idempotency_key = ?")
        args.append(key)
    if key_prefix is not None:
        # A range over tasks_by_key: every key that starts with the prefix sorts between it and the
        # prefix followed by the highest code point. substr keeps it exact (not LIKE: '_' is a key
        # character and LIKE's wildcard).
        terms.append("idempotency_key >= ? AND idempotency_key < ? AND substr(idempotency_key, 1, ?) = ?")
        args += [key_prefix, key_prefix + "\U0010ffff", len(key_prefix), key_prefix]
    if before is not None:
        terms.append("id < ?")
        args.append(before)
    where = f" WHERE {' AND '.join(terms)}" if terms else ""
    page = "" if limit is None else " LIMIT ?"
    return f"SELECT * FROM tasks{where} ORDER BY id DESC{page}", args + ([] if limit is None else [limit])


class Store(CountRows, SpendRows):
    """The daemon's durable state: its tasks and approvals here, what they spend and what the metrics count in
    the rows it inherits, all over one connection (:class:`StoreConnection`). Used from the event loop's
    thread only."""

    # -- tasks ----------------------------------------------------------------------------------
    def submit(self, prompt: str, model: str, max_steps: int, approval: str, uid: int, name: str,
               *args: Any, **kwargs: Any) -> TaskView:
        """Queue a task (:meth:`submit_once`'s arguments); the task with the key, if the key was recorded."""
        return self.submit_once(prompt, model, max_steps, approval, uid, name, *args, **kwargs)[0]

    def submit_once(self, prompt: str, model: str, max_steps: int, approval: str, uid: int, name: str,
                    max_duration: int | None = None, seat: str | None = None,
                    rules: list[dict[str, Any]] | None = None, spec: Spec | None = None,
                    files: Mapping[str, bytes] | None = None, key: str | None = None,
                    budgets: Mapping[str, Any] | None = None, guard: GuardView | None = None,
                    needs: SeatNeeds = SeatNeeds()) -> tuple[TaskView, bool]:
        """Queue a task, and say False; or, when ``uid`` has recorded ``key`` (the idempotency key) already,
        queue nothing and return that task, and True.

        The lookup and the insert are one transaction: a submit whose files arrived while another
        submit of the same key was stored finds that task here, so every submit of one key gets the
        one task (the unique index on (submitter_uid, idempotency_key) is the backstop). A key names
        a task only for the uid that submitted it: another uid's same key is its own.

        ``seat`` pins it there, else the first free seat takes it (one with a session if its
        ``spec`` needs one, one with the screen and tags in ``needs``). ``budgets``: max_cost (a
        Decimal), max_input_tokens, max_output_tokens, each None for none, and price, the
        PriceView the task was accepted with (daemon/budget/accepted.py)."""
        budgets = budgets or {}
        max_cost = budgets.get("max_cost")
        with self._tx(durable=True) as db:
            if key is not None and (known := self._row_by_key(uid, key)) is not None:
                return task_view(known), True
            cur = db.execute(
                "INSERT INTO tasks (state, prompt, model, max_steps, max_duration, approval, submitter_uid,"
                " submitter_name, created_at, seat, pinned, rules, spec, needs_session, idempotency_key, max_cost,"
                " max_input_tokens, max_output_tokens, guard, screen, seat_tags, price)"
                " VALUES ('queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (prompt, model, max_steps, max_duration, approval, uid, name, now_iso(), seat, seat is not None,
                 json.dumps(rules) if rules else None, None if spec is None else json.dumps(spec.judging()),
                 spec is not None and spec.needs_session, key,
                 None if max_cost is None else format_amount(max_cost), budgets.get("max_input_tokens"),
                 budgets.get("max_output_tokens"), None if guard is None else json.dumps(guard),
                 needs.screen, json.dumps(needs.tags) if needs.tags else None,
                 None if budgets.get("price") is None else json.dumps(budgets["price"])),
            )
            task_id = int(cur.lastrowid or 0)
            # One file's bytes at a time (a spool reads each when asked): they may be hundreds of MB together.
            db.executemany("INSERT INTO task_files (task_id, name, data) VALUES (?, ?, ?)",
                           ((task_id, name, data) for name, data in (files or {}).items()))
            self._event(db, task_id, "queued", {"by": {"uid": uid, "name": name}})
            self._audit(db, uid, name, "submit", task_id, "ok")
        return self.task(task_id), False

    def task_by_key(self, uid: int, key: str) -> TaskView | None:
        """The task ``uid`` submitted with this idempotency key, if it did (another uid's key is not its)."""
        row = self._row_by_key(uid, key)
        return None if row is None else task_view(row)

    def _row_by_key(self, uid: int, key: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(
            "SELECT * FROM tasks WHERE submitter_uid = ? AND idempotency_key = ?", (uid, key)).fetchone()
        return row

    def task(self, task_id: int) -> TaskView:
        row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise NotFound(f"no task with id {task_id}", id=task_id)
        return task_view(row)

    def tasks(self, *, uid: int | None = None, key: str | None = None, key_prefix: str | None = None,
              limit: int | None = None, before: int | None = None) -> list[TaskView]:
        """One page of tasks, oldest first: the newest ``limit`` (every one if None) whose id is below
        ``before`` (any if None); only the one with idempotency key ``key`` / those whose key starts
        with ``key_prefix``, if given, and then only among those ``uid`` submitted (a key is its
        submitter's: the same key of another uid names another task).

        Each shape of filter reads an index, so a page costs what it returns, never the table: the
        id's own b-tree without a key, ``tasks_by_key`` with one (a prefix reads the keys under it)."""
        if (key is not None or key_prefix is not None) and uid is None:
            raise ValueError("a key names a task only for its submitter: tasks(key=...) needs uid")
        sql, args = _page_query(uid, key, key_prefix, limit, before)
        rows = self._db.execute(sql, args).fetchall()
        return [task_view(row) for row in reversed(rows)]

    def next_queued(self, seat: str | None = None, *, session: bool = True,
                    meets: Callable[[SeatNeeds], bool] = lambda needs: True) -> TaskView | None:
        """The oldest queued task ``seat`` may run (pinned to it, or to none; one that needs a session
        only if the seat has one: ``session``; one whose needs it ``meets``); any seat's if None."""
        if seat is None:
            row = self._db.execute("SELECT * FROM tasks WHERE state = 'queued' ORDER BY id LIMIT 1").fetchone()
            return None if row is None else task_view(row)
        # Only the needs' columns until one fits: the oldest task that does not care fits at once.
        with contextlib.closing(self._db.execute(
                "SELECT id, seat, screen, seat_tags FROM tasks WHERE state = 'queued' AND (pinned = 0 OR seat = ?)"
                " AND (needs_session = 0 OR ?) ORDER BY id", (seat, session))) as rows:
            fits = next((row["id"] for row in rows
                         if meets(SeatNeeds(row["seat"], row["screen"], tuple(json.loads(row["seat_tags"] or "[]"))))),
                        None)
        return None if fits is None else self.task(fits)

    def task_files(self, task_id: int) -> StoredFiles:
        """The files a task's spec brought from the submitter's side, by the names the spec gives them."""
        return StoredFiles(self._db, task_id)

    @finishing
    def start(self, task_id: int, seat: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE tasks SET state = 'running', started_at = ?, seat = ?, held = NULL WHERE id = ? AND state = 'queued'",
                (now_iso(), seat, task_id),
            )
            self._event(db, task_id, "running", {"seat": seat})

    @finishing
    def requeue(self, task_id: int, seat: str, reason: str) -> bool:
        """Put a running task back in the queue before it began (its seat could not be made ready).

        A pinned task keeps its seat and waits for it; another goes to whichever seat is free.
        False if the task was no longer running (cancelled meanwhile).
        """
        with self._tx() as db:
            moved = db.execute(
                "UPDATE tasks SET state = 'queued', started_at = NULL, seat = CASE WHEN pinned THEN seat END"
                " WHERE id = ? AND state = 'running'", (task_id,)).rowcount
            if moved:
                self._event(db, task_id, "requeued", {"seat": seat, "reason": reason})
        return bool(moved)

    @finishing
    def add_event(self, task_id: int, kind: str, data: dict[str, Any], *, steps: int | None = None,
                  usage: UsageView | None = None) -> EventView:
        with self._tx() as db:
            if steps is not None:
                db.execute("UPDATE tasks SET steps = ? WHERE id = ?", (steps, task_id))
            if usage is not None:
                db.execute("UPDATE tasks SET usage = ? WHERE id = ?", (json.dumps(usage), task_id))
            return self._event(db, task_id, kind, data)

    @finishing
    def finish(
        self,
        task_id: int,
        state: str,
        *,
        final_message: str | None = None,
        error: dict[str, Any] | None = None,
        reason: str | None = None,
        verdict: VerdictView | None = None,
        artifacts: list[ArtifactView] | None = None,
    ) -> None:
        """End a task: its state, and for a spec's task its verdict and collected files (the ``end``
        event says the verdict and score, so a follower and a hook learn both at once)."""
        assert state in FINAL_STATES
        with self._tx() as db:
            db.execute(
                "UPDATE tasks SET state = ?, final_message = ?, error = ?, reason = COALESCE(?, reason),"
                " finished_at = ?, verdict = ?, artifacts = ? WHERE id = ?",
                (state, final_message, None if error is None else json.dumps(error), reason, now_iso(),
                 None if verdict is None else json.dumps(verdict), None if artifacts is None else json.dumps(artifacts),
                 task_id),
            )
            db.execute(
                "UPDATE approvals SET state = 'cancelled', decided_at = ?, reason = ?"
                " WHERE task_id = ? AND state = 'pending'",
                (now_iso(), f"the task ended ({state})", task_id),
            )
            self._event(
                db,
                task_id,
                "end",
                {"state": state, "final_message": final_message, "error": error, "reason": reason,
                 **({"verdict": verdict["verdict"], "score": verdict["score"]} if verdict is not None else {})},
            )

    @finishing
    def cancel(self, task_id: int, uid: int, name: str) -> str:
        """Record a cancel request. Returns the task's state before it (queued tasks end here)."""
        return self._stop(task_id, uid, name, "cancel", "cancelled", f"cancelled by {name} (uid {uid}) before it started")

    @finishing
    def interrupt(self, task_id: int, uid: int, name: str, reason: str) -> str:
        """Record an ``interrupt``: a queued task ends ``interrupted`` here with ``reason``; one under way gets
        an ``interrupt_requested`` event (its run ends it). Returns the state before; a task that had ended
        is left as it was."""
        return self._stop(task_id, uid, name, "interrupt", "interrupted", reason, asked={"reason": reason})

    def _stop(self, task_id: int, uid: int, name: str, kind: str, state_then: str, reason: str,
              asked: dict[str, Any] | None = None) -> str:
        """``cancel`` and ``interrupt``: audited; a queued task ends ``state_then`` here (it needs no seat to
        stop it), one under way gets a ``KIND_requested`` event that its run acts on. The state before."""
        with self._tx() as db:
            row = db.execute("SELECT state FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None:
                raise NotFound(f"no task with id {task_id}", id=task_id)
            state = row["state"]
            self._audit(db, uid, name, kind, task_id, state)
            if state == "queued":
                db.execute("UPDATE tasks SET state = ?, reason = ?, finished_at = ? WHERE id = ?",
                           (state_then, reason, now_iso(), task_id))
                self._event(db, task_id, "end", {"state": state_then, "final_message": None, "error": None,
                                                 "reason": reason})
            elif state == "interrupted" and kind == "interrupt":  # the reason added, once (the handler's docstring)
                db.execute("UPDATE tasks SET reason = COALESCE(reason || '; ', '') || ? WHERE id = ? "
                           "AND instr(COALESCE(reason, ''), ?) = 0", (reason, task_id, reason))
            elif state not in FINAL_STATES:
                self._event(db, task_id, f"{kind}_requested", {"by": {"uid": uid, "name": name}, **(asked or {})})
        return str(state)

    @finishing
    def control(self, task_id: int, kind: str, uid: int, name: str, *, state: str | None = None,
                data: dict[str, Any] | None = None, audit: str | None = None) -> None:
        """Record a person's control of a running task (``kind``: pause_requested, paused, resumed,
        human_action), by ``uid``/``name``; ``state`` moves the task, ``audit`` adds an audit row."""
        by = {"uid": uid, "name": name}
        with self._tx() as db:
            if state is not None:
                db.execute("UPDATE tasks SET state = ? WHERE id = ?", (state, task_id))
            if audit is not None:
                self._audit(db, uid, name, audit, task_id, "ok")
            self._event(db, task_id, kind, {"by": by, **(data or {})})

    @finishing
    def recover(self) -> list[int]:
        """At start-up: tasks a dead daemon left running become interrupted. Returns their ids."""
        with self._tx() as db:
            live = sorted(LIVE_STATES)
            rows = db.execute(
                f"SELECT id FROM tasks WHERE state IN ({', '.join('?' * len(live))})", live
            ).fetchall()
            reason = "the daemon stopped while the task was running (found at start-up)"
            for row in rows:
                db.execute(
                    "UPDATE tasks SET state = 'interrupted', reason = ?, finished_at = ? WHERE id = ?",
                    (reason, now_iso(), row["id"]),
                )
                db.execute(
                    "UPDATE approvals SET state = 'interrupted', decided_at = ?, reason = ?"
                    " WHERE task_id = ? AND state = 'pending'",
                    (now_iso(), reason, row["id"]),
                )
                self._event(db, row["id"], "end", {"state": "interrupted", "final_message": None, "error": None,
                                                   "reason": reason})
        return [int(row["id"]) for row in rows]

    def events(self, task_id: int, after: int = 0) -> list[EventView]:
        rows = self._db.execute(
            "SELECT * FROM events WHERE task_id = ? AND seq > ? ORDER BY seq", (task_id, after)
        ).fetchall()
        return [
            {"task_id": r["task_id"], "seq": r["seq"], "at": r["at"], "kind": r["kind"], "data": json.loads(r["data"])}
            for r in rows
        ]

    # -- approvals ------------------------------------------------------------------------------
    @finishing
    def create_approval(
        self,
        task_id: int,
        kind: str,
        checks: list[dict[str, Any]],
        actions: list[dict[str, Any]],
        step: int,
        screenshot: str | None,
        timeout: float,
        targets: list[Any] | None = None,
    ) -> ApprovalView:
        created = now_iso()
        targets = targets if targets is not None else [None] * len(actions)
        deadline = datetime.fromtimestamp(time.time() + timeout, UTC)
        deadline_at = deadline.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO approvals (task_id, kind, state, checks, actions, targets, step, screenshot, created_at,"
                " deadline_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)",
                (task_id, kind, json.dumps(checks), json.dumps(actions), json.dumps(targets), step, screenshot,
                 created, deadline_at),
            )
            approval_id = int(cur.lastrowid or 0)
            db.execute("UPDATE tasks SET state = 'awaiting_approval' WHERE id = ?", (task_id,))
            self._event(
                db,
                task_id,
                "approval_requested",
                {"approval_id": approval_id, "kind": kind, "checks": checks, "actions": actions,
                 "targets": targets, "screenshot": screenshot, "deadline_at": deadline_at},
            )
        return self.approval(approval_id)

    @finishing
    def decide_approval(
        self, approval_id: int, outcome: str, uid: int | None, name: str | None, reason: str | None
    ) -> bool:
        """Move a pending approval to ``outcome``. False if it was no longer pending (lost a race)."""
        with self._tx() as db:
            row = db.execute("SELECT task_id, state FROM approvals WHERE id = ?", (approval_id,)).fetchone()
            if row is None:
                raise NotFound(f"no approval with id {approval_id}", id=approval_id)
            if uid is not None:
                self._audit(db, uid, name or "", outcome, approval_id, "ok" if row["state"] == "pending" else
                            f"already {row['state']}")
            if row["state"] != "pending":
                return False
            db.execute(
                "UPDATE approvals SET state = ?, decided_at = ?, decided_by_uid = ?, decided_by_name = ?,"
                " reason = ? WHERE id = ?",
                (outcome, now_iso(), uid, name, reason, approval_id),
            )
            if outcome == "approved":
                db.execute(
                    "UPDATE tasks SET state = 'running' WHERE id = ? AND state = 'awaiting_approval'", (row["task_id"],)
                )
            by = None if uid is None else {"uid": uid, "name": name}
            self._event(
                db,
                row["task_id"],
                "approval_decided",
                {"approval_id": approval_id, "outcome": outcome, "by": by, "reason": reason},
            )
        return True

    def approval(self, approval_id: int) -> ApprovalView:
        row = self._db.execute(f"{_APPROVALS} WHERE approvals.id = ?", (approval_id,)).fetchone()
        if row is None:
            raise NotFound(f"no approval with id {approval_id}", id=approval_id)
        return approval_view(row)

    def pending_approvals(self) -> list[ApprovalView]:
        rows = self._db.execute(f"{_APPROVALS} WHERE approvals.state = 'pending' ORDER BY approvals.id").fetchall()
        return [approval_view(row) for row in rows]

    def audit_rows(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._db.execute("SELECT * FROM audit ORDER BY id")]

    def record_refusal(self, uid: int, name: str, request: str, target: int | None, reason: str) -> None:
        with self._tx() as db:
            self._audit(db, uid, name, request, target, f"refused: {reason}")

    # -- retention ------------------------------------------------------------------------------
    @finishing
    def prune(self, max_tasks: int, max_age_days: float) -> list[int]:
        """Delete finished tasks beyond the newest ``max_tasks`` or older than ``max_age_days``."""
        cutoff = time.time() - max_age_days * 86400
        finished = self._db.execute(
            f"SELECT id, finished_at FROM tasks WHERE state IN ({', '.join('?' * len(FINAL_STATES))}) ORDER BY id DESC",
            sorted(FINAL_STATES),
        ).fetchall()
        doomed = [
            int(row["id"])
            for index, row in enumerate(finished)
            if index >= max_tasks or (row["finished_at"] and iso_to_epoch(row["finished_at"]) < cutoff)
        ]
        if doomed:
            with self._tx() as db:
                db.executemany("DELETE FROM tasks WHERE id = ?", [(i,) for i in doomed])
        return doomed
