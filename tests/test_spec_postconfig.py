"""A spec's ``postconfig`` (setup steps after the model, before the checks), ``pass_if`` (how checks combine) and
``fail_if_answer`` (a final message that fails the verdict whatever the checks say).

Parsing: each key refused naming its path and value, the normal form parses back to an equal spec.
The rule: :func:`cud.outcome.verdict_outcome` for both ``pass_if`` values, and the daemon's verdict
(:func:`cud.daemon.spec.verdict.judge`) over random check results. Who may read why a postconfig step
failed. And on a real seat (one for the module): a postconfig ``run`` whose file a check sees, its
events between the model's and the checks'; a postconfig step that fails, so no check looks; and
``pass_if = "any"`` beside ``"all"`` on the same checks; ``fail_if_answer`` matching the final message
and not.
"""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cud.daemon.config import Access
from cud.daemon.server.access import WITHHELD_SETUP, AccessRights, Peer
from cud.daemon.spec.verdict import judge
from cud.errors import SpecError
from cud.outcome import OUTCOMES, PASS_IF, task_outcome, verdict_outcome
from cud.protocol import CheckResultView
from cud.spec import parse_spec
from cud.spec.schema import MAX_POSTCONFIG
from cud.spec.setup import failure_message, unlooked_why
from cud.spec.wire import spec_from_request, submit_fields
from tests.support.daemon import cuctl, scenario
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

ANSWER = scenario({"message": "The answer is 42."}, look_first=False)
NOBODY = pwd.getpwnam("nobody")


# -- parsing ------------------------------------------------------------------------------------
def test_postconfig_and_pass_if_parse_and_round_trip() -> None:
    raw = {"prompt": "p", "postconfig": [{"run": ["/bin/true"], "timeout": 5},
                                         {"files": [{"src": "fixtures/a", "dest": "a"}]}, {"sleep": 0.5}],
           "checks": [{"answer": "x"}], "pass_if": "any"}
    spec = parse_spec(raw)
    assert [s.kind for s in spec.postconfig] == ["run", "files", "sleep"] and spec.pass_if == "any"
    assert spec.judging()["postconfig"] == [s.to_dict() for s in spec.postconfig]
    assert spec.judging()["pass_if"] == "any" and parse_spec(spec.to_dict()) == spec
    # its files are the spec's to send, and what acts in the session needs a seat with one, as setup's
    assert spec.local_files() == {"fixtures/a": "postconfig[1].files[0].src"}
    assert spec.in_session() == ["postconfig[0].run", "postconfig[1].files"] and spec.needs_session
    assert spec.reset is True  # as a spec with setup or checks
    bare = parse_spec({"prompt": "p"})
    assert bare.postconfig == () and bare.pass_if == "all" and bare.to_dict()["pass_if"] == "all"
    assert parse_spec({"prompt": "p", "postconfig": [{"sleep": 1}]}).in_session() == []


@pytest.mark.parametrize(("raw", "key", "words"), [
    ({"postconfig": {"run": ["a"]}}, "postconfig", "must be a list, got {'run': ['a']}"),
    ({"postconfig": [{"run": ["a"], "launch": ["b"]}]}, "postconfig[0]", "exactly one of files, run"),
    ({"postconfig": [{"sleep": 1}, {"run": "ls -l"}]}, "postconfig[1].run", "must be a list, got 'ls -l'"),
    ({"postconfig": [{"run": ["a"], "timout": 3}]}, "postconfig[0].timout", "did you mean 'timeout'?"),
    ({"postconfig": [{"open": "../x"}]}, "postconfig[0].open", "a path inside the seat's home"),
    ({"postconfig": [{"files": [{"src": "a", "dest": "/etc/x"}]}]}, "postconfig[0].files[0].dest", "'/etc/x'"),
    ({"postconfig": [{"sleep": 1}] * (MAX_POSTCONFIG + 1)}, "postconfig", f"the limit is {MAX_POSTCONFIG}"),
    ({"pass_if": "some"}, "pass_if", "must be 'all' or 'any', got 'some'"),
    ({"pass_if": "ALL"}, "pass_if", "got 'ALL'"),
    ({"pass_if": 1}, "pass_if", "got 1"),
    ({"pass_if": ["any"]}, "pass_if", "got ['any']"),
    ({"pas_if": "any"}, "pas_if", "did you mean 'pass_if'?"),
    ({"fail_if_answer": "re:(", "checks": [{"answer": "x"}]}, "fail_if_answer", "not a regular expression"),
    ({"fail_if_answer": 3, "checks": [{"answer": "x"}]}, "fail_if_answer", "got 3"),
    ({"fail_if_answer": "re:no"}, "fail_if_answer", "needs checks"),
    ({"fail_if_answr": "re:no"}, "fail_if_answr", "did you mean 'fail_if_answer'?"),
])
def test_bad_postconfig_and_pass_if_are_refused_naming_key_and_value(raw: dict[str, Any], key: str,
                                                                     words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"prompt": "p", **raw})
    assert caught.value.details["key"] == key and repr(key) in caught.value.message, caught.value.message
    assert words in caught.value.message, caught.value.message


STEPS = st.lists(st.one_of(
    st.builds(lambda argv, t, c: {"run": argv, "timeout": t, "exit_code": c},
              st.lists(st.sampled_from(["/bin/true", "-c", "x y", "é"]), min_size=1, max_size=3),
              st.integers(1, 600), st.integers(0, 255)),
    st.builds(lambda s: {"sleep": s}, st.floats(0.01, 60)),
    st.builds(lambda t: {"clipboard": t}, st.text(max_size=10).filter(lambda t: "\x00" not in t)),
    st.builds(lambda d: {"files": [{"src": f"fixtures/{d}", "dest": f"Desktop/{d}"}]}, st.sampled_from("abc")),
    st.builds(lambda p: {"open": p, "wait_for": {"window_class": "X", "timeout": 2}}, st.sampled_from(["a", "b/c"])),
), max_size=6)


@given(STEPS, st.sampled_from(PASS_IF))
def test_random_postconfig_lists_round_trip(steps: list[dict[str, Any]], pass_if: str) -> None:
    spec = parse_spec({"prompt": "p", "postconfig": steps, "pass_if": pass_if})
    assert len(spec.postconfig) == len(steps) and spec.pass_if == pass_if
    assert parse_spec(spec.to_dict()) == spec
    assert parse_spec({"prompt": "p", **spec.judging()}) == spec


def test_cuctl_sends_the_new_keys_only_when_they_say_something() -> None:
    # so a daemon from before them still takes every spec that uses neither
    plain = submit_fields(parse_spec({"prompt": "p", "checks": [{"answer": "x"}]}), {})["spec"]
    assert set(plain) == {"tags", "reset", "setup", "checks", "collect"}
    used = parse_spec({"prompt": "p", "postconfig": [{"sleep": 1}], "pass_if": "any"})
    sent = submit_fields(used, {})
    assert sent["spec"]["postconfig"] == [{"sleep": 1.0}] and sent["spec"]["pass_if"] == "any"
    assert spec_from_request({"type": "submit", **sent}) == (used, {})
    failing = parse_spec({"prompt": "p", "checks": [{"answer": "x"}], "fail_if_answer": "re:(?i)impossible"})
    sent = submit_fields(failing, {})
    assert sent["spec"]["fail_if_answer"] == "re:(?i)impossible" and set(sent["spec"]) == {*plain, "fail_if_answer"}
    assert spec_from_request({"type": "submit", **sent}) == (failing, {})
    assert parse_spec(failing.to_dict()) == failing and parse_spec(failing.to_dict()).fail_if_answer is not None


# -- the rule -----------------------------------------------------------------------------------
checks = st.lists(st.sampled_from(OUTCOMES), max_size=8)


@given(checks, st.data())
def test_the_verdict_by_each_pass_if(outcomes: list[str], data: st.DataObject) -> None:
    every = verdict_outcome(outcomes)  # type: ignore[arg-type]  # sampled from OUTCOMES
    assert verdict_outcome(outcomes, "all") == every  # "all" is the default
    one = verdict_outcome(outcomes, "any")  # type: ignore[arg-type]  # sampled from OUTCOMES
    if not outcomes:
        assert every is None and one is None
        return
    assert (one == "passed") == ("passed" in outcomes)
    assert (one == "failed") == ("passed" not in outcomes and "failed" in outcomes)
    assert (one == "error") == (set(outcomes) == {"error"})
    if every == "passed":
        assert one == "passed"  # every check passing is one passing
    if one != "passed":
        assert every == one  # with none passed the two rules agree
    # the order of the checks never matters
    shuffled = data.draw(st.permutations(outcomes))
    assert verdict_outcome(shuffled, "any") == one and verdict_outcome(shuffled, "all") == every
    # a check that passes can only help "any", and a check that fails can only hurt "all"
    assert verdict_outcome([*outcomes, "passed"], "any") == "passed"
    assert verdict_outcome([*outcomes, "failed"], "all") == "failed"


@given(checks, st.sampled_from(PASS_IF))
def test_a_final_message_that_fails_the_verdict_fails_it_whatever_the_checks(outcomes: list[str],
                                                                            pass_if: str) -> None:
    failed = verdict_outcome(outcomes, pass_if, answer_fails=True)  # type: ignore[arg-type]  # from OUTCOMES
    assert failed == (None if not outcomes else "failed")
    if outcomes:
        verdict = judge([result(i, o, 1.0) for i, o in enumerate(outcomes)], "succeeded", pass_if,
                        answer_failed="why")
        assert verdict is not None and (verdict["verdict"], verdict["score"], verdict["answer_failed"]) == (
            "failed", 0.0, "why")
        assert task_outcome("succeeded", verdict["verdict"], None) == "failed"
        kept = judge([result(i, o, 1.0) for i, o in enumerate(outcomes)], "succeeded", pass_if)
        assert kept is not None and "answer_failed" not in kept


def test_an_unknown_pass_if_is_a_bug_not_a_verdict() -> None:
    with pytest.raises(ValueError, match="'most'"):
        verdict_outcome(["passed"], "most")


def result(index: int, outcome: str, weight: float) -> CheckResultView:
    return {"index": index, "name": f"c{index}", "kind": "answer", "weight": weight, "passed": outcome == "passed",
            "outcome": outcome, "expected": "", "observed": None, "why": "", "ms": 0.0}  # type: ignore[typeddict-item]


@given(st.lists(st.tuples(st.sampled_from(OUTCOMES), st.floats(0.001, 1000)), min_size=1, max_size=8),
       st.sampled_from(PASS_IF))
def test_the_daemons_verdict_and_score_by_each_pass_if(checked: list[tuple[str, float]], pass_if: str) -> None:
    results = [result(i, o, w) for i, (o, w) in enumerate(checked)]
    verdict = judge(results, "succeeded", pass_if)
    assert verdict is not None and verdict["pass_if"] == pass_if
    assert verdict["verdict"] == verdict_outcome([o for o, _ in checked], pass_if)  # type: ignore[misc]
    assert verdict["passed"] + verdict["failed"] + verdict["errors"] == len(checked)
    passed = sum(w for o, w in checked if o == "passed")
    if pass_if == "any":
        # the best single check's own score: 1 when one passed, whatever the weights
        assert verdict["score"] == (1.0 if passed else 0.0)
        assert (verdict["score"] == 1.0) == (verdict["verdict"] == "passed")
    else:
        assert verdict["score"] == round(passed / sum(w for _, w in checked), 6)
    assert task_outcome("succeeded", verdict["verdict"], None) == verdict["verdict"]
    assert judge([], "succeeded", pass_if) is None


# -- who reads why a postconfig step failed -----------------------------------------------------
def test_why_a_postconfig_step_failed_is_read_as_a_setup_steps_is() -> None:
    rights = AccessRights(Access(submit_users=("nobody",)))
    nobody = Peer(pid=1, uid=NOBODY.pw_uid, gid=NOBODY.pw_gid, groups=frozenset(), name="nobody")
    root = Peer(pid=1, uid=0, gid=0, groups=frozenset(), name="root")
    why = "it exited with status 3, not 0; output: a secret"

    def task(part: str) -> Any:
        check: dict[str, Any] = {
            **result(0, "error", 1.0), "why": unlooked_why(failure_message(0, "postconfig[0].run", "run x", why)),
            "postconfig_failed": {"step": 0, "key": "postconfig[0].run", "what": "run x", "part": part}}
        verdict = {"verdict": "error", "score": 0.0, "passed": 0, "failed": 0, "errors": 1, "state": "succeeded",
                   "checks": [check], "at": "", "pass_if": "all"}
        return {"id": 7, "prompt": "p", "key": None, "submitter": {"uid": 0, "name": "root"},
                "spec": {"postconfig": [{"run": ["x"]}], "checks": [{"answer": "x"}]}, "verdict": verdict,
                "artifacts": None, "error": None}

    shown = rights.task_for(nobody, task("run"))
    assert shown["verdict"] is not None
    withheld = "could not look: postconfig step 1 (postconfig[0].run: run x) failed: " + WITHHELD_SETUP
    assert shown["verdict"]["checks"][0]["why"] == withheld  # an answer check's why, that quoted the session
    assert shown["verdict"]["checks"][0]["postconfig_failed"]["key"] == "postconfig[0].run"
    assert rights.task_for(root, task("run")) == task("run")
    assert rights.task_for(nobody, task("wait_for")) == task("wait_for")  # only the display was looked at
    check = {"task_id": 7, "seq": 3, "at": "", "kind": "check", "data": task("run")["verdict"]["checks"][0]}
    assert rights.event_for(nobody, task("run"), check)["data"]["why"] == withheld
    step = {"task_id": 7, "seq": 2, "at": "", "kind": "postconfig",
            "data": {"index": 0, "kind": "run", "what": "run x", "ms": 1.0, "ok": False, "part": "run", "error": why}}
    assert rights.event_for(nobody, task("run"), step)["data"]["error"] == WITHHELD_SETUP  # type: ignore[arg-type]
    assert rights.event_for(root, task("run"), step) == step  # type: ignore[arg-type]


# -- on a real seat ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, ANSWER) as s:
        yield s


def test_postconfig_runs_after_the_model_and_its_file_is_what_the_checks_see(seat: SpecSeat) -> None:
    spec = seat.write("post.toml", """
prompt = "What is the answer?"
[[setup]]
run = ["/bin/sh", "-c", "printf 'before\\\\n' > state.txt"]
[[postconfig]]
run = ["/bin/sh", "-c", "printf 'after\\\\n' >> state.txt"]
[[postconfig]]
files = [{ src = "fixtures/gold.txt", dest = "gold.txt" }]
[[checks]]
file = "state.txt"
matches = "before\\nafter\\n"
[[checks]]
file = "gold.txt"
equals = "fixtures/gold.txt"
""", {"fixtures/gold.txt": "gold ✓\n"})
    code, task = seat.submit(spec)
    verdict = task["verdict"]
    assert code == 0 and task["state"] == "succeeded" and verdict["verdict"] == "passed", verdict
    assert verdict["pass_if"] == "all" and verdict["score"] == 1.0
    kinds = [e["kind"] for e in seat.events(task["id"]) if e["kind"] in ("setup", "step", "postconfig", "check")]
    assert kinds == ["setup", "step", "postconfig", "postconfig", "check", "check"], kinds
    post = [e["data"] for e in seat.events(task["id"]) if e["kind"] == "postconfig"]
    assert [(p["index"], p["kind"], p["ok"]) for p in post] == [(0, "run", True), (1, "files", True)]
    followed = cuctl(seat.daemon.socket, "follow", str(task["id"]))
    assert "postconfig 2 (files fixtures/gold.txt -> gold.txt): done" in followed.stdout, followed.stdout
    shown = cuctl(seat.daemon.socket, "show", str(task["id"]))
    assert "1 setup steps, 2 postconfig steps, 2 checks, reset yes" in shown.stdout, shown.stdout


def test_a_failed_postconfig_step_means_no_check_looks_and_the_verdict_is_error(seat: SpecSeat) -> None:
    spec = seat.write("broken.toml", """
prompt = "What is the answer?"
[[postconfig]]
run = ["/bin/sh", "-c", "echo nope; exit 3"]
[[postconfig]]
run = ["/bin/sh", "-c", "touch never.txt"]
[[checks]]
answer = "re:42"
[[checks]]
file = "never.txt"
exists = false
""")
    code, task = seat.submit(spec)
    verdict = task["verdict"]
    assert task["state"] == "succeeded" and task["error"] is None  # the model's part went well
    assert verdict["verdict"] == "error" and verdict["errors"] == 2 and verdict["score"] == 0.0, verdict
    assert task_outcome(task["state"], verdict["verdict"], task["error"]) == "error" and code == 3
    failure = ("postconfig step 1 (postconfig[0].run: run /bin/sh -c echo nope; exit 3) failed: it exited with "
               "status 3, not 0; output: nope")
    for check in verdict["checks"]:  # each as a check produces it, none having looked
        assert check["outcome"] == "error" and check["passed"] is False and check["observed"] is None
        assert check["why"] == f"could not look: {failure}", check["why"]
        assert check["postconfig_failed"] == {"step": 0, "key": "postconfig[0].run",
                                              "what": "run /bin/sh -c echo nope; exit 3", "part": "run"}
    assert [c["kind"] for c in verdict["checks"]] == ["answer", "file"]
    post = [e["data"] for e in seat.events(task["id"]) if e["kind"] == "postconfig"]
    assert [(p["index"], p["ok"]) for p in post] == [(0, False)]  # the second step never ran
    assert post[0]["error"] == "it exited with status 3, not 0; output: nope" and post[0]["part"] == "run"
    assert not (seat.home / "never.txt").exists()
    followed = cuctl(seat.daemon.socket, "follow", str(task["id"]))
    assert "postconfig 1 (run /bin/sh -c echo nope; exit 3): FAILED: it exited" in followed.stdout, followed.stdout
    assert followed.returncode == 3


@pytest.mark.parametrize(("pass_if", "code", "verdict", "score"), [("any", 0, "passed", 1.0),
                                                                   ("all", 1, "failed", 0.25)])
def test_pass_if_any_passes_on_one_check_where_all_fails(seat: SpecSeat, pass_if: str, code: int, verdict: str,
                                                         score: float) -> None:
    spec = seat.write(f"{pass_if}.toml", f"""
prompt = "What is the answer?"
reset = false
pass_if = "{pass_if}"
[[checks]]
name = "wrong"
answer = "The answer is 41."
weight = 3
[[checks]]
name = "right"
answer = "re:42"
""")
    exit_code, task = seat.submit(spec)
    judged = task["verdict"]
    assert [c["outcome"] for c in judged["checks"]] == ["failed", "passed"]
    assert (exit_code, judged["verdict"], judged["score"], judged["pass_if"]) == (code, verdict, score, pass_if)
    shown = cuctl(seat.daemon.socket, "show", str(task["id"]))
    assert ("(one is enough: pass_if any)" in shown.stdout) == (pass_if == "any"), shown.stdout


def test_postconfig_does_not_run_when_setup_did_not_finish(seat: SpecSeat) -> None:
    spec = seat.write("nosetup.toml", """
prompt = "Never asked."
[[setup]]
run = ["/bin/false"]
[[postconfig]]
run = ["/bin/sh", "-c", "touch post-ran.txt"]
[[checks]]
answer = "re:."
""")
    code, task = seat.submit(spec)
    assert code == 1 and task["state"] == "failed" and task["error"]["kind"] == "setup_failed"
    assert not any(e["kind"] in ("postconfig", "check") for e in seat.events(task["id"]))
    assert not (seat.home / "post-ran.txt").exists()


@pytest.mark.parametrize(("pattern", "code", "verdict"), [("re:(?i)answer is 4\\d", 1, "failed"),
                                                        ("re:(?i)impossible", 0, "passed")])
def test_fail_if_answer_fails_a_verdict_whose_checks_passed_only_when_it_matches(seat: SpecSeat, pattern: str,
                                                                                 code: int, verdict: str) -> None:
    spec = seat.write(f"declared-{verdict}.toml", f"""
prompt = "What is the answer?"
reset = false
pass_if = "any"
fail_if_answer = '{pattern}'
[[checks]]
answer = "re:42"
""")
    exit_code, task = seat.submit(spec)
    judged = task["verdict"]
    assert [c["outcome"] for c in judged["checks"]] == ["passed"]  # the checks look as ever
    assert (exit_code, judged["verdict"]) == (code, verdict), judged
    shown = cuctl(seat.daemon.socket, "show", str(task["id"]))
    if verdict == "failed":
        why = f"the final message matches /{pattern[3:]}/ (fail_if_answer): 'The answer is 42.'"
        assert judged["answer_failed"] == why and judged["score"] == 0.0
        assert f"failed by its final message: {why}" in shown.stdout, shown.stdout
    else:
        assert "answer_failed" not in judged and judged["score"] == 1.0
        assert "failed by its final message" not in shown.stdout
