"""How tests/data/cud-v6.sqlite3 was made (schema version 6, cud before task specs). Kept for the record; do not
regenerate.

Made with the store of commit f25e1c4, the last before schema 7 (specs, verdicts, artifacts).
A later schema must keep upgrading this file: tests/test_store.py opens a copy.
"""

from pathlib import Path

from cud.daemon.store.database import Store

path = Path(__file__).with_name("cud-v6.sqlite3")
assert not path.exists(), "the v6 file is history: never overwrite it"
store = Store(path)
assert store._db.execute("PRAGMA user_version").fetchone()[0] == 6, "run with the store of commit f25e1c4"
rules = [{"action": "type", "app": "xterm", "decision": "ask"}]
done = store.submit("type „Grüße“ into the editor", "gpt-5.4", 10, "safety", 0, "root", max_duration=120,
                    rules=rules)
store.start(done["id"], "default")
store.add_event(done["id"], "step", {"step": 1, "total_ms": 12.5}, steps=1,
                usage={"requests": 1, "request_bytes": 10, "images": 1, "image_bytes": 5, "input_tokens": 3,
                       "cached_tokens": 0, "output_tokens": 2})
store.finish(done["id"], "failed", error={"kind": "api", "message": "boom", "details": {}})
running = store.submit("click the button", "gpt-5.4", 5, "actions", 1000, "alice", seat="b")
store.start(running["id"], "b")
store.create_approval(running["id"], "action", [], [{"type": "click", "x": 1, "y": 2, "button": "left"}], 1,
                      "step-0001.png", 600, [None])
store.submit("still queued", "gpt-5.4", 5, "safety", 0, "root", max_duration=60)
store.close()
