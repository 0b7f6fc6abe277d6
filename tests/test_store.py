"""The SQLite store: transitions, recovery, approvals racing, retention, and upgrades of old files."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from cud.daemon.store.database import SCHEMA_VERSION, Store
from cud.errors import ConfigError, NotFound

DATA = Path(__file__).parent / "data"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "cud.sqlite3")
    yield s
    s.close()


def test_a_task_through_its_life_with_events_in_order(store: Store) -> None:
    seen = []
    store.subscribe(seen.append)
    task = store.submit("p", "m", 5, "safety", 0, "root")
    assert task["state"] == "queued" and task["submitter"] == {"uid": 0, "name": "root"}
    assert store.next_queued()["id"] == task["id"]
    store.start(task["id"], "default")
    store.add_event(task["id"], "step", {"step": 1}, steps=1)
    store.finish(task["id"], "succeeded", final_message="done ✓")
    final = store.task(task["id"])
    assert final["state"] == "succeeded" and final["steps"] == 1 and final["final_message"] == "done ✓"
    assert final["started_at"] and final["finished_at"]
    kinds = [e["kind"] for e in store.events(task["id"])]
    assert kinds == ["queued", "running", "step", "end"]
    assert [e["kind"] for e in seen] == kinds  # published after each commit
    assert [e["seq"] for e in store.events(task["id"], after=2)] == [3, 4]
    assert store.next_queued() is None


def test_fifo_and_not_found(store: Store) -> None:
    ids = [store.submit(f"p{i}", "m", 5, "safety", 0, "root")["id"] for i in range(3)]
    assert store.next_queued()["id"] == ids[0]
    store.cancel(ids[0], 0, "root")
    assert store.next_queued()["id"] == ids[1]
    assert store.task(ids[0])["state"] == "cancelled"
    with pytest.raises(NotFound, match="no task with id 999"):
        store.task(999)
    with pytest.raises(NotFound, match="no approval with id 5"):
        store.approval(5)


def test_requeue_puts_a_task_back_before_it_began(store: Store) -> None:
    pinned = store.submit("p", "m", 5, "safety", 0, "root", seat="s1")
    anywhere = store.submit("q", "m", 5, "safety", 0, "root")
    for task in (pinned, anywhere):
        store.start(task["id"], "s1")
        assert store.requeue(task["id"], "s1", "the reset of seat 's1' failed: stuck")
    again = store.task(pinned["id"])
    assert (again["state"], again["seat"], again["started_at"]) == ("queued", "s1", None)  # waits for its seat
    assert store.next_queued("s2")["id"] == anywhere["id"]  # the other goes to any free seat
    assert store.task(anywhere["id"])["seat"] is None
    assert store.events(pinned["id"])[-1]["data"] == {"seat": "s1", "reason": "the reset of seat 's1' failed: stuck"}
    store.cancel(anywhere["id"], 0, "root")
    assert not store.requeue(anywhere["id"], "s1", "late")  # no longer running: nothing to put back


def test_a_failed_transaction_leaves_nothing_and_publishes_nothing(store: Store) -> None:
    task = store.submit("p", "m", 5, "safety", 0, "root")
    seen = []
    store.subscribe(seen.append)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"), store._tx() as db:
        store._event(db, task["id"], "diagnostic", {"half": "done"})
        db.execute("UPDATE tasks SET state = 'bogus' WHERE id = ?", (task["id"],))
    assert [e["kind"] for e in store.events(task["id"])] == ["queued"]
    assert seen == [] and store.task(task["id"])["state"] == "queued"


def test_an_event_of_an_unknown_kind_is_refused_and_nothing_is_written(store: Store) -> None:
    # EVENT_KINDS is what the record's readers and docs/report.md know (tests/test_docs_complete.py).
    task = store.submit("p", "m", 5, "safety", 0, "root")
    with pytest.raises(ValueError, match="unknown event kind 'stepped'"):
        store.add_event(task["id"], "stepped", {"step": 1}, steps=1)
    assert [e["kind"] for e in store.events(task["id"])] == ["queued"]
    assert store.task(task["id"])["steps"] == 0


def test_approval_decided_once_and_race_loses(store: Store) -> None:
    task = store.submit("p", "m", 5, "safety", 0, "root")
    store.start(task["id"], "default")
    approval = store.create_approval(task["id"], "safety", [{"id": "c", "code": "x", "message": "m"}],
                                     [{"type": "click", "x": 1, "y": 2}], 1, "step-0001.png", 60)
    assert store.task(task["id"])["state"] == "awaiting_approval"
    assert [a["id"] for a in store.pending_approvals()] == [approval["id"]]
    assert store.decide_approval(approval["id"], "approved", 1000, "alice", None) is True
    assert store.decide_approval(approval["id"], "timed_out", None, None, "late") is False
    decided = store.approval(approval["id"])
    assert decided["state"] == "approved" and decided["decided_by"] == {"uid": 1000, "name": "alice"}
    assert store.task(task["id"])["state"] == "running"
    audit = [(r["request"], r["outcome"]) for r in store.audit_rows()]
    assert audit == [("submit", "ok"), ("approved", "ok")]


def test_recover_interrupts_running_and_keeps_queued(store: Store) -> None:
    a = store.submit("a", "m", 5, "safety", 0, "root")
    b = store.submit("b", "m", 5, "safety", 0, "root")
    store.start(a["id"], "default")
    store.create_approval(a["id"], "action", [], [], 1, None, 60)
    assert store.recover() == [a["id"]]
    assert store.task(a["id"])["state"] == "interrupted"
    assert "daemon stopped" in store.task(a["id"])["reason"]
    assert store.pending_approvals() == []
    assert store.next_queued()["id"] == b["id"]


def test_prune_keeps_newest_and_unfinished(store: Store) -> None:
    ids = []
    for i in range(4):
        t = store.submit(f"p{i}", "m", 5, "safety", 0, "root")
        store.start(t["id"], "default")
        store.finish(t["id"], "failed", error={"kind": "x", "message": "m", "details": {}})
        ids.append(t["id"])
    live = store.submit("live", "m", 5, "safety", 0, "root")
    assert sorted(store.prune(max_tasks=2, max_age_days=30)) == ids[:2]
    assert [t["id"] for t in store.tasks()] == [*ids[2:], live["id"]]
    assert store.events(ids[0]) == []  # cascaded
    assert sorted(store.prune(max_tasks=100, max_age_days=1e-9)) == ids[2:]


def test_database_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    import os

    old = os.umask(0o077)
    try:
        s = Store(tmp_path / "db.sqlite3")
    finally:
        os.umask(old)
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (tmp_path / "db.sqlite3").stat().st_mode & 0o077 == 0
    s.close()


def test_a_v1_database_upgrades_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v1.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        done, running, queued = store.tasks()
        assert done["state"] == "succeeded" and done["prompt"] == "type „Grüße“ into the editor"
        assert done["final_message"] == "typed it" and done["steps"] == 1
        assert done["max_duration"] is None  # v2: tasks from before run under the daemon's limit
        assert done["seat"] == "default" and queued["seat"] is None  # v3: it ran on the one display there was
        assert running["state"] == "awaiting_approval" and running["submitter"]["name"] == "alice"
        assert store.pending_approvals()[0]["actions"] == [{"type": "click", "x": 1, "y": 2, "button": "left"}]
        assert store.recover() == [running["id"]]
        assert store.next_queued()["id"] == queued["id"]
        assert store.submit("new", "m", 1, "safety", 0, "root")["id"] > queued["id"]
        assert store.submit("limited", "m", 1, "safety", 0, "root", max_duration=60)["max_duration"] == 60
    finally:
        store.close()


def test_a_v2_database_upgrades_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v2.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        done, running, queued = store.tasks()
        assert (done["state"], done["max_duration"], done["steps"]) == ("succeeded", 120, 1)
        assert done["seat"] == "default" and not done["pinned"]
        assert running["seat"] == "default" and running["state"] == "awaiting_approval"
        assert queued["seat"] is None and not queued["pinned"] and queued["max_duration"] == 60
        assert [e["kind"] for e in store.events(done["id"])] == ["queued", "running", "step", "end"]
        assert store.recover() == [running["id"]]
        # The queued task from before seats is unpinned: any seat takes it, first.
        pinned = store.submit("pinned", "m", 1, "safety", 0, "root", seat="b")
        assert pinned["seat"] == "b" and pinned["pinned"]
        assert store.next_queued("a")["id"] == queued["id"] and store.next_queued("b")["id"] == queued["id"]
        store.start(queued["id"], "a")
        assert store.task(queued["id"])["seat"] == "a" and store.next_queued("a") is None
        assert store.next_queued("b")["id"] == pinned["id"]
    finally:
        store.close()


def test_an_upgrade_never_gives_out_an_id_again(tmp_path: Path) -> None:
    # The newest task of the old file was pruned: its id must stay used after the table rebuild.
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v2.sqlite3", path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("DELETE FROM tasks WHERE id = 3")
    db.commit()
    db.close()
    store = Store(path)
    try:
        assert [t["id"] for t in store.tasks()] == [1, 2]
        assert len(store.events(1)) == 4 and store.pending_approvals()[0]["task_id"] == 2
        assert store.submit("new", "m", 1, "safety", 0, "root")["id"] == 4
        assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        store.close()


def test_a_paused_task_is_interrupted_by_a_restart_with_who_paused_it_kept(store: Store) -> None:
    task = store.submit("p", "m", 5, "safety", 0, "root")
    store.start(task["id"], "default")
    store.control(task["id"], "pause_requested", 1000, "alice", audit="pause")
    store.control(task["id"], "paused", 1000, "alice", state="paused")
    assert store.task(task["id"])["state"] == "paused"
    assert store.recover() == [task["id"]] and store.task(task["id"])["state"] == "interrupted"
    kinds = [(e["kind"], e["data"].get("by")) for e in store.events(task["id"])]
    assert kinds[2:4] == [("pause_requested", {"uid": 1000, "name": "alice"}), ("paused", {"uid": 1000, "name": "alice"})]
    assert [(r["request"], r["name"]) for r in store.audit_rows()][-1] == ("pause", "alice")


def test_each_seat_takes_the_oldest_task_pinned_to_it_or_to_none(store: Store) -> None:
    first = store.submit("any", "m", 1, "safety", 0, "root")
    to_b = store.submit("b only", "m", 1, "safety", 0, "root", seat="b")
    to_c = store.submit("c only", "m", 1, "safety", 0, "root", seat="c")
    last = store.submit("any, later", "m", 1, "safety", 0, "root")
    assert store.next_queued("c")["id"] == first["id"]
    store.start(first["id"], "c")
    assert store.next_queued("c")["id"] == to_c["id"]
    assert store.next_queued("a")["id"] == last["id"]  # b's task never holds a back
    assert store.next_queued("b")["id"] == to_b["id"]
    store.start(to_b["id"], "b")
    running = [e for e in store.events(to_b["id"]) if e["kind"] == "running"]
    assert running[0]["data"] == {"seat": "b"} and store.task(to_b["id"])["seat"] == "b"


def test_a_database_from_the_future_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(ConfigError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        Store(path)


def test_a_v6_database_upgrades_to_specs_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v6.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 6
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        done, running, queued = store.tasks()
        assert done["rules"] == [{"action": "type", "app": "xterm", "decision": "ask"}]
        assert done["usage"]["requests"] == 1 and done["error"]["kind"] == "api"
        # 7: tasks from before have no spec, verdict or artifacts, and any seat may take them.
        assert (done["spec"], done["verdict"], done["artifacts"]) == (None, None, [])
        assert store.pending_approvals()[0]["targets"] == [None]
        assert store.recover() == [running["id"]]
        assert store.next_queued("a", session=False)["id"] == queued["id"]
        assert store.task_files(queued["id"]) == {}
    finally:
        store.close()


def test_a_v7_database_upgrades_to_the_stuck_guard_and_keeps_every_row_and_id(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v7.sqlite3", path)
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        judged, running, queued = store.tasks()
        assert [t["id"] for t in (judged, running, queued)] == [1, 2, 3]
        assert judged["verdict"]["verdict"] == "passed" and store.task_files(1) == {"n.txt": b"hi", "want.txt": b"hi"}
        assert [t["guard"] for t in (judged, running, queued)] == [None] * 3  # the daemon's [guard] applies
        (approval,) = store.pending_approvals()
        assert approval["task_id"] == running["id"] and approval["targets"] == [None]
        # Both tables were rebuilt for the state and kind 'stuck': their ids go on where they were.
        stuck = store.submit("new", "m", 1, "safety", 0, "root", key="k-1",
                             guard={"repeat_limit": 3, "cycle_limit": 2, "on_stuck": "ask"})
        assert stuck["id"] == 4 and stuck["guard"] == {"repeat_limit": 3, "cycle_limit": 2, "on_stuck": "ask"}
        store.start(stuck["id"], "default")
        asked = store.create_approval(stuck["id"], "stuck", [], [{"type": "wait"}], 1, None, 60)
        assert asked["id"] == approval["id"] + 1 and asked["kind"] == "stuck"
        store.finish(stuck["id"], "stuck", error={"kind": "stuck", "message": "m", "details": {}})
        assert store.task(stuck["id"])["state"] == "stuck"
        assert store.submit_once("again", "m", 1, "safety", 0, "root", key="k-1") == (store.task(4), True)
        with pytest.raises(sqlite3.IntegrityError):  # the idempotency key's unique index survived the rebuild
            _insert_keyed(store, 0, "k-1")
        assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        store.close()


def test_a_spec_task_keeps_its_spec_and_files_and_ends_with_its_verdict(store: Store) -> None:
    from cud.spec import parse_spec

    spec = parse_spec({"prompt": "p", "setup": [{"files": [{"src": "n.txt", "dest": "n.txt"}]}],
                       "checks": [{"file": "n.txt", "equals": "want.txt"}]})
    plain = store.submit("no spec", "m", 1, "safety", 0, "root")
    task = store.submit("p", "m", 1, "safety", 0, "root", spec=spec, files={"n.txt": b"\x00hi", "want.txt": b"x"})
    assert task["spec"] == spec.judging() and plain["spec"] is None
    assert store.task_files(task["id"]) == {"n.txt": b"\x00hi", "want.txt": b"x"}
    # A seat without a session passes it by (and takes what it can run); one with a session takes it in turn.
    store.start(plain["id"], "x")
    assert store.next_queued("x", session=False) is None
    assert store.next_queued("y", session=True)["id"] == task["id"]
    store.start(task["id"], "y")
    verdict = {"verdict": "failed", "score": 0.0, "passed": 0, "failed": 1, "state": "succeeded", "checks": [],
               "at": "2026-01-01T00:00:00.000Z"}
    artifacts = [{"path": "n.txt", "bytes": 3, "sha256": "ab" * 32, "error": None}]
    store.finish(task["id"], "succeeded", final_message="ok", verdict=verdict, artifacts=artifacts)
    ended = store.task(task["id"])
    assert ended["verdict"] == verdict and ended["artifacts"] == artifacts
    assert store.events(task["id"])[-1]["data"]["verdict"] == "failed"
    assert store.events(task["id"])[-1]["data"]["score"] == 0.0
    store._db.execute("DELETE FROM tasks WHERE id = ?", (task["id"],))  # pruning takes its files too
    assert store.task_files(task["id"]) == {}


def test_a_v7_database_upgrades_to_idempotency_keys_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v7.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 7
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        judged, running, queued = store.tasks()
        assert judged["verdict"]["verdict"] == "passed" and judged["artifacts"][0]["path"] == "n.txt"
        assert store.task_files(judged["id"]) == {"n.txt": b"hi", "want.txt": b"hi"}
        # 8: tasks from before have no key, and many tasks may have none.
        assert [t["key"] for t in (judged, running, queued)] == [None, None, None]
        assert store.pending_approvals()[0]["task_id"] == running["id"]
        keyed = store.submit("new", "m", 1, "safety", 0, "root", key="run-1/spec#1")
        assert keyed["id"] == 4 and store.task_by_key(0, "run-1/spec#1") == keyed
        assert store.submit("no key", "m", 1, "safety", 0, "root")["key"] is None
        assert store.submit_once("again", "m", 1, "safety", 0, "root", key="run-1/spec#1") == (keyed, True)
        assert len(store.tasks()) == 5 and store.tasks(uid=0, key_prefix="run-1/") == [keyed]
        assert store.recover() == [running["id"]]
    finally:
        store.close()


def test_a_v6_database_takes_budgets_and_their_states_after_the_upgrade(tmp_path: Path) -> None:
    """Migration 9 (#30) rebuilds tasks and approvals for the new state and kind: every row, id and
    id sequence survives, and the new columns, state, kind and the day's spend work."""
    from decimal import Decimal

    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v6.sqlite3", path)
    store = Store(path)
    try:
        old = store.tasks()
        assert [(t["max_cost"], t["cost"], t["held"]) for t in old] == [(None, None, None)] * len(old)
        before = store.pending_approvals()[0]
        task = store.submit("p", "m", 1, "safety", 0, "root",
                            budgets={"max_cost": Decimal("0.50"), "max_output_tokens": 10})
        assert task["id"] > max(t["id"] for t in old) and (task["max_cost"], task["max_output_tokens"]) == ("0.5", 10)
        approval = store.create_approval(task["id"], "budget", [{"id": "b", "code": "max_cost", "message": "m"}], [],
                                         1, None, 60, [])
        assert approval["id"] > before["id"] and approval["kind"] == "budget"
        view = {"amount": "0.1", "currency": "USD", "unknown": None}
        for _ in range(10):  # ten tenths are one, exactly
            store.add_cost(task["id"], view, "2026-12-02", Decimal("0.1"))
        assert store.day_spend("2026-12-02", "USD") == Decimal(1) and store.day_spend("2026-12-03", "USD") == 0
        store.finish(task["id"], "budget_exceeded", error={"kind": "budget_exceeded", "message": "m", "details": {}})
        assert store.task(task["id"])["state"] == "budget_exceeded" and store.task(task["id"])["cost"] == view
        assert store.approval(approval["id"])["state"] == "cancelled"
        assert store.cost_by_model() == {("m", "USD"): Decimal("0.1")}
    finally:
        store.close()


def test_a_v11_database_upgrades_to_kept_prices_and_keeps_every_row(tmp_path: Path) -> None:
    """The migration that keeps a task's price (#41, item 8): every row, id, cost and budget survives, tasks
    from before have no price (the daemon refuses such a task at start if a money line has nothing to count
    by), and a new task keeps the price it is given."""
    from decimal import Decimal

    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v11-budgets.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 11
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        spent, queued = store.tasks()
        assert (spent["state"], spent["max_cost"], spent["cost"]) == (
            "succeeded", "2", {"amount": "1.5", "currency": "USD", "unknown": None})
        assert (queued["id"], queued["state"], queued["key"], queued["max_cost"], queued["max_output_tokens"]) == (
            2, "queued", "old-1", "2", 1000)
        assert [t["price"] for t in (spent, queued)] == [None, None]
        assert store.day_spend("2026-12-01", "USD") == Decimal("1.5")
        price = {"currency": "EUR", "input": "2.5", "cached_input": "0.25", "output": "15"}
        task = store.submit("p", "gpt-5.4", 1, "safety", 0, "root",
                            budgets={"max_cost": Decimal("1"), "price": price})
        assert task["id"] == 3 and task["price"] == price and store.task(task["id"])["price"] == price
        assert store.submit("p", "m", 1, "safety", 0, "root")["price"] is None
    finally:
        store.close()


def _insert_keyed(store: Store, uid: int, key: str) -> None:
    """A task row with ``key`` of ``uid`` written straight in, past the store's own lookup: the index's test."""
    store._db.execute("INSERT INTO tasks (state, prompt, model, max_steps, approval, submitter_uid, submitter_name,"
                      " created_at, idempotency_key) VALUES ('queued', 'p', 'm', 1, 'safety', ?, 'u', 'now', ?)",
                      (uid, key))


def test_a_v11_database_upgrades_to_keys_per_submitter_and_keeps_every_row(tmp_path: Path) -> None:
    """Keys recorded before (unique across uids) stay each their submitter's; the same key from another
    uid is then that uid's own, a new task, and never hands over the first (#41)."""
    path = tmp_path / "old.sqlite3"
    shutil.copy(DATA / "cud-v11.sqlite3", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 11
    store = Store(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        done, alices, running, unkeyed = store.tasks()
        assert [(t["id"], t["submitter"]["uid"], t["key"]) for t in store.tasks()] == [
            (1, 0, "eval:run-1/0/0/a1"), (2, 1000, "alice/1"), (3, 0, "eval:run-1/1/0/a1"), (4, 1000, None)]
        assert store.pending_approvals()[0]["task_id"] == running["id"]
        assert store.task_by_key(0, "eval:run-1/1/0/a1") == running and store.task_by_key(1000, "eval:run-1/1/0/a1") is None
        # Alice claims the root's next key, and the root its own: two tasks, each its submitter's.
        claimed, existing = store.submit_once("claim", "m", 1, "safety", 1000, "alice", key="eval:run-1/2/0/a1")
        assert (claimed["id"], existing) == (5, False)
        own, existing = store.submit_once("the root's third", "m", 1, "safety", 0, "root", key="eval:run-1/2/0/a1")
        assert (own["id"], own["submitter"]["uid"], existing) == (6, 0, False)
        assert store.submit_once("again", "m", 1, "safety", 0, "root", key="eval:run-1/2/0/a1") == (own, True)
        assert store.submit_once("alice/1", "m", 1, "safety", 0, "root", key="alice/1")[0]["id"] == 7
        assert [t["id"] for t in store.tasks(uid=0, key_prefix="eval:run-1/")] == [1, 3, 6]
        assert [t["id"] for t in store.tasks(uid=1000, key_prefix="eval:")] == [5]
        assert len(store.tasks(uid=1000)) == 7  # without a key's filter, every task
        with pytest.raises(sqlite3.IntegrityError):  # per submitter, still unique: the index stands behind the lookup
            _insert_keyed(store, 1000, "alice/1")
        assert store.recover() == [running["id"]] and done["state"] == "succeeded" and unkeyed["key"] is None
        assert alices["state"] == "queued"
    finally:
        store.close()


def test_the_row_groups_extend_the_connection_and_declare_none_of_it_again() -> None:
    """Store's groups of rows (counts, spend) get the connection, transactions and events from the one class
    that owns them: none re-declares those members (``if TYPE_CHECKING:`` stubs drift from the real ones)."""
    import ast

    from cud.daemon.store.connection import StoreConnection
    from cud.daemon.store.counts import CountRows
    from cud.daemon.store.spend import SpendRows

    assert all(issubclass(rows, StoreConnection) for rows in (Store, CountRows, SpendRows))
    for path in sorted((Path(__file__).parent.parent / "daemon" / "store").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                stubs = [s for s in node.body if isinstance(s, ast.If) and "TYPE_CHECKING" in ast.unparse(s.test)]
                assert not stubs, f"{path.name}: {node.name} declares members under TYPE_CHECKING"
