"""bench/osworld_coverage.py: a tiny evaluation_examples tree in OSWorld's format, counted without the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import osworld_coverage

CHECK = {"func": "check_include_exclude",
         "result": {"type": "vm_command_line", "command": ["cat", "/home/user/n.txt"]},
         "expected": {"type": "rule", "rules": {"include": ["42"], "exclude": []}}}
TASKS = {
    "os": {
        "converts": {"id": "converts", "instruction": "Write 42 into n.txt.",
                     "config": [{"type": "download", "parameters": {"files": [
                         {"url": "https://example.invalid/n.txt", "path": "/home/user/n.txt"}]}}],
                     "evaluator": CHECK},
        "metric": {"id": "metric", "instruction": "Do what cannot be done.", "config": [],
                   "evaluator": {"func": "infeasible", "result": {}, "expected": {}}},
    },
    "chrome": {
        "config": {"id": "config", "instruction": "Open the drive.",
                   "config": [{"type": "googledrive", "parameters": {"settings_file": "x.json"}}], "evaluator": CHECK},
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


def test_json_counts_and_first_blockers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the coverage must not touch the network")
    monkeypatch.setattr("urllib.request.urlopen", no_network)
    monkeypatch.setattr("cud.osworld.convert.fetch_url", no_network)
    assert osworld_coverage.main([str(tree(tmp_path)), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["total"] == {"tasks": 4, "converted": 1, "rate": 0.25}
    assert result["domains"]["os"] == {"tasks": 2, "converted": 1, "rate": 0.5,
                                       "reasons": {"metric 'infeasible'": 1}}
    assert result["domains"]["chrome"]["converted"] == 0
    assert result["reasons"] == {"metric 'infeasible'": 1, "config type 'googledrive'": 1,
                                 "evaluator.postconfig": 1}
    assert result["counted"] == "first blocker per task"


def test_table_and_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tree(tmp_path)
    assert osworld_coverage.main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert "| **total** | 4 | 1 | 25.0% |" in out
    assert "| config type 'googledrive' | 1 |" in out
    assert "first blocker only" in out
    assert osworld_coverage.main([str(folder), "--index", "test_small.json", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == {"tasks": 1, "converted": 1, "rate": 1.0}
