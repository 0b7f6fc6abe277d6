"""OSWorld's task files converted to specs (cud/osworld/convert.py): each supported type, and refusals by name.

The task files are the project's own, written in OSWorld's format (tests/data/osworld/);
downloads come from a loopback HTTP server this module starts and stops.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.convert import ANY_STATUS, LIST_TREE, convert_osworld, fetch_url, load_osworld
from cud.spec import parse_spec
from cud.spec.matching import Match
from tests.support.http_files import serve_files

DATA = Path(__file__).parent / "data" / "osworld"
FILES = {"/notes.txt": b"first line\n", "/notes-done.txt": b"first line\ndone\n", "/big": b"x" * (300 * 1024)}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A loopback HTTP server serving FILES (and a redirect to ftp:, which urllib alone would follow); its URL."""
    with serve_files(FILES, {"/elsewhere": "ftp://127.0.0.1/x"}) as served:
        yield served.base


def task_file(name: str, base: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text().replace("http://127.0.0.1:{port}", base))


def task(config: list[Any] | None = None, evaluator: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "t-1", "instruction": "do it", "config": config or [],
            "evaluator": evaluator or {"func": "exact_match",
                                       "result": {"type": "vm_command_line", "command": ["true"]},
                                       "expected": {"type": "rule", "rules": {"expected": ""}}}}


def no_fetch(url: str) -> bytes:
    raise AssertionError(f"nothing should be fetched, got {url}")


def convert(raw: dict[str, Any], fetch: Any = no_fetch) -> dict[str, Any]:
    converted = convert_osworld(raw, source="t.json", fetch=fetch)
    parse_spec(dict(converted))  # every conversion is a spec
    return converted


def step(config: dict[str, Any]) -> dict[str, Any]:
    (only,) = convert(task([config]))["setup"]
    return only


def test_the_projects_task_file_converts_every_supported_kind(server: str) -> None:
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return fetch_url(url)

    converted = convert(task_file("edit_notes.json", server), fetch)
    assert converted["prompt"].startswith("Open notes.txt")
    assert converted["tags"] == ["osworld", "cud-edit-notes-0001"] and converted["reset"] is True
    assert converted["setup"][0] == {"files": [{"src": f"{server}/notes.txt", "dest": "Desktop/notes.txt"}]}
    assert converted["setup"][1] == {"run": ["mkdir", "-p", "Documents/empty"]}
    assert converted["setup"][2] == {"launch": ["mousepad", "Desktop/notes.txt"]}
    assert converted["setup"][3]["run"][:3] == ["xdotool", "search", "--sync"]
    assert converted["setup"][4] == {"sleep": 0.5}
    assert converted.files == {f"{server}/notes.txt": b"first line\n", f"{server}/notes-done.txt": FILES["/notes-done.txt"]}
    assert sorted(fetched) == sorted(converted.files)  # each URL fetched once, on this side
    file_check, grep, tail, tree = converted["checks"]
    assert file_check == {"name": "compare_text_file on vm_file", "file": "Desktop/notes.txt",
                          "equals": f"{server}/notes-done.txt"}
    assert grep["command"] == [*ANY_STATUS, "grep", "-c", "done", "Desktop/notes.txt"]
    assert grep["output"] == {"include": ["1"], "exclude": ["0"]}
    assert tail["command"] == [*ANY_STATUS, "/bin/sh", "-c", "tail -n 1 ~/Desktop/notes.txt"]
    assert Match.parse(tail["output"]["matches"]).test("done\n")
    assert not Match.parse(tail["output"]["matches"]).test("done\n\n")
    assert tree["command"] == [*LIST_TREE, "Documents"]
    assert Match.parse(tree["output"]["matches"]).test("d empty\n")


def test_load_osworld_gives_what_load_spec_gives(server: str, tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task_file("edit_notes.json", server)))
    spec, files = load_osworld(path)
    assert set(files) == set(spec.local_files()) == {f"{server}/notes.txt", f"{server}/notes-done.txt"}
    assert spec.needs_session


@pytest.mark.parametrize("kind", ["execute", "command"])
def test_execute_and_command_run_an_argv_a_split_string_or_a_shell_string(kind: str) -> None:
    assert step({"type": kind, "parameters": {"command": ["ls", "~/Desktop"], "timeout": 9}}) == \
        {"run": ["ls", "Desktop"], "timeout": 9}
    assert step({"type": kind, "parameters": {"command": "touch /home/user/a.txt"}}) == {"run": ["touch", "a.txt"]}
    assert step({"type": kind, "parameters": {"command": "echo hi > ~/a", "shell": True}}) == \
        {"run": ["/bin/sh", "-c", "echo hi > ~/a"]}


def test_launch_open_sleep_and_activate_window() -> None:
    assert step({"type": "launch", "parameters": {"command": "xterm -e true"}}) == {"launch": ["xterm", "-e", "true"]}
    assert step({"type": "open", "parameters": {"path": "/home/user/Desktop/a b.txt"}}) == {"open": "Desktop/a b.txt"}
    assert step({"type": "sleep", "parameters": {"seconds": 3}}) == {"sleep": 3}
    run = step({"type": "activate_window", "parameters": {"window_name": "a.txt (x)", "strict": True}})["run"]
    assert run[run.index("--name") + 1] == r"^a\.txt \(x\)$"
    run = step({"type": "activate_window", "parameters": {"window_name": "Mousepad", "by_class": True}})["run"]
    assert run[run.index("--class") + 1] == "Mousepad" and run[-1] == "windowactivate"


def test_compare_text_file_options_become_one_pattern_over_the_file() -> None:
    evaluator = {"func": "compare_text_file", "options": {"ignore_blanks": True, "ignore_case": True},
                 "result": {"type": "vm_file", "path": "/home/user/a.txt", "dest": "a.txt"},
                 "expected": {"type": "cloud_file", "path": "https://example.invalid/a.txt", "dest": "a.txt"}}
    (check,) = convert(task(evaluator=evaluator), lambda url: b"Hello   World\n")["checks"]
    pattern = Match.parse(check["matches"])
    assert pattern.test("  hello\tworld") and pattern.test("HELLO\n\nWORLD\n")
    assert not pattern.test("helloworld") and not pattern.test("hello world again")


def refused(raw: object, *names: str, fetch: Any = no_fetch) -> str:
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=fetch)  # type: ignore[arg-type]
    message = caught.value.message
    for name in names:
        assert name in message, message
    return message


def test_the_unsupported_task_file_is_refused_naming_the_type(server: str) -> None:
    message = refused(task_file("unsupported.json", server), "'googledrive'", "config[1]")
    assert message.startswith("t.json: OSWorld config type 'googledrive' in config[1] has no counterpart in cud")


@pytest.mark.parametrize(("evaluator", "names"), [
    ({"func": "infeasible"}, ["'infeasible'"]),
    ({"func": "check_include_exclude", "result": {"type": "vm_terminal_output"},
      "expected": {"type": "rule", "rules": {}}}, ["getter 'vm_terminal_output'"]),
    ({"func": "exact_match", "result": {"type": "vm_file", "path": "/home/user/a", "dest": "a"},
      "expected": {"type": "rule", "rules": {"expected": "x"}}}, ["'exact_match' on the getter 'vm_file'"]),
    ({"func": "compare_text_file", "result": {"type": "vm_file", "path": "/home/user/a", "dest": "a"},
      "expected": {"type": "vm_file", "path": "/home/user/b", "dest": "b"}}, ["expected type 'vm_file'"]),
    ({"func": ["exact_match"], "conj": "or", "result": [{}], "expected": [{}]}, ["conj 'or'"]),
    ({"func": "exact_match", "postconfig": [{"type": "sleep", "parameters": {"seconds": 1}}]}, ["'postconfig'"]),
    ({"func": "exact_match", "result": {"type": "vm_command_line", "command": ["true"]},
      "expected": {"type": "rule", "rules": {"expected": "x"}}, "options": {"fuzzy": 1}}, ["'fuzzy'"]),
])
def test_unsupported_evaluators_are_refused_by_name(evaluator: dict[str, Any], names: list[str]) -> None:
    refused(task(evaluator=evaluator), *names)


@pytest.mark.parametrize("path", ["/tmp/a.txt", "/home/other/a", "relative.txt", "/home/user/../etc/passwd",
                                  "/home/user/", "~", "/root/x"])
def test_paths_outside_the_vm_users_home_are_refused_naming_them(path: str) -> None:
    refused(task([{"type": "open", "parameters": {"path": path}}]), repr(path), "config[0].parameters.path")


def test_arguments_and_shell_text_that_hold_the_vm_home_elsewhere_are_refused() -> None:
    refused(task([{"type": "execute", "parameters": {"command": ["cp", "--target=/home/user/x", "a"]}}]),
            "'--target=/home/user/x'", "config[0].parameters.command[1]")
    refused(task([{"type": "execute", "parameters": {"command": "cat /home/user/a", "shell": True}}]),
            "shell command naming '/home/user'")


def test_an_argument_naming_the_home_itself_or_a_directory_with_its_slash_maps_onto_the_home() -> None:
    """Commands run in the home: /home/user and /home/user/ are '.', and /home/user/Desktop/ keeps its slash (cp then
    insists on a directory there, as in OSWorld's VM)."""
    argv = ["cp", "/home/user/a", "/home/user/", "/home/user", "/home/user/Desktop/", "~/b/"]
    (only,) = convert(task([{"type": "execute", "parameters": {"command": argv}}]))["setup"]
    assert only["run"] == ["cp", "a", ".", ".", "Desktop/", "b/"]
    refused(task([{"type": "execute", "parameters": {"command": ["ls", "/home/user//"]}}]), "'/home/user//'")
    refused(task([{"type": "execute", "parameters": {"command": ["ls", "/home/user/a/../../etc/"]}}]),
            "'/home/user/a/../../etc/'")


def test_for_seats_that_see_their_home_at_home_user_commands_run_as_written() -> None:
    """``as_written`` (every seat a suite uses has home_path = "/home/user"): what the task wrote is what runs, and
    only the paths cud itself reads and writes are paths in the home."""
    raw = task([{"type": "execute", "parameters": {"command": "cat /home/user/a ~/b", "shell": True}},
                {"type": "execute", "parameters": {"command": ["cp", "--target=/home/user/x", "~/a"]}},
                {"type": "open", "parameters": {"path": "/home/user/a.txt"}}])
    converted = convert_osworld(raw, source="t.json", fetch=no_fetch, as_written=True)
    parse_spec(dict(converted))
    shell, argv, opened = converted["setup"]
    assert shell["run"] == ["/bin/sh", "-c", "cat /home/user/a ~/b"]
    assert argv["run"] == ["cp", "--target=/home/user/x", "~/a"]
    assert opened == step({"type": "open", "parameters": {"path": "/home/user/a.txt"}})  # a path in the home


def test_downloads_are_bounded_http_only_and_failures_name_the_url(server: str) -> None:
    assert fetch_url(f"{server}/notes.txt") == b"first line\n"
    for url, why in [(f"{server}/big", "larger than"), (f"{server}/missing", "Not Found"),
                     ("file:///etc/passwd", "only http and https"), (f"{server}/elsewhere", "not http or https")]:
        message = refused(task([{"type": "download", "parameters": {"files": [{"url": url, "path": "~/a"}]}}]),
                          repr(url), why, "config[0].parameters.files[0].url",
                          fetch=lambda url: fetch_url(url, limit=256 * 1024))
        assert "Traceback" not in message


CONFIG_TYPES = ("launch", "execute", "command", "open", "download", "sleep", "activate_window")
METRICS = ("check_include_exclude", "exact_match", "compare_text_file")
GETTERS = ("vm_command_line", "vm_file", "list_directory")


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda s: s not in CONFIG_TYPES), st.sampled_from(["config", "func",
                                                                                                   "getter"]))
@example("googledrive", "config")
@example("chrome_open_tabs", "config")
@example("vm_terminal_output", "getter")
@example("compare_table", "func")
def test_every_unsupported_type_name_is_refused_naming_it(name: str, where: str) -> None:
    raw = task()
    if where == "config":
        raw["config"] = [{"type": "sleep", "parameters": {"seconds": 1}}, {"type": name, "parameters": {}}]
        refused(raw, repr(name), "config[1]")
    elif name not in METRICS and where == "func":
        raw["evaluator"]["func"] = name
        refused(raw, repr(name), "metric")
    elif name not in GETTERS:
        raw["evaluator"]["result"]["type"] = name
        refused(raw, repr(name), "getter")


def junk() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)


def paths_in(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_in(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_in(item, (*at, index))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_malformed_tasks_are_refused_never_a_traceback(data: st.DataObject) -> None:
    raw = json.loads(json.dumps(task_file("edit_notes.json", "http://127.0.0.1:1")))
    where = data.draw(st.sampled_from(list(paths_in(raw))))
    mutated = copy.deepcopy(raw)
    if where:
        target: Any = mutated
        for part in where[:-1]:
            target = target[part]
        target[where[-1]] = data.draw(junk())
    else:
        mutated = data.draw(junk())
    try:
        converted = convert_osworld(mutated, source="t.json", fetch=lambda url: b"first line\n")
    except SpecError as exc:
        assert exc.message.startswith("t.json: ") and exc.message.strip()
        return
    parse_spec(dict(converted))  # what it does convert is a spec


def test_a_refusal_names_the_converted_key_when_the_spec_itself_refuses() -> None:
    message = refused(task([{"type": "sleep", "parameters": {"seconds": 600}}]), "setup[0].sleep")
    assert re.search(r"at most 60", message)


def test_submit_takes_one_of_spec_and_from_osworld_and_no_prompt_beside_it(tmp_path: Path) -> None:
    from argparse import Namespace

    from cud.cuctl.tasks import _spec_fields
    from cud.errors import ConfigError

    path = tmp_path / "t.json"
    path.write_text(json.dumps(task([{"type": "sleep", "parameters": {"seconds": 1}}])))
    fields, files = _spec_fields(Namespace(prompt=None, spec=None, from_osworld=str(path), seat=None), lambda: [])
    assert files == {}
    assert fields["prompt"] == "do it" and fields["spec"]["setup"] == [{"sleep": 1.0}]
    with pytest.raises(ConfigError, match="--spec or --from-osworld, not both"):
        _spec_fields(Namespace(prompt=None, spec="a.toml", from_osworld=str(path)), lambda: [])
    with pytest.raises(ConfigError, match="a PROMPT or --from-osworld, not both"):
        _spec_fields(Namespace(prompt="hi", spec=None, from_osworld=str(path)), lambda: [])


def test_a_suite_runs_commands_as_written_only_when_every_seat_it_uses_sees_home_user() -> None:
    from cud.osworld.convert import sees_home_user

    seats: list[Any] = [{"name": "a", "home_path": "/home/user"}, {"name": "b", "home_path": None},
                        {"name": "c", "home_path": "/home/user"}]
    assert not sees_home_user(seats, None)  # b would take runs too
    assert sees_home_user(seats, ["a", "c"]) and sees_home_user(seats, ["c"])
    assert not sees_home_user(seats, ["a", "b"])
    assert not sees_home_user([], None) and not sees_home_user(None, None)  # a fleet: its nodes' seats unknown here
    assert not sees_home_user([{"name": "a", "home_path": "/home/alice"}], None)
