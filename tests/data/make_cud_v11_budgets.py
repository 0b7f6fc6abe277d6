"""How tests/data/cud-v11-budgets.sqlite3 was made (schema version 11, cud before a task kept the price it was
accepted with; named for its use, so another v11 file may sit beside it). Kept for the record; do not regenerate.

Made with the store of commit e41cf1f, the last before the migration that adds ``tasks.price`` (issue 41,
item 8), run from that commit's worktree. A later schema must keep upgrading this file: tests/test_store.py
opens a copy, and tests/test_budgets_accepted.py starts a daemon on one (its queued task has a max_cost and
no stored price: the daemon must refuse it at start where no price is configured).
"""

from decimal import Decimal
from pathlib import Path

from cud.daemon.store.database import Store

path = Path(__file__).with_name("cud-v11-budgets.sqlite3")
assert not path.exists(), "the v11 file is history: never overwrite it"
store = Store(path)
assert store._db.execute("PRAGMA user_version").fetchone()[0] == 11, "run with the store of commit e41cf1f"
spent = store.submit("look", "gpt-5.4", 10, "safety", 0, "root", budgets={"max_cost": Decimal("2")})
store.start(spent["id"], "default")
store.add_cost(spent["id"], {"amount": "1.5", "currency": "USD", "unknown": None}, "2026-12-01", Decimal("1.5"))
store.finish(spent["id"], "succeeded", final_message="done")
store.submit("queued with a budget", "gpt-5.4", 10, "safety", 0, "root", key="old-1",
             budgets={"max_cost": Decimal("2"), "max_output_tokens": 1000})
store.close()
