"""Idempotency keys and ``interrupt`` (#29) against one real daemon for the module (scripted model, Xvfb).

A key the daemon has recorded never makes a second task: repeated, sent by many clients at once,
or sent again after its reply was lost. ``interrupt`` ends a queued, running or awaiting task
``interrupted`` with its reason kept (show, list, export, report, the notify ``end`` event) and
refuses a task that has ended, naming its state.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.cuctl.client import Client, RemoteError
from cud.daemon.store.database import Store
from cud.errors import ProtocolError
from cud.protocol import IDEMPOTENCY_KEY, decode, encode, parse_request, request
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.receiver import Receiver
from tests.support.recorder import wait_until
from tests.support.xserver import start_xvfb

KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/#+-"
SCENARIOS = {
    # Waits for a person: a safety check on its first action.
    "approve": scenario({"safety_checks": [{"code": "c", "message": "Move the pointer?"}],
                         "actions": [{"type": "move", "x": 10, "y": 10}]}, {"message": "moved"}),
    # The model takes its time answering: the task is running, its request in flight.
    "slow": scenario({"message": "late", "delay": 30}, look_first=False),
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    made = Receiver({"/hook": "ok"}).start()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[Daemon]:
    xvfb = start_xvfb(tmp_path_factory.mktemp("xvfb"))
    model = ScriptedModel(scenario({"message": "done"}, look_first=False), scenarios=SCENARIOS, record=False)
    config = f'[[notify]]\nwebhook = "{receiver.url("/hook")}"\nevents = ["task_finished"]\n'
    made = Daemon(xvfb.display, model.start(), config=config)
    try:
        yield made.start()
    finally:
        made.cleanup()
        model.stop()
        xvfb.stop()


def rows(daemon: Daemon, key: str) -> list[tuple[int, str]]:
    """The tasks the database file holds with ``key``, read beside the daemon (WAL lets a reader in)."""
    db = sqlite3.connect(f"file:{daemon.state_dir / 'cud.sqlite3'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT id, idempotency_key FROM tasks WHERE idempotency_key = ?", (key,)).fetchall()
    finally:
        db.close()


def test_a_repeated_key_gives_the_same_task_and_nothing_new(daemon: Daemon, short_tmp: Path) -> None:
    first = daemon.call("submit", prompt="once", key="suite-1/a.toml/1#1")
    assert first["existing"] is False and first["task"]["key"] == "suite-1/a.toml/1#1"
    ended = daemon.wait_state(first["id"], "succeeded")
    count, events = len(daemon.call("list")), daemon.events(first["id"])
    # Another prompt under the same key is still that task: the key decides.
    again = daemon.call("submit", prompt="something else", max_steps=1, key="suite-1/a.toml/1#1")
    assert again == {"id": first["id"], "task": ended, "existing": True}
    assert len(daemon.call("list")) == count and daemon.events(first["id"]) == events
    assert rows(daemon, "suite-1/a.toml/1#1") == [(first["id"], "suite-1/a.toml/1#1")]

    # cuctl: --key with a prompt, and with a spec; a recorded key is said, and its task is the answer.
    done = cuctl(daemon.socket, "submit", "once", "--key", "suite-1/a.toml/1#1", "--json")
    assert json_out(done) == {"id": first["id"], "existing": True}
    assert f"task {first['id']} already has the key 'suite-1/a.toml/1#1' (succeeded)" in done.stderr
    spec = short_tmp / "s.toml"
    spec.write_text('prompt = "from a spec"\nreset = false\n[[checks]]\nanswer = "done"\n')
    made = json_out(cuctl(daemon.socket, "submit", "--spec", str(spec), "--key", "suite-1/s.toml/1#1", "--json"))
    assert made["existing"] is False
    task = daemon.wait_state(made["id"], "succeeded")
    assert task["key"] == "suite-1/s.toml/1#1" and task["verdict"]["verdict"] == "passed"
    repeat = cuctl(daemon.socket, "submit", "--spec", str(spec), "--key", "suite-1/s.toml/1#1", "--json")
    assert json_out(repeat) == {"id": made["id"], "existing": True}

    # list's filters: the exact key, and a prefix ('_' is a plain character in it, not LIKE's wildcard).
    assert [t["id"] for t in daemon.call("list", key="suite-1/s.toml/1#1")] == [made["id"]]
    assert [t["id"] for t in daemon.call("list", key_prefix="suite-1/")] == [first["id"], made["id"]]
    assert daemon.call("list", key_prefix="suite-1_") == [] and daemon.call("list", key="suite-1") == []
    shown = cuctl(daemon.socket, "list", "--key-prefix", "suite-1/")
    assert shown.returncode == 0 and shown.stdout.splitlines()[0].split()[-2:] == ["KEY", "PROMPT"], shown.stdout
    assert "suite-1/s.toml/1#1" in shown.stdout and "once" in shown.stdout
    assert "key:           suite-1/s.toml/1#1" in cuctl(daemon.socket, "show", str(made["id"])).stdout
    refused = cuctl(daemon.socket, "submit", "x", "--key", "two words")
    assert refused.returncode == 2 and "'submit' field 'key' must be a key of 1 to 160 characters" in refused.stderr
    assert "'two words'" in refused.stderr


def test_one_key_from_many_clients_at_once_makes_one_task(daemon: Daemon) -> None:
    # Prompts only: nothing comes between the lookup and the insert here. The same with spec files, which
    # arrive between the two, is tests/test_spec_files.py::test_one_key_with_files_from_8_clients_at_once_….
    key = "race/1#1"
    clients = [Client(daemon.socket) for _ in range(12)]  # connected first: the submits then go together
    start = threading.Barrier(len(clients))
    replies: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def submit(client: Client) -> None:
        try:
            start.wait(30)
            replies.append(client.call("submit", prompt="racing", key=key))
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(client,)) for client in clients]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for client in clients:
            client.close()
    assert not errors and len(replies) == len(clients), errors
    assert len({r["id"] for r in replies}) == 1 and [r["existing"] for r in replies].count(False) == 1
    assert len(rows(daemon, key)) == 1 and len(daemon.call("list", key=key)) == 1


def test_a_lost_reply_then_the_same_submit_again_gives_the_task_it_made(daemon: Daemon) -> None:
    key = "lost-reply/1#1"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(daemon.socket))
        sock.sendall(encode(request("submit", prompt="reply lost", key=key)))
    # Gone before the answer: the daemon made the task all the same (the client cannot know).
    [made] = wait_until(lambda: daemon.call("list", key=key), 30, "the task of the lost reply")
    retried = daemon.call("submit", prompt="reply lost", key=key)
    assert retried["existing"] is True and retried["id"] == made["id"]
    assert len(rows(daemon, key)) == 1


@settings(max_examples=100, deadline=None)
@given(key=st.text(alphabet=KEY_ALPHABET, min_size=1, max_size=160))
@example(key="_a_")  # LIKE's wildcard is a key character
@example(key="a" * 160)
def test_every_valid_key_is_taken_and_comes_back_as_sent(key: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    message = request("submit", prompt="p", key=key)
    assert parse_request(decode(encode(message)))["key"] == key  # type: ignore[typeddict-item]
    assert parse_request(decode(encode(request("list", key_prefix=key))))["key_prefix"] == key  # type: ignore[typeddict-item]
    store = Store(tmp_path_factory.mktemp("keys") / "cud.sqlite3")
    try:
        task = store.submit("p", "m", 1, "safety", 0, "root", key=key)
        assert task["key"] == key and store.task_by_key(0, key) == task and store.task_by_key(1, key) is None
        assert store.tasks(uid=0, key_prefix=key[: len(key) // 2 + 1]) == [task]
        assert store.tasks(uid=0, key=key + "x") == [] and store.tasks(uid=1, key=key) == []
    finally:
        store.close()


@settings(max_examples=300, deadline=None)
@given(key=st.one_of(
    st.text(min_size=1, max_size=40).filter(lambda k: not IDEMPOTENCY_KEY.fullmatch(k)),
    st.text(alphabet=KEY_ALPHABET, min_size=161, max_size=400),
    st.just(""),
    st.integers(), st.none(), st.lists(st.text(alphabet=KEY_ALPHABET, min_size=1), max_size=2),
))
@example(key="a b")
@example(key="ключ")
@example(key="a\nb")
@example(key="x" * 161)
def test_every_invalid_key_is_refused_naming_it(key: object) -> None:
    for kind, field in (("submit", "key"), ("list", "key"), ("list", "key_prefix")):
        fields: dict[str, Any] = {"prompt": "p"} if kind == "submit" else {}
        with pytest.raises(ProtocolError) as refused:
            parse_request({"v": 2, "type": kind, **fields, field: key})
        shown = repr(key)
        assert f"{kind!r} field {field!r} must be a key of 1 to 160 characters" in refused.value.message
        assert (shown if len(shown) <= 80 else shown[:77] + "...") in refused.value.message


def test_interrupt_ends_a_queued_an_awaiting_and_a_running_task_with_its_reason(daemon: Daemon, receiver: Receiver,
                                                                              short_tmp: Path) -> None:
    # One seat: a task awaiting approval holds it, so the next one waits in the queue.
    awaiting = daemon.call("submit", prompt="move", model="scripted:approve", key="int/awaiting")["id"]
    approval = daemon.wait_approval(awaiting)
    queued = daemon.call("submit", prompt="never runs", key="int/queued")["id"]
    assert daemon.task(queued)["state"] == "queued"

    reason = "retried as attempt 2 on host-b, task 17"
    done = cuctl(daemon.socket, "interrupt", str(queued), "--reason", reason)
    assert done.returncode == 0 and "was queued, now interrupted" in done.stdout, done.stderr
    task = daemon.task(queued)
    assert (task["state"], task["reason"], task["started_at"]) == ("interrupted", reason, None)

    result = daemon.call("interrupt", id=awaiting, reason="superseded: " + reason)
    assert result["state_before"] == "awaiting_approval"
    task = daemon.wait_state(awaiting, "interrupted", "cancelled", "failed", "succeeded")
    assert (task["state"], task["reason"]) == ("interrupted", "superseded: " + reason)
    assert all(a["id"] != approval["id"] for a in daemon.call("approvals"))
    asked = [e["data"] for e in daemon.events(awaiting) if e["kind"] == "interrupt_requested"]
    assert asked == [{"by": {"uid": 0, "name": "root"}, "reason": "superseded: " + reason}]

    running = daemon.call("submit", prompt="slowly", model="scripted:slow", key="int/running")["id"]
    daemon.wait_state(running, "running")
    daemon.call("interrupt", id=running, reason="node drained")
    task = daemon.wait_state(running, "interrupted", "cancelled", "failed", "succeeded")
    assert (task["state"], task["reason"], task["final_message"]) == ("interrupted", "node drained", None)
    assert [e["kind"] for e in daemon.events(queued)] == ["queued", "end"]  # it never ran

    # A task that ended interrupted gets the reason added, once (a fleet node back after its machine was lost).
    again = cuctl(daemon.socket, "interrupt", str(running), "--reason", "retried as attempt 2 on w2")
    assert again.returncode == 0 and "had already ended interrupted" in again.stdout, again.stderr
    result = daemon.call("interrupt", id=running, reason="retried as attempt 2 on w2")
    assert (result["state_before"], result["state"]) == ("interrupted", "interrupted")
    assert daemon.task(running)["reason"] == "node drained; retried as attempt 2 on w2"
    # A task that ended otherwise: refused, naming its state, and left as it was.
    finished = daemon.call("submit", prompt="say done", key="int/finished")["id"]
    state = daemon.wait_state(finished, "succeeded", "failed", "cancelled", "interrupted")["state"]
    with pytest.raises(RemoteError, match=rf"task {finished} has already ended \({state}\)") as refused:
        daemon.call("interrupt", id=finished, reason="again")
    assert refused.value.kind == "wrong_state" and daemon.task(finished)["reason"] is None
    ended = cuctl(daemon.socket, "interrupt", str(finished), "--reason", "again")
    assert ended.returncode == 2 and f"has already ended ({state})" in ended.stderr

    # The reason is shown everywhere the task is: show, list, export, the report, the notify end event.
    assert f"reason:        {reason}" in cuctl(daemon.socket, "show", str(queued)).stdout
    listed = cuctl(daemon.socket, "list", "--key-prefix", "int/").stdout
    assert listed.splitlines()[0].split()[-1] == "REASON" and reason in listed and "node drained" in listed
    archive = short_tmp / "t.tgz"
    assert cuctl(daemon.socket, "export", str(queued), "-o", str(archive)).returncode == 0
    with tarfile.open(archive) as tar:
        exported = json.load(tar.extractfile(f"task-{queued}/task.json"))  # type: ignore[arg-type]
    assert (exported["reason"], exported["key"]) == (reason, "int/queued")
    page = short_tmp / "r.html"
    assert cuctl(daemon.socket, "report", str(running), "-o", str(page)).returncode == 0
    assert "node drained" in page.read_text() and "int/running" in page.read_text()
    def ends_of_ours() -> dict[int, Any] | None:
        ends = {h.body["task"]["id"]: h.body for h in receiver.on("/hook")}
        return ends if {queued, awaiting, running} <= set(ends) else None

    ends = wait_until(ends_of_ours, 30, "the three end events")
    assert ends[queued]["task"]["reason"] == reason and ends[queued]["task"]["state"] == "interrupted"
    assert ends[running]["task"]["reason"] == "node drained" and ends[running]["task"]["key"] == "int/running"
    assert ends[awaiting]["host"] == socket.gethostname()
