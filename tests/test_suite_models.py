"""cuctl eval --model a,b,c: every spec-run on every model, and the summary, table, JUnit and index grouped by model.

Each model's group is, by construction, the one summary of a suite of that model alone: the property tests
check that against a one-model suite made of the same attempts, and that the groups add up to the total.
"""

from __future__ import annotations

import json
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml, Properties

from cud.cuctl.eval import models
from cud.cuctl.eval_loop import Suite
from cud.errors import ConfigError
from cud.suite.index import write_index
from cud.suite.junit import write_junit
from cud.suite.results import Attempt, Results
from cud.suite.words import summary_table

COUNTS = ("runs", "judged", "passed", "failed", "error", "not_converted")
#: How an attempt may end (state, verdict): passed, failed, an error (retried), or not ended yet.
ENDS = [("succeeded", "passed"), ("succeeded", "failed"), ("interrupted", None), ("running", None)]
COST = {"amount": "0.25", "currency": "USD", "unknown": None}


@st.composite
def suites(draw: st.DrawFn) -> Results:
    """A suite of 2 to 4 models, 1 to 3 specs, 1 to 3 repeats, each spec-run with 0 to 2 attempts ended at random."""
    names = draw(st.lists(st.sampled_from(["gpt-a", "gpt-b", "claude", "scripted:x", "m,odd"]), min_size=2,
                          max_size=4, unique=True))
    specs = [f"s{n}.toml" for n in range(draw(st.integers(1, 3)))]
    repeat = draw(st.integers(1, 3))
    attempts = []
    for spec in specs:
        for model in names:
            for r in range(repeat):
                for number in range(1, draw(st.integers(0, 2)) + 1):
                    state, verdict = draw(st.sampled_from(ENDS))
                    attempts.append(Attempt(spec, r, number, task_id=len(attempts) + 1, state=state, verdict=verdict,
                                            steps=draw(st.integers(0, 9)), run_seconds=draw(st.floats(0, 99)),
                                            usage={"input_tokens": draw(st.integers(0, 999)), "output_tokens": 1},
                                            cost=COST, model=model))
    draw(st.randoms()).shuffle(attempts)  # results.json keeps them in the order they were made, any order
    return Results({"specs": specs, "repeat": repeat, "models": names, "files": {}}, attempts)


def alone(results: Results, model: str) -> Results:
    """The suite of ``model`` alone: its attempts, as a suite of one model records them (no model each)."""
    mine = [Attempt.from_dict({**a.to_dict(), "model": None}) for a in results.attempts if a.model == model]
    return Results({**results.suite, "models": None, "model": model}, mine)


@settings(max_examples=60, deadline=None)
@given(suites())
def test_each_models_group_is_its_suite_alone_and_the_groups_add_up_to_the_total(results: Results) -> None:
    summary = results.summary()
    assert "specs" not in summary and [g["model"] for g in summary["models"]] == results.suite["models"]
    for group in summary["models"]:
        single = alone(results, group["model"]).summary()
        assert {k: group[k] for k in ("specs", "total")} == {k: single[k] for k in ("specs", "total")}
        assert [row["runs"] for row in group["specs"]] == [results.suite["repeat"]] * len(results.suite["specs"])
    for count in (*COUNTS, "interrupted_attempts", "retried_attempts"):
        assert sum(g["total"][count] for g in summary["models"]) == summary["total"][count], count
    assert summary["total"]["runs"] == len(results.suite["specs"]) * results.suite["repeat"] * len(results.models)
    # Every attempt is in one group's cost, once: the suite's cost is theirs together (what --max-cost caps).
    cost = summary["total"]["cost"]
    assert (Decimal(cost["amount"]) if cost else Decimal(0)) == Decimal(COST["amount"]) * len(results.attempts)
    assert len(summary["spec_runs"]) == summary["total"]["runs"]
    assert {(r["spec"], r["model"], r["repeat"]) for r in summary["spec_runs"]} == {
        (s, m, k) for s in results.suite["specs"] for m in results.models for k in range(results.suite["repeat"])}


@settings(max_examples=30, deadline=None)
@given(suites())
def test_the_table_junit_and_index_have_a_row_per_model_per_spec(results: Results) -> None:
    summary = results.summary()
    headers, rows = summary_table(summary)
    specs, names = results.suite["specs"], results.suite["models"]
    assert headers[:2] == ["MODEL", "SPEC"]
    assert [(r[0], r[1]) for r in rows] == [(m, s) for m in names for s in [*specs, "total"]] + [("all", "total")]
    for group in summary["models"]:  # a model's total row: its counts, its pass rate and interval
        row = next(r for r in rows if r[:2] == [group["model"], "total"])
        assert row[2:5] == [str(group["total"][k]) for k in ("runs", "passed", "failed")]
    assert rows[-1][2] == str(summary["total"]["runs"])
    with tempfile.TemporaryDirectory() as folder:
        write_junit(results, Path(folder) / "junit.xml")
        suites_ = list(JUnitXml.fromfile(str(Path(folder) / "junit.xml")))
        assert [s.name for s in suites_] == [f"cuctl eval: {m}" for m in names]
        for suite, group in zip(suites_, summary["models"], strict=True):
            cases = list(suite)
            assert suite.tests == len(cases) == group["total"]["runs"]
            assert (suite.failures, suite.errors) == (group["total"]["failed"], group["total"]["error"])
            assert suite.skipped == group["total"]["runs"] - group["total"]["judged"]
            assert {(c.classname, c.name) for c in cases} == {
                (s, f"repeat {k + 1}") for s in specs for k in range(results.suite["repeat"])}
            assert all({p.name: p.value for props in c.iterchildren(Properties) for p in props}["model"]
                       == group["model"] for c in cases)
        write_index(results, Path(folder))
        page = (Path(folder) / "index.html").read_text()
    assert "<th>model</th><th>spec</th>" in page and page.count("<tr><td>gpt-a</td>") == (
        ("gpt-a" in names) * (len(specs) + 1) + sum(1 for a in results.attempts if a.model == "gpt-a"))


@pytest.mark.parametrize(("text", "chosen"), [(None, []), ("gpt-a", ["gpt-a"]), (" gpt-a , b ", ["gpt-a", "b"]),
                                              ("a,b,c", ["a", "b", "c"])])
def test_model_names(text: str | None, chosen: list[str]) -> None:
    assert models(text) == chosen


@pytest.mark.parametrize(("text", "says"), [("", "none empty; got ''"), ("a,,b", "none empty; got 'a,,b'"),
                                            ("a, ", "none empty; got 'a, '"),
                                            ("a,b,a", "names 'a' more than once (in 'a,b,a')")])
def test_bad_model_names_are_named(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")) as caught:
        models(text)
    assert caught.value.details["value"] == text


def test_a_suite_of_one_model_keeps_its_results_json_shape_and_keys(tmp_path: Path) -> None:
    """A results.json written before models could be several: resumed, it is the same suite, same keys."""
    before: dict[str, Any] = {"version": 1, "suite": {"run": "abc", "specs": ["a.toml", "b.toml"], "repeat": 1,
                                                      "model": "gpt-x", "files": {}, "retry_errors": 1},
                              "runs": [{"spec": "a.toml", "repeat": 0, "attempt": 1, "task_id": 3, "state": "succeeded",
                                        "verdict": "passed", "judged": True, "outcome": "passed"}]}
    (tmp_path / "results.json").write_text(json.dumps(before))
    results = Results.load(tmp_path)
    assert results.models == [None] and results.model_of(results.attempts[0]) == "gpt-x"
    assert "model" not in results.attempts[0].to_dict()
    summary = results.summary()
    assert set(summary) == {"specs", "total", "spec_runs"} and "model" not in summary["spec_runs"][0]
    assert summary_table(summary)[0][0] == "SPEC"
    assert [results.key_of(r.last) for r in results.spec_runs()] == ["eval:abc/0/0/a1", "eval:abc/1/0/a1"]
    todo = Suite(None, results, {}, tmp_path, None, []).todo  # type: ignore[arg-type]  # no daemon: what is due
    assert [(a.spec, a.model) for a in todo] == [("b.toml", None)]
    write_junit(results, tmp_path / "j.xml")
    assert [s.name for s in JUnitXml.fromfile(str(tmp_path / "j.xml"))] == ["cuctl eval"]


def test_resume_and_retry_go_per_spec_and_model(tmp_path: Path) -> None:
    results = Results({"run": "r", "specs": ["a.toml"], "repeat": 1, "models": ["m1", "m2", "m3"], "model": None,
                       "files": {}}, [
        Attempt("a.toml", 0, 1, task_id=1, state="succeeded", verdict="passed", model="m1"),
        Attempt("a.toml", 0, 1, task_id=2, state="interrupted", model="m2")])  # m3: not submitted yet
    results.save(tmp_path)
    again = Results.load(tmp_path)
    assert [a.model for a in again.attempts] == ["m1", "m2"]
    keys = {again.key_of(r.last) for r in again.spec_runs()}
    assert keys == {"eval:r/0/m0/0/a1", "eval:r/0/m1/0/a1", "eval:r/0/m2/0/a1"}
    todo = Suite(None, again, {}, tmp_path, None, []).todo  # type: ignore[arg-type]  # no daemon: what is due
    assert [(a.model, a.attempt) for a in todo] == [("m2", 2), ("m3", 1)]  # m1 judged: not run again
    assert [again.model_of(a) for a in todo] == ["m2", "m3"] and again.key_of(todo[0]) == "eval:r/0/m1/0/a2"


def test_a_fleet_suite_keys_and_writes_back_each_models_runs_apart(tmp_path: Path) -> None:
    """The fleet's loop is the same loop: its registry keys are per spec and model, and an attempt its node lost
    is written back into its own model's spec-run, whatever the other model's run of that spec has."""
    from cud.fleet.suite import FleetSuite

    results = Results({"run": "r", "specs": ["a.toml"], "repeat": 1, "models": ["m1", "m2"], "model": None,
                       "files": {}}, [Attempt("a.toml", 0, 1, task_id=1, state="succeeded", verdict="passed",
                                              model="m1")])
    fleet = FleetSuite(results, {}, tmp_path)
    [due] = fleet.todo
    assert (due.model, fleet._key(due)) == ("m2", "eval:r/0/m1/0")
    results.attempts.append(due)
    task = {"id": 9, "state": "succeeded", "seat": "s1", "verdict": {"verdict": "failed", "score": 0.0, "checks": []}}
    outcome = {"attempt": 2, "node": "n2", "task": task, "record": {"inline": False, "host": "n2", "task": 9},
               "history": [{"attempt": 1, "task": 5, "node": "n1"}, {"attempt": 2, "task": 9, "node": "n2"}]}
    fleet._ended(fleet._take(due, outcome))
    mine = [(a.attempt, a.state, a.task_id) for a in results.attempts if a.model == "m2"]
    assert mine == [(1, "interrupted", 5), (2, "succeeded", 9)]  # its lost attempt 1, though m1 has an attempt 1
    summary = results.summary()
    assert [(g["model"], g["total"]["passed"], g["total"]["failed"], g["total"]["interrupted_attempts"])
            for g in summary["models"]] == [("m1", 1, 0, 0), ("m2", 0, 1, 1)]
    assert [row[:5] for row in summary_table(summary)[1]] == [
        ["m1", "a.toml", "1", "1", "0"], ["m1", "total", "1", "1", "0"], ["m2", "a.toml", "1", "0", "1"],
        ["m2", "total", "1", "0", "1"], ["all", "total", "2", "1", "1"]]
    assert json.loads((tmp_path / "results.json").read_text())["summary"]["models"] == summary["models"]


def test_max_cost_caps_every_models_tasks_together(tmp_path: Path) -> None:
    """--max-cost is the suite's: what one model's tasks spent is not there for another's."""
    from cud.spec import parse_spec
    from cud.suite.plan import Planned

    spent = Attempt("a.toml", 0, 1, task_id=1, state="succeeded", verdict="passed", model="m1", grant="1",
                    cost={"amount": "1", "currency": "USD", "unknown": None})
    results = Results({"run": "r", "specs": ["a.toml"], "repeat": 1, "models": ["m1", "m2"], "model": None,
                       "files": {}, "max_cost": "1"}, [spent])
    planned = {"a.toml": Planned("a.toml", tmp_path / "a.toml", parse_spec({"prompt": "x"}), {})}
    suite = Suite(None, results, planned, tmp_path, None, [{"name": "s1", "size": "1280x800"}])  # type: ignore[arg-type, list-item]
    suite._fill()  # nothing in flight, the cap spent by m1: m2's run is not submitted
    refused = [a for a in results.attempts if a.model == "m2"]
    assert [(a.state, (a.error or {}).get("kind")) for a in refused] == [("refused", "budget_exceeded")]
    assert results.summary()["total"]["cost"]["amount"] == "1"
