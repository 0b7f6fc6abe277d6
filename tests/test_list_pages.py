"""``list`` answers one page (issue: fifty seats on one machine): its cost is what it returns.

A database of 100,000 tasks, written with SQL (no daemon could queue that many in a test), answers
``list`` with one page; the page's query reads an index, never the table (its plan, and the
SQLite VM instructions it runs, counted by a progress handler: work, not time); and walking the
pages back with ``before`` meets every task the filters match exactly once, oldest first, for any
page size (Hypothesis).
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.cuctl.client import Client, all_tasks
from cud.daemon.store.database import Store, _page_query
from cud.protocol import (
    LIST_PAGE,
    MAX_LIST_PAGE,
    PROTOCOL_VERSION,
    EncodedItems,
    decode,
    encode,
    encode_json,
    encode_ok,
    ok_reply,
)
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.xserver import start_xvfb

MANY = 100_000
#: Keys of a few suite runs, and tasks without one: the filters' classes.
PREFIXES = ("eval:run-1/", "eval:run-2/", "eval:run-1_")


def insert_tasks(path: Path, count: int, *, uids: tuple[int, ...] = (0,), keyed_every: int = 3,
                 prompt: str = "p") -> None:
    """``count`` ended tasks straight into the database at ``path`` (ended: no seat takes them); every
    ``keyed_every``-th has a key under one of PREFIXES (its number made unique by the row's), the uids take turns."""
    with sqlite3.connect(path) as db:
        start = db.execute("SELECT COALESCE(MAX(id), 0) FROM tasks").fetchone()[0]
        rows = [(uids[i % len(uids)], prompt,
                 f"{PREFIXES[i % len(PREFIXES)]}{start + i}" if i % keyed_every == 0 else None) for i in range(count)]
        db.executemany(
            "INSERT INTO tasks (state, prompt, model, max_steps, approval, submitter_uid, submitter_name, created_at,"
            " idempotency_key) VALUES ('succeeded', ?, 'm', 5, 'safety', ?, 'u', '2026-01-01T00:00:00Z', ?)",
            [(p, uid, key) for uid, p, key in rows])


def vm_steps(store: Store, **query: Any) -> tuple[int, list[int]]:
    """The SQLite VM instructions one ``Store.tasks`` call runs (counted in hundreds), and the ids it returned."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    db: sqlite3.Connection = store._db
    db.set_progress_handler(count, 100)
    try:
        ids = [task["id"] for task in store.tasks(**query)]
    finally:
        db.set_progress_handler(None, 0)
    return steps, ids


def plan(store: Store, **query: Any) -> str:
    sql, args = _page_query(query.get("uid"), query.get("key"), query.get("key_prefix"), query.get("limit"),
                            query.get("before"))
    return " | ".join(row[3] for row in store._db.execute(f"EXPLAIN QUERY PLAN {sql}", args))


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("big") / "cud.sqlite3"
    Store(path).close()
    insert_tasks(path, MANY)
    store = Store(path)
    yield store
    store.close()


def test_a_page_of_a_hundred_thousand_tasks_is_one_page_read_through_an_index(big: Store, tmp_path: Path) -> None:
    page = big.tasks(limit=LIST_PAGE)
    assert [t["id"] for t in page] == list(range(MANY - LIST_PAGE + 1, MANY + 1))  # the newest, oldest first
    assert [t["id"] for t in big.tasks(limit=3, before=11)] == [8, 9, 10]
    # The order comes from the id's b-tree, so LIMIT stops the walk: no sort of the whole table.
    assert "TEMP B-TREE" not in plan(big, limit=LIST_PAGE)
    assert "INTEGER PRIMARY KEY (rowid<?)" in plan(big, limit=LIST_PAGE, before=500)
    assert "USING INDEX tasks_by_key (submitter_uid=? AND idempotency_key=?)" in plan(big, uid=0, key="eval:run-1/0")
    assert "USING INDEX tasks_by_key (submitter_uid=? AND idempotency_key>? AND idempotency_key<?)" in plan(
        big, uid=0, key_prefix="eval:run-2/", limit=10)
    # Work, not time: a page of 100,000 tasks runs about the instructions a page of 300 does.
    small_path = tmp_path / "small.sqlite3"
    Store(small_path).close()
    insert_tasks(small_path, 300)
    small = Store(small_path)
    try:
        for query in ({"limit": LIST_PAGE}, {"limit": 50, "before": 250}, {"uid": 0, "key": "eval:run-1/0"}):
            few, _ = vm_steps(small, **query)
            many, ids = vm_steps(big, **query)
            assert ids and many <= few * 1.5 + 2, (query, few, many)
    finally:
        small.close()


@st.composite
def walks(draw: st.DrawFn) -> tuple[int, int, dict[str, Any]]:
    count = draw(st.integers(0, 80))
    page = draw(st.integers(1, 25))
    which = draw(st.sampled_from(["none", "prefix", "key", "other uid's prefix"]))
    filters: dict[str, Any] = {}
    if which == "prefix":
        filters = {"uid": 0, "key_prefix": draw(st.sampled_from([*PREFIXES, "eval:", "eval:run-1", "nope"]))}
    elif which == "key":
        filters = {"uid": 0, "key": f"{draw(st.sampled_from(PREFIXES))}{draw(st.integers(0, 80))}"}
    elif which == "other uid's prefix":
        filters = {"uid": 1000, "key_prefix": "eval:"}
    return count, page, filters


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(walk=walks())
def test_walking_the_pages_back_meets_every_matching_task_once(tmp_path_factory: pytest.TempPathFactory,
                                                               walk: tuple[int, int, dict[str, Any]]) -> None:
    count, page, filters = walk
    path = tmp_path_factory.mktemp("walk") / "cud.sqlite3"
    Store(path).close()
    insert_tasks(path, count, uids=(0, 0, 1000), keyed_every=2)
    store = Store(path)
    try:
        every = store.tasks(uid=0)
        # What the filters match, worked out here from every task (the store's key semantics: the caller's own).
        wanted = [t["id"] for t in every
                  if ("key" not in filters or (t["key"] == filters["key"] and t["submitter"]["uid"] == filters["uid"]))
                  and ("key_prefix" not in filters or (t["key"] is not None and t["key"].startswith(filters["key_prefix"])
                                                       and t["submitter"]["uid"] == filters["uid"]))]
        met: list[int] = []
        before = None
        while True:
            got = [t["id"] for t in store.tasks(limit=page, before=before, **filters)]
            assert got == sorted(got) and len(got) <= page
            if not got:
                break
            met = got + met
            before = got[0]
        assert met == wanted
    finally:
        store.close()


# -- through the socket ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    xvfb = start_xvfb(tmp_path_factory.mktemp("xvfb"))
    model = ScriptedModel(scenario({"message": "done"}, look_first=False), record=False)
    made = Daemon(xvfb.display, model.start())
    try:
        yield made.start()
    finally:
        made.cleanup()
        model.stop()
        xvfb.stop()


def test_list_over_the_socket_pages_and_cuctl_walks_every_page(daemon: Daemon) -> None:
    first = daemon.call("submit", prompt="one before the many", key="eval:run-9/0")
    daemon.wait_state(first["id"], "succeeded")
    insert_tasks(daemon.state_dir / "cud.sqlite3", MANY)
    newest = first["id"] + MANY
    # A request without the new fields, as a client from before paging sends: the newest LIST_PAGE.
    assert [t["id"] for t in daemon.call("list")] == list(range(newest - LIST_PAGE + 1, newest + 1))
    assert [t["id"] for t in daemon.call("list", limit=2, before=first["id"] + 1)] == [first["id"]]
    assert [t["id"] for t in daemon.call("list", key_prefix="eval:run-9/")] == [first["id"]]
    # Views too big for one message together: the page is the newest that fit, and the walk goes on from there.
    insert_tasks(daemon.state_dir / "cud.sqlite3", 40, prompt="x" * 60_000)
    big = daemon.call("list")
    assert 0 < len(big) < 40 and big[-1]["id"] == newest + 40
    newest += 40
    with Client(daemon.socket) as client:
        ids = [t["id"] for t in all_tasks(client)]
        assert ids == list(range(1, newest + 1))  # every task once, oldest first
        assert [t["id"] for t in all_tasks(client, 1500, page=MAX_LIST_PAGE)] == list(range(newest - 1499, newest + 1))
    # The daemon's own check, past a client's (which refuses it before sending).
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(str(daemon.socket))
        raw.sendall(encode({"v": PROTOCOL_VERSION, "type": "list", "limit": MAX_LIST_PAGE + 1}))
        refused = decode(raw.makefile("rb").readline())
    assert not refused["ok"] and refused["error"]["details"]["field"] == "limit", refused
    listed = json_out(cuctl(daemon.socket, "list", "--last", "3", "--json"))
    assert [t["id"] for t in listed] == [newest - 2, newest - 1, newest]
    assert "--last must be 1 or more, got 0" in cuctl(daemon.socket, "list", "--last", "0").stderr


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(), lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(json_values, max_size=6))
def test_a_reply_of_items_encoded_once_is_the_bytes_of_encoding_it_whole(items: list[Any]) -> None:
    """``list`` measures each view to fit the cap by encoding it, and sends those bytes: the reply is the same
    line the whole result encoded at once would be."""
    once = encode_ok(EncodedItems([encode_json(item) for item in items]))
    assert once == encode(dict(ok_reply(items)))
    assert decode(once)["result"] == items
