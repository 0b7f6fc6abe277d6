"""How tests/data/cud-v11.sqlite3 was made (schema version 11, cud before keys per submitter). Kept for the
record; do not regenerate.

Made with the store of commit e41cf1f, the last before keys were made per submitter (#41: the unique index
on ``tasks (submitter_uid, idempotency_key)`` instead of ``tasks (idempotency_key)``), run from an archive of
that commit (``git archive e41cf1f``, with daemon/ and drivers/ placed under cud/ as the install maps them,
on PYTHONPATH). A later schema must keep upgrading this file: tests/test_store.py opens a copy.

It holds keyed tasks of two users (root, and alice with uid 1000), a task without a key, and a task under
way with a pending approval.
"""

from pathlib import Path

from cud.daemon.store.database import Store

path = Path(__file__).with_name("cud-v11.sqlite3")
assert not path.exists(), "the v11 file is history: never overwrite it"
store = Store(path)
assert store._db.execute("PRAGMA user_version").fetchone()[0] == 11, "run with the store of commit e41cf1f"
done = store.submit("the root's first", "gpt-5.4", 10, "safety", 0, "root", key="eval:run-1/0/0/a1")
store.start(done["id"], "default")
store.finish(done["id"], "succeeded", final_message="done")
store.submit("alice's", "gpt-5.4", 10, "safety", 1000, "alice", key="alice/1")
running = store.submit("the root's second", "gpt-5.4", 5, "actions", 0, "root", key="eval:run-1/1/0/a1", seat="b")
store.start(running["id"], "b")
store.create_approval(running["id"], "action", [], [{"type": "click", "x": 1, "y": 2, "button": "left"}], 1,
                      "step-0001.png", 600, [None])
store.submit("no key", "gpt-5.4", 5, "safety", 1000, "alice")
store.close()
