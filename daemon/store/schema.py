"""The database's schema, its migrations, and how its rows become the protocol's views.

The schema version lives in ``PRAGMA user_version``; :data:`MIGRATIONS` upgrades
older files in place (tests/data holds a file of every released schema, and each
must keep upgrading).
"""

from __future__ import annotations

import json
import sqlite3

from cud.protocol import ApprovalView, Person, TaskView

__all__ = ("MIGRATIONS", "SCHEMA_VERSION", "approval_view", "split_sql", "task_view")

# Index i holds the SQL that moves a database from user_version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE tasks (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'awaiting_approval', 'succeeded',
                                                      'failed', 'cancelled', 'interrupted')),
        prompt         TEXT NOT NULL,
        model          TEXT NOT NULL,
        max_steps      INTEGER NOT NULL,
        approval       TEXT NOT NULL CHECK (approval IN ('safety', 'actions')),
        submitter_uid  INTEGER NOT NULL,
        submitter_name TEXT NOT NULL,
        steps          INTEGER NOT NULL DEFAULT 0,
        final_message  TEXT,
        error          TEXT,               -- JSON {"kind", "message", "details"}
        reason         TEXT,               -- why a task was interrupted or cancelled
        created_at     TEXT NOT NULL,
        started_at     TEXT,
        finished_at    TEXT
    );
    CREATE INDEX tasks_by_state ON tasks (state, id);
    CREATE TABLE events (
        task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        seq     INTEGER NOT NULL,
        at      TEXT NOT NULL,
        kind    TEXT NOT NULL,
        data    TEXT NOT NULL,              -- JSON object
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE approvals (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id         INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        kind            TEXT NOT NULL CHECK (kind IN ('safety', 'action')),
        state           TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'timed_out',
                                                       'cancelled', 'interrupted')),
        checks          TEXT NOT NULL,      -- JSON list of {"id", "code", "message"}
        actions         TEXT NOT NULL,      -- JSON list of the actions awaiting approval
        step            INTEGER NOT NULL,
        screenshot      TEXT,               -- file name in the task's trajectory directory
        created_at      TEXT NOT NULL,
        deadline_at     TEXT,
        decided_at      TEXT,
        decided_by_uid  INTEGER,
        decided_by_name TEXT,
        reason          TEXT
    );
    CREATE INDEX approvals_by_state ON approvals (state, id);
    CREATE TABLE audit (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at      TEXT NOT NULL,
        uid     INTEGER NOT NULL,
        name    TEXT NOT NULL,
        request TEXT NOT NULL,
        target  INTEGER,
        outcome TEXT NOT NULL
    );
    """,
    # 2: a wall-clock limit per task, in seconds; NULL (tasks from before) means the daemon's.
    """
    ALTER TABLE tasks ADD COLUMN max_duration INTEGER
    """,
    # 3: seats. ``seat`` is where the task runs or ran, or the seat it is pinned to while
    # queued; tasks from before ran on the one display, which is now the seat 'default'.
    """
    ALTER TABLE tasks ADD COLUMN seat TEXT;
    ALTER TABLE tasks ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
    UPDATE tasks SET seat = 'default' WHERE state != 'queued'
    """,
    # 4: the state 'paused'. SQLite cannot change a CHECK, so the table is rebuilt (with
    # foreign keys off, see Store._migrate), keeping every id and the id sequence: a
    # pruned task's id must never come back.
    """
    CREATE TABLE tasks_v4 (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'awaiting_approval', 'paused',
                                                      'succeeded', 'failed', 'cancelled', 'interrupted')),
        prompt         TEXT NOT NULL,
        model          TEXT NOT NULL,
        max_steps      INTEGER NOT NULL,
        approval       TEXT NOT NULL CHECK (approval IN ('safety', 'actions')),
        submitter_uid  INTEGER NOT NULL,
        submitter_name TEXT NOT NULL,
        steps          INTEGER NOT NULL DEFAULT 0,
        final_message  TEXT,
        error          TEXT,
        reason         TEXT,
        created_at     TEXT NOT NULL,
        started_at     TEXT,
        finished_at    TEXT,
        max_duration   INTEGER,
        seat           TEXT,
        pinned         INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1))
    );
    INSERT INTO tasks_v4 (id, state, prompt, model, max_steps, approval, submitter_uid, submitter_name, steps,
                          final_message, error, reason, created_at, started_at, finished_at, max_duration, seat,
                          pinned)
        SELECT id, state, prompt, model, max_steps, approval, submitter_uid, submitter_name, steps, final_message,
               error, reason, created_at, started_at, finished_at, max_duration, seat, pinned FROM tasks;
    INSERT INTO sqlite_sequence (name, seq)
        SELECT 'tasks_v4', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'tasks_v4');
    UPDATE sqlite_sequence
        SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'tasks'), 0))
        WHERE name = 'tasks_v4';
    DROP TABLE tasks;
    ALTER TABLE tasks_v4 RENAME TO tasks;
    CREATE INDEX tasks_by_state ON tasks (state, id)
    """,
    # 5: what a task sent the model and what the model counted (JSON, see cud.protocol.UsageView);
    # NULL for tasks from before and until the first request.
    """
    ALTER TABLE tasks ADD COLUMN usage TEXT
    """,
    # 6: what actions touch (docs/targets.md): the target of each approved action, and a
    # submitter's policy rules for the task (JSON; NULL: none).
    """
    ALTER TABLE approvals ADD COLUMN targets TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE tasks ADD COLUMN rules TEXT
    """,
    # 7: task specs (docs/specs.md). ``spec``: its setup, checks and collect (JSON, cud.spec's
    # normal form; NULL: a prompt-only task); ``needs_session``: only a seat with a session may
    # take it; ``verdict`` (JSON, cud.protocol.VerdictView) and ``artifacts`` (JSON list of the
    # collected files, which live in the task's trajectory directory); the spec's files from
    # the submitter's side, by the name the spec gives them, until the task is pruned.
    """
    ALTER TABLE tasks ADD COLUMN spec TEXT;
    ALTER TABLE tasks ADD COLUMN needs_session INTEGER NOT NULL DEFAULT 0 CHECK (needs_session IN (0, 1));
    ALTER TABLE tasks ADD COLUMN verdict TEXT;
    ALTER TABLE tasks ADD COLUMN artifacts TEXT;
    CREATE TABLE task_files (
        task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        name    TEXT NOT NULL,
        data    BLOB NOT NULL,
        PRIMARY KEY (task_id, name)
    ) WITHOUT ROWID
    """,
    # 8: a submission's idempotency key (docs/protocol.md): written with the task in one
    # transaction; the unique index makes a second task with a recorded key impossible, whatever
    # races in (NULLs, the tasks without a key, are distinct to SQLite).
    """
    ALTER TABLE tasks ADD COLUMN idempotency_key TEXT;
    CREATE UNIQUE INDEX tasks_by_key ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL
    """,
    # 9 (#30, budgets): a task's budgets and what it cost,
    # the day's spend, and the new final state 'budget_exceeded' and approval kind 'budget'
    # (with #30's 'stuck' state and kind, so one rebuild serves both). SQLite cannot change a
    # CHECK, so both tables are rebuilt as in 4, keeping every id and both id sequences.
    # ``max_cost`` and ``cost`` hold exact decimals (cud.budget): ``max_cost`` a decimal string,
    # ``cost`` JSON (cud.protocol.CostView); ``held``: why a queued task waits (the day's cap).
    # ``spend``: the day's spend (UTC day, currency), a decimal string summed in Python.
    """
    CREATE TABLE tasks_v9 (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'awaiting_approval', 'paused',
                                                         'succeeded', 'failed', 'cancelled', 'interrupted',
                                                         'budget_exceeded', 'stuck')),
        prompt            TEXT NOT NULL,
        model             TEXT NOT NULL,
        max_steps         INTEGER NOT NULL,
        approval          TEXT NOT NULL CHECK (approval IN ('safety', 'actions')),
        submitter_uid     INTEGER NOT NULL,
        submitter_name    TEXT NOT NULL,
        steps             INTEGER NOT NULL DEFAULT 0,
        final_message     TEXT,
        error             TEXT,
        reason            TEXT,
        created_at        TEXT NOT NULL,
        started_at        TEXT,
        finished_at       TEXT,
        max_duration      INTEGER,
        seat              TEXT,
        pinned            INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        usage             TEXT,
        rules             TEXT,
        spec              TEXT,
        needs_session     INTEGER NOT NULL DEFAULT 0 CHECK (needs_session IN (0, 1)),
        verdict           TEXT,
        artifacts         TEXT,
        max_cost          TEXT,
        max_input_tokens  INTEGER,
        max_output_tokens INTEGER,
        cost              TEXT,
        held              TEXT,
        idempotency_key   TEXT
    );
    INSERT INTO tasks_v9 (id, state, prompt, model, max_steps, approval, submitter_uid, submitter_name, steps,
                          final_message, error, reason, created_at, started_at, finished_at, max_duration, seat,
                          pinned, usage, rules, spec, needs_session, verdict, artifacts, idempotency_key)
        SELECT id, state, prompt, model, max_steps, approval, submitter_uid, submitter_name, steps, final_message,
               error, reason, created_at, started_at, finished_at, max_duration, seat, pinned, usage, rules, spec,
               needs_session, verdict, artifacts, idempotency_key FROM tasks;
    INSERT INTO sqlite_sequence (name, seq)
        SELECT 'tasks_v9', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'tasks_v9');
    UPDATE sqlite_sequence
        SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'tasks'), 0))
        WHERE name = 'tasks_v9';
    DROP TABLE tasks;
    ALTER TABLE tasks_v9 RENAME TO tasks;
    CREATE INDEX tasks_by_state ON tasks (state, id);
    CREATE UNIQUE INDEX tasks_by_key ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE TABLE approvals_v9 (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id         INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        kind            TEXT NOT NULL CHECK (kind IN ('safety', 'action', 'budget', 'stuck')),
        state           TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'timed_out',
                                                       'cancelled', 'interrupted')),
        checks          TEXT NOT NULL,
        actions         TEXT NOT NULL,
        step            INTEGER NOT NULL,
        screenshot      TEXT,
        created_at      TEXT NOT NULL,
        deadline_at     TEXT,
        decided_at      TEXT,
        decided_by_uid  INTEGER,
        decided_by_name TEXT,
        reason          TEXT,
        targets         TEXT NOT NULL DEFAULT '[]'
    );
    INSERT INTO approvals_v9 (id, task_id, kind, state, checks, actions, step, screenshot, created_at, deadline_at,
                              decided_at, decided_by_uid, decided_by_name, reason, targets)
        SELECT id, task_id, kind, state, checks, actions, step, screenshot, created_at, deadline_at, decided_at,
               decided_by_uid, decided_by_name, reason, targets FROM approvals;
    INSERT INTO sqlite_sequence (name, seq)
        SELECT 'approvals_v9', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'approvals_v9');
    UPDATE sqlite_sequence
        SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'approvals'), 0))
        WHERE name = 'approvals_v9';
    DROP TABLE approvals;
    ALTER TABLE approvals_v9 RENAME TO approvals;
    CREATE INDEX approvals_by_state ON approvals (state, id);
    CREATE TABLE spend (
        day      TEXT NOT NULL,
        currency TEXT NOT NULL,
        amount   TEXT NOT NULL,
        PRIMARY KEY (day, currency)
    ) WITHOUT ROWID
    """,
    # 10 (#30, the stuck guard, docs/stuck.md): the task's repeat_limit, cycle_limit and on_stuck
    # (JSON, cud.protocol.GuardView; NULL for tasks from before: the daemon's [guard]). Its
    # state and approval kind 'stuck' came with 9's rebuild.
    """
    ALTER TABLE tasks ADD COLUMN guard TEXT
    """,
    # 11 (#29, the seat a task needs, cud.seat_needs): its screen size ("WxH") and the tags its seat must
    # carry (a JSON list); NULL for tasks from before, and for tasks that do not care.
    """
    ALTER TABLE tasks ADD COLUMN screen TEXT;
    ALTER TABLE tasks ADD COLUMN seat_tags TEXT
    """,
    # 12 (#41, item 8) the price a task was accepted with (JSON, cud.protocol.PriceView; daemon/budget/accepted.py):
    # its cost is counted by it whatever the config says later. NULL for tasks from before (and models
    # without a price): those are counted by the config's price, or refused at start if a line needs one.
    """
    ALTER TABLE tasks ADD COLUMN price TEXT
    """,
    # 13 (#41, keys per submitter, docs/protocol.md): an idempotency key names a task only for the uid that
    # submitted it, so one user's key can never hand over another user's task; another uid's same key is
    # its own. Keys recorded before were unique across all uids, so they are unique per uid as well.
    """
    DROP INDEX tasks_by_key;
    CREATE UNIQUE INDEX tasks_by_key ON tasks (submitter_uid, idempotency_key) WHERE idempotency_key IS NOT NULL
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def split_sql(script: str) -> list[str]:
    # Our migrations hold no semicolons inside literals or triggers, so a plain split is exact.
    return [part.strip() for part in script.split(";") if part.strip()]


def task_view(row: sqlite3.Row) -> TaskView:
    return {
        "id": row["id"],
        "state": row["state"],
        "prompt": row["prompt"],
        "model": row["model"],
        "max_steps": row["max_steps"],
        "max_duration": row["max_duration"],
        "approval": row["approval"],
        "seat": row["seat"],
        "pinned": bool(row["pinned"]),
        "screen": row["screen"],
        "seat_tags": [] if row["seat_tags"] is None else json.loads(row["seat_tags"]),
        "steps": row["steps"],
        "final_message": row["final_message"],
        "error": None if row["error"] is None else json.loads(row["error"]),
        "reason": row["reason"],
        "submitter": {"uid": row["submitter_uid"], "name": row["submitter_name"]},
        "created_at": row["created_at"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "max_cost": row["max_cost"],
        "max_input_tokens": row["max_input_tokens"],
        "max_output_tokens": row["max_output_tokens"],
        "usage": None if row["usage"] is None else json.loads(row["usage"]),
        "cost": None if row["cost"] is None else json.loads(row["cost"]),
        "price": None if row["price"] is None else json.loads(row["price"]),
        "held": row["held"],
        "rules": [] if row["rules"] is None else json.loads(row["rules"]),
        "guard": None if row["guard"] is None else json.loads(row["guard"]),
        "spec": None if row["spec"] is None else json.loads(row["spec"]),
        "verdict": None if row["verdict"] is None else json.loads(row["verdict"]),
        "artifacts": [] if row["artifacts"] is None else json.loads(row["artifacts"]),
        "key": row["idempotency_key"],
    }


def approval_view(row: sqlite3.Row) -> ApprovalView:
    decided_by: Person | None = (
        None if row["decided_by_uid"] is None else {"uid": row["decided_by_uid"], "name": row["decided_by_name"]}
    )
    return {
        "id": row["id"],
        "task_id": row["task_id"],
        "seat": row["seat"],
        "kind": row["kind"],
        "state": row["state"],
        "checks": json.loads(row["checks"]),
        "actions": json.loads(row["actions"]),
        "targets": json.loads(row["targets"]),
        "step": row["step"],
        "screenshot": row["screenshot"],
        "created_at": row["created_at"],
        "deadline_at": row["deadline_at"],
        "decided_at": row["decided_at"],
        "decided_by": decided_by,
        "reason": row["reason"],
    }
