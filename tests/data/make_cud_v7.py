"""How tests/data/cud-v7.sqlite3 was made (schema version 7, cud before the stuck guard). Kept for the record;
do not regenerate.

Made with the first 7 migrations of cud.daemon.store.schema (those of commit 7ca4af2, the last before
schema 10: the state and approval kind 'stuck', and tasks.guard), and rows written as SQL: a finished
task, one awaiting a pending approval (with its targets and rules), a queued one, and a pruned task 4
whose id, like approval ids up to 7, must never be given out again. A later schema must keep upgrading
this file: tests/test_store.py opens a copy.
"""

import json
import sqlite3
from pathlib import Path

from cud.daemon.store.schema import MIGRATIONS, split_sql

path = Path(__file__).with_name("cud-v7.sqlite3")
assert not path.exists(), "the v7 file is history: never overwrite it"
db = sqlite3.connect(path)
for migration in MIGRATIONS[:7]:
    for statement in split_sql(migration):
        db.execute(statement)
db.execute("PRAGMA user_version = 7")
now = "2026-11-30T10:00:00.000Z"
insert = ("INSERT INTO tasks (id, state, prompt, model, max_steps, approval, submitter_uid, submitter_name,"
          " created_at, started_at, finished_at, steps, final_message, rules, spec, verdict, artifacts, seat, pinned,"
          " max_duration) VALUES (?, ?, ?, 'm', 10, 'safety', 1000, 'alice', ?, ?, ?, ?, ?, ?, ?, ?, ?, 'default', 0, 60)")
db.execute(insert, (1, "succeeded", "done one", now, now, now, 2, "ok", None, None, None, None))
db.execute(insert, (2, "awaiting_approval", "waits", now, now, None, 1, None,
                    json.dumps([{"action": "click", "decision": "ask"}]), None, None, None))
db.execute(insert, (3, "queued", "later", now, None, None, 0, None, None, None, None, None))
db.execute(insert, (4, "failed", "pruned soon", now, now, now, 1, None, None, None, None, None))
db.execute("DELETE FROM tasks WHERE id = 4")
db.execute("INSERT INTO events (task_id, seq, at, kind, data) VALUES (1, 1, ?, 'queued', '{}')", (now,))
db.execute("INSERT INTO events (task_id, seq, at, kind, data) VALUES (1, 2, ?, 'end', '{}')", (now,))
db.execute("INSERT INTO approvals (id, task_id, kind, state, checks, actions, step, screenshot, created_at, targets)"
           " VALUES (5, 2, 'action', 'pending', '[]', '[{\"type\": \"click\", \"x\": 1, \"y\": 2}]', 1,"
           " 'step-0001.png', ?, '[null]')", (now,))
db.execute("UPDATE sqlite_sequence SET seq = 7 WHERE name = 'approvals'")
db.commit()
db.execute("VACUUM")
db.close()
