"""OSWorld's Chrome Preferences getters (cud/osworld/chrome_profile.py) against desktop-env 1.0.2's own
(tests/support/osworld_reference.py), on Hypothesis-made Preferences files, and converted from OSWorld's tasks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.osworld import chrome_profile
from cud.osworld.chrome import PROFILE, PROFILE_GETTERS, program
from cud.osworld.convert import convert_osworld
from cud.osworld.seat import SYSTEM_PYTHON
from cud.spec import parse_spec
from tests.support.osworld_reference import FakeVm, reference, reference_getter

GETTERS = sorted(PROFILE_GETTERS)


#: Where OSWorld's getters find Chrome's Preferences in the VM.
PREFERENCES_PATH = "/home/user/.config/google-chrome/Default/Preferences"

def theirs(name: str, content: bytes | None) -> Any:
    return reference_getter("chrome", f"get_{name}")(FakeVm(content=content, asked=PREFERENCES_PATH), {})


def ours(tmp: Path, content: bytes | None) -> Path:
    """A profile directory holding ``content`` as Default/Preferences (none when None)."""
    (tmp / "Default").mkdir(parents=True, exist_ok=True)
    prefs = tmp / "Default" / "Preferences"
    prefs.unlink(missing_ok=True)
    if content is not None:
        prefs.write_bytes(content)
    return tmp


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 6) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=6)


def tables(**keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A JSON object with any of ``keys``, or any JSON value where one was expected."""
    return st.fixed_dictionaries({}, optional=keys) | JSON


PREFERENCES = tables(
    enable_do_not_track=JSON,
    safebrowsing=tables(enabled=JSON, enhanced=JSON),
    session=tables(restore_on_startup=st.sampled_from([1, 4, 5, 5.0, "5", True]) | JSON),
    profile=tables(name=JSON | st.sampled_from(["Thomas", "Person 1"]), default_content_setting_values=JSON),
    default_search_provider_data=tables(template_url_data=tables(short_name=JSON | st.just("Bing"))),
)
CONTENT = (PREFERENCES.map(lambda data: json.dumps(data).encode()) | st.binary(max_size=20) | st.none()
           | st.just(b"{\"profile\": {\"name\": \"Zo\\u00eb\"}}"))


@pytest.mark.parametrize("name", GETTERS)
@settings(max_examples=150, deadline=None)
@given(content=CONTENT)
@example(content=None)
@example(content=b"[]")
@example(content=b'{"session": {}}')
def test_each_getter_gives_osworlds_value(tmp_path_factory: pytest.TempPathFactory, name: str,
                                          content: bytes | None) -> None:
    profile = ours(tmp_path_factory.mktemp("profile"), content)
    want = theirs(name, content)
    got = chrome_profile.read(str(profile), name)
    assert (type(got), got) == (type(want), want)


@pytest.mark.parametrize(("content", "name", "printed"), [
    (b'{"enable_do_not_track": true}', "enable_do_not_track", "true"),
    (b'{"profile": {"name": "Zo\\u00eb"}}', "profile_name", "Zoë"),
    (b'{"profile": {}}', "profile_name", ""),  # OSWorld's None
    (b'{"profile": {"name": 7}}', "profile_name", "7"),
    (None, "data_delete_automacally", "Google"),
    (b'{"default_search_provider_data": {"template_url_data": {"short_name": "Bing"}}}', "default_search_engine",
     "Bing"),
])
def test_the_program_prints_the_value_as_the_metric_gets_it(tmp_path: Path, content: bytes | None, name: str,
                                                            printed: str) -> None:
    profile = ours(tmp_path / "chromium", content)
    done = subprocess.run([SYSTEM_PYTHON, "-c", program("chrome_profile"), str(profile), name], capture_output=True,
                          timeout=60, check=True)
    assert done.stdout.decode() == printed
    want = theirs(name, content)
    # The verdict the task's metric gives on what the program printed is OSWorld's on the getter's value.
    for expected in ("true", "false", "Google", "Bing", "Zoë", "Thomas"):
        assert reference("exact_match")(printed, {"expected": expected}) == \
            reference("exact_match")(want, {"expected": expected})


#: OSWorld's chrome tasks whose check reads the Preferences: (id, getter, metric, expected rules).
TASKS = [
    ("030eeff7-b492-4218-b312-701ec99ee0cc", "enable_do_not_track", "exact_match", {"expected": "true"}),
    ("2ae9ba84-3a0d-4d4c-8338-3a1478dc5fe3", "profile_name", "exact_match", {"expected": "Thomas"}),
    ("99146c54-4f37-4ab8-9327-5f3291665e1e", "data_delete_automacally", "exact_match", {"expected": "true"}),
    ("bb5e4c0d-f964-439c-97b6-bdb9747de3f4", "default_search_engine", "match_in_list",
     {"expected": ["Microsoft Bing", "Bing"]}),
]
LAUNCH = {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}}


@pytest.mark.parametrize(("task_id", "getter", "metric", "rules"), TASKS)
def test_osworlds_preferences_tasks_convert(task_id: str, getter: str, metric: str, rules: dict[str, Any]) -> None:
    raw = {"id": task_id, "instruction": "x",  # config and evaluator as OSWorld's chrome/ID.json has them
           "config": [LAUNCH, {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork",
                                                                            "tcp:localhost:1337"]}}],
           "evaluator": {"postconfig": [{"type": "launch", "parameters": {"command": ["pkill", "chrome"]}}, LAUNCH,
                                        {"type": "sleep", "parameters": {"seconds": 3}}],
                         "func": metric, "result": {"type": getter}, "expected": {"type": "rule", "rules": rules}}}
    converted = convert_osworld(raw, source="t.json", fetch=lambda url: b"")
    parse_spec(dict(converted))
    assert converted["checks"] == [{
        "name": f"{metric} on {getter}", "metric": metric, "expected": {"value": rules},
        "result": {"command": [SYSTEM_PYTHON, "-c", program("chrome_profile"), PROFILE, getter]}}]
    assert converted["postconfig"][:2] == [{"launch": ["pkill", "chromium"]},
                                           {"launch": ["chromium", "--remote-debugging-port=0"]}]
