"""How tests/data/cud-v1.sqlite3 was made (schema version 1). Kept for the record; do not regenerate.

A later schema must keep upgrading this file: tests/test_store.py opens a copy.
Run from the repository root: ``.venv/bin/python tests/data/make_cud_v1.py``.
"""

from pathlib import Path

from cud.daemon.store.database import Store

path = Path(__file__).with_name("cud-v1.sqlite3")
assert not path.exists(), "the v1 file is history: never overwrite it"
store = Store(path)
done = store.submit("type „Grüße“ into the editor", "gpt-5.4", 10, "safety", 0, "root")
store.start(done["id"])
store.add_event(done["id"], "step", {"step": 1, "total_ms": 12.5}, steps=1)
store.finish(done["id"], "succeeded", final_message="typed it")
running = store.submit("click the button", "gpt-5.4", 5, "actions", 1000, "alice")
store.start(running["id"])
store.create_approval(running["id"], "action", [], [{"type": "click", "x": 1, "y": 2, "button": "left"}], 1,
                      "step-0001.png", 600)
store.submit("still queued", "gpt-5.4", 5, "safety", 0, "root")
store.close()
