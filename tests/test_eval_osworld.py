"""``cuctl eval --from-osworld`` on OSWorld's own index files (``test_x.json``: ``{"DOMAIN": ["ID", ...]}``, each
task at ``examples/DOMAIN/ID.json`` beside it) and ``--skip-unconvertible``: what converts runs on a real seat and
is judged, every other task is listed as not converted with why (results.json, the table, the index, JUnit), the
counts add up to the index's total, and the table sums per domain. Without the flag the first task that does not
convert stops the suite before anything is submitted; a task the index lists whose file is missing is named.
One seat and one daemon for the module; the index is written here, in OSWorld's format.
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml

from cud.cuctl.eval import new_results
from cud.errors import ConfigError
from cud.suite.plan import Planned, Unconverted, osworld_index, plan_all
from tests.support.daemon import cuctl
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

SAY_DONE = {"name": "say-done", "steps": [{"message": "done"}]}


def task(instruction: str, config: list[dict[str, Any]], evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": "", "snapshot": "os", "instruction": instruction, "source": "cud tests", "config": config,
            "related_apps": ["os"], "evaluator": evaluator, "proxy": False, "fixed_ip": False,
            "possibility_of_env_change": "low"}


def command_check(func: str, command: list[str], rules: dict[str, Any]) -> dict[str, Any]:
    return {"func": func, "result": {"type": "vm_command_line", "command": command},
            "expected": {"type": "rule", "rules": rules}}


MAKE_NOTE = {"type": "execute", "parameters": {"command": "mkdir -p Desktop && echo hi > Desktop/note.txt",
                                               "shell": True}}
#: Tasks by domain and id: the ones the converter supports pass or fail; the others name what it lacks.
TASKS: dict[str, dict[str, dict[str, Any]]] = {
    "os": {
        "note-kept": task("Keep the note.", [MAKE_NOTE],
                          command_check("exact_match", ["cat", "/home/user/Desktop/note.txt"], {"expected": "hi\n"})),
        "spotify": task("Install Spotify.", [],
                        command_check("check_include_exclude", ["ls", "/home/user"],
                                      {"include": ["spotify-installed"], "exclude": ["not found"]})),
        "unknown-metric": task("Judge it oddly.", [],
                               command_check("no_such_metric", ["true"], {"expected": ""})),
    },
    "multi_apps": {
        "gdrive": task("Upload it.", [{"type": "googledrive", "parameters": {"settings_file": "x.json"}}],
                       command_check("exact_match", ["echo", "ok"], {"expected": "ok\n"})),
    },
    "chrome": {
        "echo": task("Say ok.", [], command_check("exact_match", ["echo", "ok"], {"expected": "ok\n"})),
    },
}


def write_examples(root: Path, tasks: dict[str, dict[str, dict[str, Any]]]) -> Path:
    """An evaluation_examples folder as OSWorld lays it out: examples/DOMAIN/ID.json and test_x.json listing them."""
    for domain, by_id in tasks.items():
        (root / "examples" / domain).mkdir(parents=True, exist_ok=True)
        for task_id, body in by_id.items():
            (root / "examples" / domain / f"{task_id}.json").write_text(json.dumps({**body, "id": task_id}))
    index = root / "test_x.json"
    index.write_text(json.dumps({domain: list(by_id) for domain, by_id in tasks.items()}, indent=2))
    return index


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    with spec_seat(seat_users, SAY_DONE) as s:
        yield s


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_examples(tmp_path_factory.mktemp("osworld") / "evaluation_examples", TASKS)


def tasks_now(seat: SpecSeat) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(cuctl(seat.daemon.socket, "list", "--json").stdout)
    return listed


def test_what_converts_runs_and_every_other_task_is_listed_with_why_grouped_by_domain(
        seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(index), "--skip-unconvertible", "--out", str(out),
                 "--junit", str(junit), timeout=600)
    assert done.returncode == 1, (done.stdout, done.stderr)  # spotify failed: a failure wins over the errors
    assert "2 of 5 OSWorld tasks do not convert (--skip-unconvertible)" in done.stderr, done.stderr
    data = json.loads((out / "results.json").read_text())
    runs = {r["spec"]: r for r in data["runs"]}
    assert sorted(runs) == sorted(f"{d}/{i}" for d, ids in TASKS.items() for i in ids), list(runs)
    assert len(data["runs"]) == 5  # one attempt each: a refused one is never retried
    outcomes = {name: (r["state"], r["outcome"], r["verdict"]) for name, r in runs.items()}
    assert outcomes == {
        "os/note-kept": ("succeeded", "passed", "passed"),
        "os/spotify": ("succeeded", "failed", "failed"),
        "chrome/echo": ("succeeded", "passed", "passed"),
        # Not the app failing: cud has no counterpart, so nobody can tell (error), and it never ran.
        "os/unknown-metric": ("refused", "error", None),
        "multi_apps/gdrive": ("refused", "error", None),
    }, outcomes
    for name in ("os/unknown-metric", "multi_apps/gdrive"):
        assert runs[name]["task_id"] is None and runs[name]["error"]["kind"] == "not_converted", runs[name]
    assert "OSWorld metric 'no_such_metric' in evaluator.func has no counterpart in cud" in \
        runs["os/unknown-metric"]["error"]["message"]
    assert "OSWorld config type 'googledrive' in config[0] has no counterpart" in \
        runs["multi_apps/gdrive"]["error"]["message"]
    suite = data["suite"]
    assert suite["domains"] == {f"{d}/{i}": d for d, ids in TASKS.items() for i in ids}
    assert sorted(suite["not_converted"]) == ["multi_apps/gdrive", "os/unknown-metric"]

    # The counts add up, per domain and in all, to the index's tasks.
    listed = json.loads(index.read_text())
    summary = data["summary"]
    domains = {row["domain"]: row for row in summary["domains"]}
    assert list(domains) == list(listed)  # the index's order
    for domain, row in domains.items():
        assert row["tasks"] == len(listed[domain]), row
        assert row["tasks"] - row["converted"] == row["not_converted"], row
        assert row["passed"] + row["failed"] + row["error"] + row["not_converted"] == row["runs"] == row["tasks"], row
    assert [(domains[d]["tasks"], domains[d]["converted"], domains[d]["passed"], domains[d]["failed"],
             domains[d]["error"], domains[d]["pass_rate"]) for d in ("os", "multi_apps", "chrome")] == \
        [(3, 2, 1, 1, 0, 0.5), (1, 0, 0, 0, 0, None), (1, 1, 1, 0, 0, 1.0)]
    total = summary["total"]
    assert (total["tasks"], total["converted"], total["runs"], total["passed"], total["failed"], total["error"],
            total["not_converted"]) == (5, 3, 5, 2, 1, 0, 2), total
    assert total["tasks"] == sum(len(ids) for ids in listed.values())
    assert total["pass_rate"] == pytest.approx(2 / 3)  # over the runs told: what never ran is not a failure

    # The table: a row per domain and the total; then each task that did not convert, with why.
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    rows = {cells[0]: cells for cells in lines}
    assert rows["DOMAIN"][:7] == ["DOMAIN", "TASKS", "CONVERTED", "RUNS", "PASSED", "FAILED", "ERROR"], done.stdout
    assert rows["os"][1:7] == ["3", "2", "2", "1", "1", "0"], done.stdout
    assert rows["multi_apps"][1:7] == ["1", "0", "0", "0", "0", "0"], done.stdout
    assert rows["chrome"][1:7] == ["1", "1", "1", "1", "0", "0"], done.stdout
    assert rows["total"][1:7] == ["5", "3", "3", "2", "1", "0"], done.stdout
    assert "not converted (2), never run:" in done.stdout
    assert any(line.strip().startswith("os/unknown-metric: ") and "'no_such_metric'" in line
               for line in done.stdout.splitlines()), done.stdout
    assert any(line.strip().startswith("multi_apps/gdrive: ") and "'googledrive'" in line
               for line in done.stdout.splitlines()), done.stdout
    # The index: the domain table, and a row for each task not converted, with why.
    page = (out / "index.html").read_text()
    assert "<th>domain</th><th>tasks</th><th>converted</th>" in page
    assert page.count('<td class="error">error, not converted</td>') == 2, page
    assert "googledrive" in page and "no_such_metric" in page
    # JUnit: the two are errors (cud could not tell), the failed one a failure.
    junit_suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert (junit_suite.tests, junit_suite.failures, junit_suite.errors) == (5, 1, 2)

    # --resume: nothing more runs, the not converted stay listed (never converted again nor submitted).
    before = tasks_now(seat)
    resumed = cuctl(seat.daemon.socket, "eval", "--resume", str(out), timeout=120)
    assert resumed.returncode == 1, resumed.stderr
    assert tasks_now(seat) == before
    assert json.loads((out / "results.json").read_text())["runs"] == data["runs"]


def test_without_skip_unconvertible_the_first_bad_task_stops_the_suite_before_anything_is_submitted(
        seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    before = tasks_now(seat)
    refused = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(index), "--out", str(tmp_path / "out"))
    assert refused.returncode == 2, refused
    # The index's order: os/unknown-metric is the first that does not convert (gdrive comes after it).
    assert f"os/unknown-metric: {index.parent / 'examples' / 'os' / 'unknown-metric.json'}: OSWorld metric " \
           f"'no_such_metric'" in refused.stderr, refused.stderr
    assert "gdrive" not in refused.stderr and "Traceback" not in refused.stderr
    assert tasks_now(seat) == before and not (tmp_path / "out").exists()

    usage = cuctl(seat.daemon.socket, "eval", str(index), "--skip-unconvertible", "--out", str(tmp_path / "o2"))
    assert usage.returncode == 2 and "--skip-unconvertible is for OSWorld tasks" in usage.stderr, usage.stderr
    assert not (tmp_path / "o2").exists()


def test_a_task_the_index_lists_whose_file_is_missing_is_named(seat: SpecSeat, index: Path, tmp_path: Path) -> None:
    missing = index.parent / "test_missing.json"
    missing.write_text(json.dumps({"chrome": ["echo"], "os": ["note-kept", "not-there"]}))
    before = tasks_now(seat)
    for extra in ((), ("--skip-unconvertible",)):  # a missing file is not a task that does not convert
        done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(missing), *extra, "--out",
                     str(tmp_path / f"out{len(extra)}"))
        assert done.returncode == 2, done
        assert "lists task os/not-there" in done.stderr, done.stderr
        assert str(index.parent / "examples" / "os" / "not-there.json") in done.stderr
        assert not (tmp_path / f"out{len(extra)}").exists()
    assert tasks_now(seat) == before


def test_a_domain_folder_and_a_task_file_take_their_folder_as_domain(index: Path) -> None:
    examples = index.parent / "examples"
    found = plan_all([str(examples / "os"), str(examples / "chrome" / "echo.json")], osworld=True,
                     skip_unconvertible=True)
    assert [(type(p).__name__, p.domain) for p in found] == [("Planned", "os"), ("Planned", "os"),
                                                             ("Unconverted", "os"), ("Planned", "chrome")]
    assert osworld_index(examples / "chrome" / "echo.json") is None  # a task, told by its shape
    bad = index.parent / "test_bad.json"
    bad.write_text(json.dumps({"os": ["../escape"]}))
    with pytest.raises(ConfigError, match=r"os\[0\] is '../escape', not a task id"):
        plan_all([str(bad)], osworld=True)


convertible = st.booleans()
domains = st.dictionaries(st.sampled_from(["os", "chrome", "gimp", "vlc"]),
                          st.lists(convertible, min_size=1, max_size=4), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=domains, repeat=st.integers(1, 3))
def test_no_task_of_an_index_is_dropped(tmp_path_factory: pytest.TempPathFactory, layout: dict[str, list[bool]],
                                        repeat: int) -> None:
    """Whatever mix converts, every task of the index is a planned spec or listed as not converted, and the summary's
    counts add up to the index's total (per domain and in all), before a single run."""
    good = TASKS["chrome"]["echo"]
    bad = TASKS["os"]["unknown-metric"]
    tasks = {d: {f"t{i}": good if ok else bad for i, ok in enumerate(oks)} for d, oks in layout.items()}
    index = write_examples(tmp_path_factory.mktemp("ex"), tasks)
    found = plan_all([str(index)], osworld=True, skip_unconvertible=True)
    assert [p.name for p in found] == [f"{d}/{i}" for d, ids in tasks.items() for i in ids]
    args = Namespace(paths=[str(index)], model=None, from_osworld=True, max_cost=None, retry_errors=None,
                     skip_unconvertible=True)
    results = new_results(args, found, [], repeat)
    summary = results.summary()
    total = summary["total"]
    count = sum(len(oks) for oks in layout.values())
    unconverted = sum(1 for oks in layout.values() for ok in oks if not ok)
    assert (total["tasks"], total["converted"], total["runs"]) == (count, count - unconverted, count * repeat)
    assert total["not_converted"] == unconverted * repeat and total["judged"] == unconverted * repeat
    for row in summary["domains"]:
        assert row["tasks"] == len(layout[row["domain"]]) and row["runs"] == row["tasks"] * repeat, row
        assert row["converted"] == sum(layout[row["domain"]]), row
    assert sum(isinstance(p, Planned) for p in found) + sum(isinstance(p, Unconverted) for p in found) == count
