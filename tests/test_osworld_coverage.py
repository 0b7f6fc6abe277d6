"""bench/osworld_coverage.py: a tiny evaluation_examples tree in OSWorld's format, counted without the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import osworld_coverage
from cud.osworld.convert import osworld_blockers

CHECK = {"func": "check_include_exclude",
         "result": {"type": "vm_command_line", "command": ["cat", "/home/user/n.txt"]},
         "expected": {"type": "rule", "rules": {"include": ["42"], "exclude": []}}}
TASKS = {
    "os": {
        "converts": {"id": "converts", "instruction": "Write 42 into n.txt.",
                     "config": [{"type": "download", "parameters": {"files": [
                         {"url": "https://example.invalid/n.txt", "path": "/home/user/n.txt"}]}}],
                     "evaluator": CHECK},
        "infeasible": {"id": "infeasible", "instruction": "Do what cannot be done.", "config": [],
                       "evaluator": {"func": "infeasible", "result": {}, "expected": {}}},
    },
    "chrome": {
        "config": {"id": "config", "instruction": "Open the drive.",
                   "config": [{"type": "googledrive", "parameters": {"settings_file": "x.json"}}], "evaluator": CHECK},
        "several": {"id": "several", "instruction": "Open the drive and look.",
                    "config": [{"type": "googledrive", "parameters": {}}, {"type": "sleep", "parameters": {"seconds": 1}},
                               {"type": "googledrive", "parameters": {}}],
                    "evaluator": {"func": ["compare_audios", "exact_match"],
                                  "result": [{"type": "vm_file", "path": "/home/user/a.png"},
                                             {"type": "vm_terminal_output"}],
                                  "expected": [{"type": "rule", "rules": {}}, {"type": "rule", "rules": {}}]}},
        "postconfig": {"id": "postconfig", "instruction": "Save it.", "config": [],
                       "evaluator": {**CHECK, "postconfig": [{"type": "sleep", "parameters": {"seconds": 1}}]}},
    },
}


def tree(root: Path) -> Path:
    folder = root / "evaluation_examples"
    for domain, tasks in TASKS.items():
        (folder / "examples" / domain).mkdir(parents=True)
        for task_id, task in tasks.items():
            (folder / "examples" / domain / f"{task_id}.json").write_text(json.dumps(task))
    (folder / "test_all.json").write_text(json.dumps({d: list(t) for d, t in TASKS.items()}))
    (folder / "test_small.json").write_text(json.dumps({"os": ["converts"]}))
    return folder


def test_json_counts_every_blocker_per_task(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the coverage must not touch the network")
    monkeypatch.setattr("urllib.request.urlopen", no_network)
    monkeypatch.setattr("cud.osworld.convert.fetch_url", no_network)
    assert osworld_coverage.main([str(tree(tmp_path)), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["total"] == {"tasks": 5, "converted": 3, "rate": 0.6}
    assert result["domains"]["os"] == {"tasks": 2, "converted": 2, "rate": 1.0, "reasons": {}}
    assert result["domains"]["chrome"] == {"tasks": 3, "converted": 1, "rate": 0.3333, "reasons": {
        "config type 'googledrive'": 2, "metric 'compare_audios'": 1, "getter 'vm_terminal_output'": 1}}
    assert result["reasons"] == {"config type 'googledrive'": {"tasks": 2, "alone": 1},
                                 "getter 'vm_terminal_output'": {"tasks": 1, "alone": 0},
                                 "metric 'compare_audios'": {"tasks": 1, "alone": 0}}
    assert result["counted"] == "every blocker per task"


def test_table_and_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tree(tmp_path)
    assert osworld_coverage.main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert "| **total** | 5 | 3 | 60.0% |" in out
    assert "| config type 'googledrive' | 2 | 1 |" in out
    assert "each class of its blockers" in out
    assert osworld_coverage.main([str(folder), "--index", "test_small.json", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == {"tasks": 1, "converted": 1, "rate": 1.0}


@pytest.mark.parametrize(("evaluator", "config", "why"), [
    ({"func": "compare_csv", "result": {"type": "vm_file", "path": "/home/user/a.csv"},
      "expected": {"type": "rule", "rules": {}}, "options": {"rules": []}}, [], "compare_csv option 'rules'"),
    ({**CHECK, "options": {"rules": []}}, [], "OSWorld check_include_exclude option key 'rules'"),
    (CHECK, [{"type": "execute", "parameters": {"command": ["ls"], "stdout": "x"}}], "'execute' parameter 'stdout'"),
    (CHECK, [{"type": "execute", "parameters": {"command": "sudo -S {CLIENT_PASSWORD}"}}],
     "{CLIENT_PASSWORD} (a sudo password)"),
    ({"func": "compare_table", "result": {"type": "vm_file", "path": ["/home/user/a", "/home/user/b"], "multi": True,
                                          "dest": ["a", "a"]}, "expected": {"type": "rule", "rules": {}}}, [],
     "a multi getter's path, dest or gives"),
    (CHECK, [{"type": "open", "parameters": {"path": "/tmp/x"}}], "path (outside /home/user, or with '..')"),
    ({**CHECK, "hint": 1}, [], "OSWorld evaluator key 'hint'"),
])
def test_each_kind_of_refusal_has_its_class(evaluator: dict[str, object], config: list[object], why: str) -> None:
    (blocker,) = osworld_blockers({"id": "x", "instruction": "x", "config": config, "evaluator": evaluator},
                                  source="x.json", fetch=osworld_coverage.no_fetch)
    assert osworld_coverage.reason(blocker) == why
