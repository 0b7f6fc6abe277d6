"""The fleet registry's bookkeeping (cud.fleet.book, no Ray): attempts numbered per spec-run, superseded ones
found for their node, and what a long-lived head forgets: never a run a suite or a node may still ask about."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.fleet.book import KEEP_DONE_JOBS, KEEP_RUN_SECONDS, PRUNE_SECONDS, Book


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_started_names_the_runs_whose_last_attempt_is_under_way(clock: Clock) -> None:
    """What the suite's waiting line rests on: a run not begun, or ended, is not under way; a retry begun is."""
    book = Book(clock)
    book.begin("r/0/0", "w1", "t1")
    book.begin("r/1/0", "w1", "t2")
    book.finish("r/1/0", 1, "succeeded", 3)
    assert book.started(["r/0/0", "r/1/0", "r/2/0"]) == ["r/0/0"]
    book.finish("r/0/0", 1, "interrupted", 4)
    book.begin("r/0/0", "w2", "t3")
    assert book.started(["r/0/0", "r/1/0", "r/2/0"]) == ["r/0/0"]


def test_attempts_are_numbered_and_a_retried_one_is_superseded_on_its_node(clock: Clock) -> None:
    book = Book(clock)
    assert book.begin("r/0/0", "w1", "t1") == 1
    assert book.superseded("w1") == []  # no later attempt: nothing to retire
    assert book.begin("r/0/0", "w2", "t2") == 2
    book.finish("r/0/0", 2, "succeeded", 7)
    assert book.superseded("w1") == [{"run": "r/0/0", "attempt": 1, "key": "r/0/0/a1",
                                      "retry": {"attempt": 2, "node": "w2", "task": 7}}]
    assert book.superseded("w2") == []
    book.retired("r/0/0", 1)
    assert book.superseded("w1") == []


def test_a_run_is_forgotten_a_week_after_it_ended_and_not_before(clock: Clock) -> None:
    book = Book(clock)
    book.begin("done", "w1", "t")
    book.finish("done", 1, "succeeded", 1)
    book.begin("open", "w1", "t")  # still running (its driver may resume it)
    book.begin("lost", "w1", "t")
    book.begin("lost", "w2", "t")
    book.finish("lost", 2, "succeeded", 2)  # attempt 1 not retired: its node has not come back yet
    clock.now += KEEP_RUN_SECONDS - 1
    book.begin("new", "w1", "t")
    assert set(book.runs) == {"done", "open", "lost", "new"}
    clock.now += PRUNE_SECONDS
    book.begin("newer", "w1", "t")
    assert set(book.runs) == {"open", "lost", "new", "newer"}
    book.retired("lost", 1)
    clock.now += PRUNE_SECONDS
    book.begin("newest", "w1", "t")
    assert "lost" not in book.runs and book.history("lost") == []


def test_the_newest_finished_detached_suites_are_kept(clock: Clock) -> None:
    book = Book(clock)
    book.job_put("running", {"n": 0}, {"reports/a.html": b"a"})
    for i in range(KEEP_DONE_JOBS + 3):
        clock.now += 1
        book.job_put(f"job{i}", {"n": i}, {f"reports/{i}.html": b"x"}, done=True)
    kept = {job for job in book.jobs if book.job_get(job) is not None}
    assert kept == {"running"} | {f"job{i}" for i in range(3, KEEP_DONE_JOBS + 3)}
    assert book.job_get("job3", with_files=True) == {"results": {"n": 3}, "done": True,
                                                     "files": {"reports/3.html": b"x"}}


OPS = st.lists(st.tuples(st.sampled_from(["begin", "finish", "retire", "wait"]), st.integers(0, 4),
                         st.sampled_from(["w1", "w2", "w3"]), st.floats(0, 3 * KEEP_RUN_SECONDS)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_pruning_never_forgets_what_is_still_asked_about(ops: list[tuple[str, int, str, float]]) -> None:
    """Whatever happens, a run with an attempt still going, an attempt not retired behind a later one, or an end
    less than KEEP_RUN_SECONDS ago is remembered; the attempts of those remembered never change."""
    clock = Clock()
    book = Book(clock)
    shadow: dict[str, list[dict[str, Any]]] = {}
    for op, n, node, wait in ops:
        run = f"r{n}"
        if op == "begin":
            number = book.begin(run, node, "t")
            if number == 1:  # new, or forgotten and begun again
                shadow[run] = []
            shadow.setdefault(run, []).append({"node": node, "ended": None, "retired": False})
            assert number == len(shadow[run])
        elif op == "finish" and shadow.get(run) and run in book.runs:
            book.finish(run, len(shadow[run]), "succeeded", 1)
            shadow[run][-1]["ended"] = clock.now
        elif op == "retire" and shadow.get(run) and len(shadow[run]) > 1 and run in book.runs:
            book.retired(run, 1)
            shadow[run][0]["retired"] = True
        elif op == "wait":
            clock.now += wait
        for key, attempts in shadow.items():
            must_keep = (attempts[-1]["ended"] is None or clock.now - attempts[-1]["ended"] < KEEP_RUN_SECONDS
                         or not all(a["retired"] for a in attempts[:-1]))
            if must_keep:
                assert [e["node"] for e in book.history(key)] == [a["node"] for a in attempts], key
        for key in [k for k in shadow if k not in book.runs]:
            del shadow[key]
        for where in ("w1", "w2", "w3"):  # what a node must retire: every earlier attempt of its not retired
            expected = sorted((run, i + 1) for run, attempts in book.runs.items() for i, entry in enumerate(attempts[:-1])
                              if entry["node"] == where and not entry["retired"])
            assert [(e["run"], e["attempt"]) for e in book.superseded(where)] == expected
