"""How tests/data/cud-v7.sqlite3 was made (schema version 7, cud before idempotency keys). Kept for the record;
do not regenerate.

Made with the store of commit 7ca4af2, the last before schema 8 (``tasks.idempotency_key``), run from an
archive of that commit (``git archive 7ca4af2``, with daemon/ and drivers/ placed under cud/ as the install
maps them, on PYTHONPATH). A later schema must keep upgrading this file: tests/test_store.py opens a copy.
"""

from pathlib import Path

from cud.daemon.store.database import Store
from cud.spec import parse_spec

path = Path(__file__).with_name("cud-v7.sqlite3")
assert not path.exists(), "the v7 file is history: never overwrite it"
store = Store(path)
assert store._db.execute("PRAGMA user_version").fetchone()[0] == 7, "run with the store of commit 7ca4af2"
spec = parse_spec({"prompt": "write notes.txt", "setup": [{"files": [{"src": "n.txt", "dest": "n.txt"}]}],
                   "checks": [{"file": "n.txt", "equals": "want.txt"}], "collect": {"files": ["n.txt"]}})
judged = store.submit("write notes.txt", "gpt-5.4", 10, "safety", 0, "root", spec=spec,
                      files={"n.txt": b"hi", "want.txt": b"hi"})
store.start(judged["id"], "default")
verdict = {"verdict": "passed", "score": 1.0, "passed": 1, "failed": 0, "state": "succeeded", "checks": [],
           "at": "2026-12-01T00:00:00.000Z"}
store.finish(judged["id"], "succeeded", final_message="done", verdict=verdict,
             artifacts=[{"path": "n.txt", "bytes": 2, "sha256": "ab" * 32, "error": None}])
running = store.submit("click the button", "gpt-5.4", 5, "actions", 1000, "alice", seat="b")
store.start(running["id"], "b")
store.create_approval(running["id"], "action", [], [{"type": "click", "x": 1, "y": 2, "button": "left"}], 1,
                      "step-0001.png", 600, [None])
store.submit("still queued", "gpt-5.4", 5, "safety", 0, "root", max_duration=60)
store.close()
