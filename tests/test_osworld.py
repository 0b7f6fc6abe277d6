"""OSWorld's task files converted to specs (cud/osworld/convert.py, steps.py): the config steps, paths, placeholders.

The task files are the project's own, written in OSWorld's format (tests/data/osworld/ and here);
downloads come from a loopback HTTP server this module starts and stops. The checks are
tests/test_osworld_checks.py.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.convert import (
    INFEASIBLE_TIP,
    SCREEN,
    convert_osworld,
    fetch_url,
    load_osworld,
    osworld_blockers,
    seats_screen,
    sees_home_user,
)
from cud.osworld.evaluator import INFEASIBLE_WORDS
from cud.osworld.steps import ACTIVATE_OPENED, ANY_STATUS, HAS_PACKAGES, HOME_REWRITE, RUN_SECONDS, wrap
from cud.spec import parse_spec
from cud.spec.matching import Match
from tests.support.http_files import serve_files

DATA = Path(__file__).parent / "data" / "osworld"
FILES = {"/notes.txt": b"first line\n", "/notes-done.txt": b"first line\ndone\n", "/big": b"x" * (300 * 1024)}
RUN = ANY_STATUS[2]  # the body of a command run as OSWorld runs it: 120 s, any status


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


def convert(raw: dict[str, Any], fetch: Any = no_fetch, **kw: Any) -> dict[str, Any]:
    converted = convert_osworld(raw, source="t.json", fetch=fetch, **kw)
    parse_spec(dict(converted))  # every conversion is a spec
    return converted


def steps(config: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    return list(convert(task([config]), **kw)["setup"])


def step(config: dict[str, Any], **kw: Any) -> dict[str, Any]:
    (only,) = steps(config, **kw)
    return only


def refused(raw: object, *names: str, fetch: Any = no_fetch) -> str:
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=fetch)  # type: ignore[arg-type]
    message = caught.value.message
    for name in names:
        assert name in message, message
    return message


def run_rewritten(args: list[str], home: str) -> list[str]:
    """What HOME_REWRITE hands its command, run for real by /bin/sh with HOME set: one line per argument."""
    done = subprocess.run(wrap('printf "%s\\0" "$@"', args, rewrite=True), capture_output=True,
                          env={**os.environ, "HOME": home}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


# -- the task ------------------------------------------------------------------------------------


def test_the_projects_task_file_converts_every_step_and_check(server: str) -> None:
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return fetch_url(url)

    converted = convert(task_file("edit_notes.json", server), fetch)
    assert converted["prompt"] == ("Open notes.txt on the Desktop in the editor, add a line 'done' at the end and "
                                   f"save.\n\n{INFEASIBLE_TIP}")
    assert converted["tags"] == ["osworld", "cud-edit-notes-0001"] and converted["reset"] is True
    assert converted["screen"] == "1920x1080"  # OSWorld's VM's screen, unless told another
    download, mkdir, launch, activate, sleep = converted["setup"]
    assert download == {"files": [{"src": f"{server}/notes.txt", "dest": "Desktop/notes.txt"}]}
    assert mkdir == {"run": wrap(RUN, ["mkdir", "-p", "/home/user/Documents/empty"], rewrite=True),
                     "timeout": RUN_SECONDS}
    assert launch == {"launch": wrap('exec "$@"', ["mousepad", "/home/user/Desktop/notes.txt"], rewrite=True)}
    assert activate == {"run": [*ANY_STATUS, "wmctrl", "-a", "notes.txt"], "timeout": RUN_SECONDS}
    assert sleep == {"sleep": 0.5}
    assert converted.files == {f"{server}/notes.txt": b"first line\n"}
    assert sorted(fetched) == sorted(converted.files)  # each URL fetched once, on this side
    assert len(converted["checks"]) == 4


def test_load_osworld_gives_what_load_spec_gives(server: str, tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task_file("edit_notes.json", server)))
    spec, files = load_osworld(path, screen=(1280, 800))
    assert set(files) == set(spec.local_files()) == {f"{server}/notes.txt"}
    assert spec.needs_session and spec.screen == "1280x800"


def test_the_prompt_carries_openai_runners_tip_with_the_words_the_infeasible_check_looks_for() -> None:
    assert any(word in INFEASIBLE_TIP.lower() for word in INFEASIBLE_WORDS)


def test_informational_keys_and_notes_are_ignored_and_an_unknown_key_is_refused() -> None:
    raw = {**task(), "hint": "the unit is cm", "env_may_change": True, "snapshot": "os", "proxy": False}
    assert convert(raw)["prompt"].startswith("do it")
    refused({**task(), "hints": "x"}, "OSWorld task key 'hints'")


# -- config steps --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["execute", "command"])
def test_execute_and_command_run_for_120_s_whatever_their_status(kind: str) -> None:
    """SetupController._execute_setup never reads returncode; server/main.py's execute_command: timeout=120."""
    assert step({"type": kind, "parameters": {"command": ["ls", "-l"]}}) == \
        {"run": [*ANY_STATUS, "ls", "-l"], "timeout": RUN_SECONDS}
    assert ANY_STATUS[2] == 'timeout 120 "$@"; exit 0'
    # A string is split as the server splits it: shlex, quotes kept together.
    assert step({"type": kind, "parameters": {"command": "touch 'a b.txt' c"}})["run"] == \
        [*ANY_STATUS, "touch", "a b.txt", "c"]
    assert step({"type": kind, "parameters": {"command": "echo hi > ~/a", "shell": True}})["run"] == \
        [*ANY_STATUS, "/bin/sh", "-c", "echo hi > ~/a"]
    # "shell": "true" is true to the server (Python's truth value).
    assert step({"type": kind, "parameters": {"command": "echo hi", "shell": "true"}})["run"][-3:] == \
        ["/bin/sh", "-c", "echo hi"]


SUDO = "echo {CLIENT_PASSWORD} | sudo -S "


@pytest.mark.parametrize(("command", "packages", "rest"), [
    # the forms OSWorld's task files use (chrome 3299584d, multi_apps 716a6079 and a74b607e, os 5812b315)
    (f"{SUDO}apt update -y && {SUDO}apt install jq -y", ["jq"], None),
    (f"{SUDO}apt install xsel && xsel -bc", ["xsel"], "xsel -bc"),
    (f"{SUDO}apt-get update -y && {SUDO}apt-get install unzip -y && unzip /home/user/Desktop/x.zip -d "
     f"/home/user/Desktop/ && rm /home/user/Desktop/x.zip", ["unzip"],
     "unzip /home/user/Desktop/x.zip -d /home/user/Desktop/ && rm /home/user/Desktop/x.zip"),
    (f"{SUDO}apt-get install -y expect libc6 expect", ["expect", "libc6"], None),
])
def test_a_sudo_install_becomes_a_check_that_the_seat_has_the_packages(command: str, packages: list[str],
                                                                       rest: str | None) -> None:
    """A seat's user has no sudo: the template provides what the task installs, and setup checks it does."""
    made = steps({"type": "execute", "parameters": {"command": command, "shell": True}})
    assert made[0] == {"run": [*HAS_PACKAGES, *packages], "timeout": RUN_SECONDS}
    if rest is None:
        assert len(made) == 1
    else:
        assert len(made) == 2 and made[1]["run"][-3:] == ["/bin/sh", "-c", rest]


@pytest.mark.parametrize("command", [
    f"{SUDO}su - charles",  # os a462a795: root's own doing
    f"{SUDO}mkdir ~/Desktop/todo",  # os e0df059f: a folder root owns, in the home
    f"{SUDO}pip install pysrt",  # multi_apps 9f3bb592: not a Debian package
    f"{SUDO}apt install jq; {SUDO}true",  # only && chains are read
    f"true && {SUDO}apt install $(cat list)",  # shell text is no package name
])
def test_any_other_use_of_the_sudo_password_is_refused(command: str) -> None:
    refused(task([{"type": "execute", "parameters": {"command": command, "shell": True}}]), "{CLIENT_PASSWORD}",
            "config[0].parameters.command")


def test_a_sudo_install_of_what_is_no_package_name_is_refused_naming_it() -> None:
    refused(task([{"type": "execute", "parameters": {"command": f"{SUDO}apt install Jq_1", "shell": True}}]),
            "'Jq_1'", "not a Debian package's name")


def test_the_package_check_passes_on_installed_packages_and_names_a_missing_one() -> None:
    """HAS_PACKAGES run for real against this machine's dpkg database."""
    ok = subprocess.run([*HAS_PACKAGES, "dpkg", "coreutils"], capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout) == (0, "")
    missing = subprocess.run([*HAS_PACKAGES, "coreutils", "cud-no-such-package", "dpkg"], capture_output=True,
                             text=True, check=False)
    assert missing.returncode == 1
    assert missing.stdout == ("the seat lacks the Debian package cud-no-such-package, which the OSWorld task installs "
                              "as root (sandbox/deps.sh --profile osworld installs it)\n")


def test_a_command_exits_0_whatever_its_status_and_is_stopped_after_its_timeout() -> None:
    done = subprocess.run([*ANY_STATUS, "sh", "-c", "echo out; exit 3"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "out\n")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1,
                        max_size=12), min_size=1, max_size=6))
def test_a_string_command_is_split_as_shlex_splits_it(words: list[str]) -> None:
    words = [w.replace("{", "(") for w in words]  # no placeholder here: they have their own test
    argv = step({"type": "execute", "parameters": {"command": shlex.join(words)}}, as_written=True)["run"]
    assert argv[len(ANY_STATUS):] == [f"/home/user{w[1:]}" if w.startswith("~/") else w for w in words]


def test_launch_splits_a_string_at_whitespace_as_the_setup_controller_does() -> None:
    """SetupController._launch_setup: ``command.split()`` for several words (quotes stay in the words)."""
    assert step({"type": "launch", "parameters": {"command": "xterm -title 'a b'"}}) == \
        {"launch": ["xterm", "-title", "'a", "b'"]}
    assert step({"type": "launch", "parameters": {"command": "'xterm'"}}) == {"launch": ["xterm"]}  # one word: shlex
    assert step({"type": "launch", "parameters": {"command": ["gimp"], "shell": False}}) == {"launch": ["gimp"]}
    assert step({"type": "launch", "parameters": {"command": "sleep 1 &", "shell": True}}) == \
        {"launch": ["/bin/sh", "-c", "sleep 1 &"]}


def test_open_waits_for_a_window_holding_the_files_name_and_activates_it() -> None:
    """server/main.py open_file: xdg-open, then the first window whose line holds the name without its extension."""
    opened, activated = steps({"type": "open", "parameters": {"path": "/home/user/Desktop/a (1).xlsx"}})
    assert opened == {"open": "Desktop/a (1).xlsx", "wait_for": {"window_title": r"re:a\ \(1\)", "timeout": 300}}
    assert activated == {"run": [*ACTIVATE_OPENED, "a (1)"], "timeout": RUN_SECONDS}
    assert Match.parse(opened["wait_for"]["window_title"]).test("a (1).xlsx - LibreOffice Calc")
    assert steps({"type": "open", "parameters": {"path": "~/.bashrc"}})[1]["run"][-1] == ".bashrc"


@pytest.mark.parametrize(("kind", "parameters", "flag"), [
    ("activate_window", {"window_name": "notes.txt"}, "-a"),
    ("activate_window", {"window_name": "x.pptx - LibreOffice Impress", "strict": True}, "-Fa"),
    ("activate_window", {"window_name": "Mousepad", "by_class": True}, "-xa"),
    ("close_window", {"window_name": "Software Updater", "strict": True, "by_class": True}, "-xFc"),
])
def test_activate_and_close_window_run_wmctrl_as_osworlds_server(kind: str, parameters: dict[str, Any],
                                                                  flag: str) -> None:
    assert step({"type": kind, "parameters": parameters}) == \
        {"run": [*ANY_STATUS, "wmctrl", flag, parameters["window_name"]], "timeout": RUN_SECONDS}


def test_download_and_sleep() -> None:
    fetch = {"http://h/a": b"A"}.__getitem__
    assert step({"type": "download", "parameters": {"files": [{"url": "http://h/a", "path": "Desktop/a"}]}},
                fetch=fetch) == {"files": [{"src": "http://h/a", "dest": "Desktop/a"}]}  # relative: in the home
    assert step({"type": "sleep", "parameters": {"seconds": 3}}) == {"sleep": 3}


@pytest.mark.parametrize(("config", "names"), [
    ({"type": "googledrive", "parameters": {}}, ["'googledrive'", "Google Drive"]),
    ({"type": "login", "parameters": {}}, ["'login'", "web account"]),
    ({"type": "chrome_close_tabs", "parameters": {}}, ["'chrome_close_tabs'", "CDP"]),
    ({"type": "update_browse_history", "parameters": {}}, ["'update_browse_history'"]),
    ({"type": "tidy_desktop", "parameters": {}}, ["'tidy_desktop'", "supported: launch"]),
    ({"type": "execute", "parameters": {"command": ["ls"], "stdout": "out.txt"}}, ["'stdout'", "host cache"]),
    ({"type": "execute", "parameters": {"command": ["ls"], "stderr": "err.txt"}}, ["'stderr'", "host cache"]),
    ({"type": "command", "parameters": {"command": ["ls"], "until": {"returncode": 0}}}, ["'until'"]),
    ({"type": "execute", "parameters": {"command": ["ls"], "timeout": 5}}, ["'timeout'"]),
    ({"type": "execute", "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S true", "shell": True}},
     ["{CLIENT_PASSWORD}", "config[0].parameters.command"]),
    ({"type": "execute", "parameters": {"command": "echo 'unclosed"}}, ["shlex"]),
])
def test_config_types_and_parameters_without_a_counterpart_are_refused_by_name(config: dict[str, Any],
                                                                               names: list[str]) -> None:
    refused(task([config]), *names)


def test_the_unsupported_task_file_is_refused_naming_the_type(server: str) -> None:
    message = refused(task_file("unsupported.json", server), "'googledrive'", "config[1]")
    assert message.startswith("t.json: OSWorld config type 'googledrive' in config[1] has no counterpart in cud")


CONFIG_TYPES = ("launch", "execute", "command", "open", "download", "sleep", "activate_window", "close_window",
                "chrome_open_tabs")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda s: s not in CONFIG_TYPES))
@example("googledrive")
@example("chrome_close_tabs")
def test_every_unknown_config_type_is_refused_naming_it(name: str) -> None:
    raw = task([{"type": "sleep", "parameters": {"seconds": 1}}, {"type": name, "parameters": {}}])
    refused(raw, repr(name), "config[1]")


# -- placeholders --------------------------------------------------------------------------------

PLACEHOLDERS = ("{SCREEN_WIDTH}", "{SCREEN_HEIGHT}", "{SCREEN_WIDTH_HALF}", "{SCREEN_HEIGHT_HALF}")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 32767), st.integers(1, 32767), st.sampled_from(["execute", "command", "launch", "post", "check"]),
       st.booleans(), st.lists(st.one_of(st.sampled_from(PLACEHOLDERS), st.text("abc xyz,()", max_size=6)),
                               min_size=1, max_size=8))
def test_no_converted_spec_keeps_a_placeholder(width: int, height: int, where: str, shell: bool,
                                               parts: list[str]) -> None:
    text = "python -c " + "".join(parts) + " end"
    command: Any = text if shell else ["python", "-c", "".join(parts), "end"]
    call = {"command": command, "shell": shell}
    raw = task()
    if where in ("execute", "command", "launch"):
        raw["config"] = [{"type": where, "parameters": call}]
    elif where == "post":
        raw["evaluator"]["postconfig"] = [{"type": "execute", "parameters": call}]
    else:
        raw["evaluator"]["result"] = {"type": "vm_command_line", **call}
    converted = convert(raw, screen=(width, height))
    dumped = json.dumps(dict(converted))
    assert not re.search(r"\{SCREEN_[A-Z_]+\}", dumped)
    assert converted["screen"] == f"{width}x{height}"
    filled = "".join({"{SCREEN_WIDTH}": str(width), "{SCREEN_HEIGHT}": str(height),
                      "{SCREEN_WIDTH_HALF}": str(width // 2), "{SCREEN_HEIGHT_HALF}": str(height // 2)}.get(p, p)
                     for p in parts)
    assert json.dumps(filled)[1:-1] in dumped


def test_a_placeholder_where_osworld_fills_none_is_refused_naming_the_key() -> None:
    raw = task(evaluator={"func": "exact_match", "result": {"type": "vm_command_line", "command": ["true"]},
                          "expected": {"type": "rule", "rules": {"expected": "{SCREEN_WIDTH}"}}})
    refused(raw, "SCREEN_WIDTH", "placeholder", "checks[0].output.matches")


def test_the_screen_comes_from_the_option_else_the_seats_else_osworlds_vm() -> None:
    seats: list[Any] = [{"name": "a", "size": [1280, 800]}, {"name": "b", "size": [1280, 800]},
                        {"name": "c", "size": [1024, 768]}, {"name": "d", "size": None}]
    assert seats_screen(seats, ["a", "b"]) == (1280, 800)
    assert seats_screen(seats, None) == SCREEN == (1920, 1080)  # sizes differ
    assert seats_screen(seats, ["a", "d"]) == SCREEN  # d's unknown now
    assert seats_screen(seats, ["c"], "800x600") == (800, 600)
    assert seats_screen(None, None) == SCREEN


# -- paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tmp/a.txt", "/home/other/a", "/home/user/../etc/passwd", "/home/user/", "~",
                                  "/root/x", "", "a/../../b"])
def test_paths_outside_the_vm_users_home_are_refused_naming_them(path: str) -> None:
    refused(task([{"type": "open", "parameters": {"path": path}}]), "config[0].parameters.path")


@pytest.mark.parametrize(("path", "home"), [("/home/user/a b.txt", "a b.txt"), ("~/Desktop/x", "Desktop/x"),
                                            ("Desktop/x.docx", "Desktop/x.docx")])
def test_vm_home_paths_and_relative_paths_are_paths_in_the_home(path: str, home: str) -> None:
    """A relative path is relative to /home/user: OSWorld's server runs there (osworld_server.service)."""
    assert steps({"type": "open", "parameters": {"path": path}})[0]["open"] == home


def test_commands_naming_the_vm_home_run_with_the_seats_home_in_its_place() -> None:
    argv = ["cp", "/home/user/a", "~/b/", "--target=/home/user/x", "/home/username"]
    run = step({"type": "execute", "parameters": {"command": argv}})["run"]
    assert run == wrap(RUN, ["cp", "/home/user/a", "/home/user/b/", "--target=/home/user/x", "/home/username"],
                       rewrite=True)
    assert run_rewritten(run[4:], "/var/lib/seat-1") == \
        ["cp", "/var/lib/seat-1/a", "/var/lib/seat-1/b/", "--target=/var/lib/seat-1/x", "/home/username"]
    shell = step({"type": "execute", "parameters": {"command": "cd /home/user && ls '/home/user/a b'", "shell": True}})
    assert shell["run"][2].startswith(HOME_REWRITE)
    assert step({"type": "execute", "parameters": {"command": ["ls", "x"]}})["run"][2] == RUN  # nothing to rewrite


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["/home/user", "/home/user/", "/home/users", "a", " ", "'", '"', "$x", "\n",
                                          "/", "é"]), max_size=6).map("".join), min_size=1, max_size=5),
       st.sampled_from(["/home/s1", "/var/lib/cud/seats/a.b-c_d"]))
def test_the_home_rewrite_replaces_the_vm_home_and_nothing_else(args: list[str], home: str) -> None:
    expected = [re.sub(r"/home/user(?![A-Za-z0-9._-])", home, a) for a in args]
    assert run_rewritten(args, home) == expected


def test_the_home_rewrite_refuses_a_home_it_cannot_put_in_shell_text() -> None:
    done = subprocess.run(wrap('"$@"', ["true", "/home/user"], rewrite=True), capture_output=True, text=True,
                          env={**os.environ, "HOME": "/tmp/a b"}, check=False)
    assert done.returncode == 126 and "cannot put the home" in done.stderr


def test_for_seats_that_see_their_home_at_home_user_commands_run_as_written() -> None:
    """``as_written`` (every seat a suite uses has home_path = "/home/user"): what the task wrote is what runs, and
    only the paths cud itself reads and writes are paths in the home."""
    raw = task([{"type": "execute", "parameters": {"command": "cat /home/user/a ~/b", "shell": True}},
                {"type": "execute", "parameters": {"command": ["cp", "--target=/home/user/x", "~/a"]}},
                {"type": "download", "parameters": {"files": [{"url": "http://h/a", "path": "/home/user/a.txt"}]}}])
    converted = convert(raw, {"http://h/a": b""}.__getitem__, as_written=True)
    shell, argv, download = converted["setup"]
    assert shell["run"] == [*ANY_STATUS, "/bin/sh", "-c", "cat /home/user/a ~/b"]
    assert argv["run"] == [*ANY_STATUS, "cp", "--target=/home/user/x", "/home/user/a"]  # ~/ expanded as the server
    assert download["files"][0]["dest"] == "a.txt"  # a path in the home


def test_a_suite_runs_commands_as_written_only_when_every_seat_it_uses_sees_home_user() -> None:
    seats: list[Any] = [{"name": "a", "home_path": "/home/user"}, {"name": "b", "home_path": None},
                        {"name": "c", "home_path": "/home/user"}]
    assert not sees_home_user(seats, None)  # b would take runs too
    assert sees_home_user(seats, ["a", "c"]) and sees_home_user(seats, ["c"])
    assert not sees_home_user(seats, ["a", "b"])
    assert not sees_home_user([], None) and not sees_home_user(None, None)  # a fleet: its nodes' seats unknown here


# -- downloads, malformed tasks, every blocker -----------------------------------------------------


def test_downloads_are_bounded_http_only_and_failures_name_the_url(server: str) -> None:
    assert fetch_url(f"{server}/notes.txt") == b"first line\n"
    for url, why in [(f"{server}/big", "larger than"), (f"{server}/missing", "Not Found"),
                     ("file:///etc/passwd", "only http and https"), (f"{server}/elsewhere", "not http or https")]:
        message = refused(task([{"type": "download", "parameters": {"files": [{"url": url, "path": "~/a"}]}}]),
                          repr(url), why, "config[0].parameters.files[0].url",
                          fetch=lambda url: fetch_url(url, limit=256 * 1024))
        assert "Traceback" not in message


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


@settings(max_examples=300, deadline=None)
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
    fetch = lambda url: b"first line\n"  # noqa: E731
    try:
        converted = convert_osworld(mutated, source="t.json", fetch=fetch)
    except SpecError as exc:
        assert exc.message.startswith("t.json: ") and exc.message.strip()
        assert osworld_blockers(mutated, source="t.json", fetch=fetch)  # found again when collecting
        return
    parse_spec(dict(converted))  # what it does convert is a spec
    assert osworld_blockers(mutated, source="t.json", fetch=fetch) == []


def test_every_blocker_of_a_task_is_found_in_reading_order() -> None:
    raw = task([{"type": "googledrive", "parameters": {}}, {"type": "sleep", "parameters": {"seconds": 1}},
                {"type": "chrome_close_tabs", "parameters": {}}],
               {"func": ["no_such_metric", "exact_match"], "conj": "or",
                "result": [{"type": "vm_file", "path": "/home/user/a"}, {"type": "vm_terminal_output"}],
                "expected": [None, {"type": "rule", "rules": {"expected": "x"}}],
                "postconfig": [{"type": "login", "parameters": {}}]})
    blockers = [e.details["key"] for e in osworld_blockers(raw, source="t.json", fetch=no_fetch)]
    assert blockers == ["config[0].type", "config[2].type", "evaluator.postconfig[0].type", "evaluator.func[0]",
                        "evaluator.result[1].type"]
    first = refused(raw, "'googledrive'")
    assert first == osworld_blockers(raw, source="t.json", fetch=no_fetch)[0].message


def test_a_refusal_names_the_converted_key_when_the_spec_itself_refuses() -> None:
    message = refused(task([{"type": "sleep", "parameters": {"seconds": 600}}]), "setup[0].sleep")
    assert re.search(r"at most 60", message)


def test_submit_takes_one_of_spec_and_from_osworld_and_no_prompt_beside_it(tmp_path: Path) -> None:
    from argparse import Namespace

    from cud.cuctl.tasks import _spec_fields
    from cud.errors import ConfigError

    path = tmp_path / "t.json"
    path.write_text(json.dumps(task([{"type": "sleep", "parameters": {"seconds": 1}}])))
    seats: Any = lambda: [{"name": "s1", "size": [1024, 768], "home_path": None}]  # noqa: E731
    fields, files = _spec_fields(Namespace(prompt=None, spec=None, from_osworld=str(path), seat=None, screen=None),
                                 seats)
    assert files == {}
    assert fields["prompt"].startswith("do it") and fields["spec"]["setup"] == [{"sleep": 1.0}]
    assert fields["screen"] == "1024x768"  # the seats' screen
    with pytest.raises(ConfigError, match="--spec or --from-osworld, not both"):
        _spec_fields(Namespace(prompt=None, spec="a.toml", from_osworld=str(path)), lambda: [])
    with pytest.raises(ConfigError, match="a PROMPT or --from-osworld, not both"):
        _spec_fields(Namespace(prompt="hi", spec=None, from_osworld=str(path)), lambda: [])


# -- OSWorld's own task files, as they reach the ported metrics ---------------------------------

#: The Thunderbird profile the Thunderbird tasks unpack (their config, as written in OSWorld's task files).
PROFILE_URL = ("https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/thunderbird/"
               "dd84e895-72fd-4023-a336-97689ded257c/thunderbird-profile.tar.gz")
THUNDERBIRD_CONFIG = [
    {"type": "download", "parameters": {"files": [{"url": PROFILE_URL, "path": "/home/user/thunderbird-profile.tar.gz"}]}},
    {"type": "execute", "parameters": {"command": ["tar", "-xzv", "--recursive-unlink", "-f",
                                                   "/home/user/thunderbird-profile.tar.gz", "-C", "/home/user/"]}},
    {"type": "launch", "parameters": {"command": ["/usr/bin/thunderbird"]}}]
PROFILE = "/home/user/.thunderbird/t5q2a5hp.default-release"
CLOSE_THUNDERBIRD = [{"type": "close_window", "parameters": {"window_name": "Mail.thunderbird", "strict": True,
                                                             "by_class": True}},
                     {"type": "sleep", "parameters": {"seconds": 0.5}}]


@pytest.mark.parametrize(("func", "path", "rules"), [
    # thunderbird/08c73485-7c6d-4681-999d-919f5c32dcfa.json
    ("check_thunderbird_prefs", f"{PROFILE}/prefs.js", {
        "expect": {"mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
                   "mail.imap.use_status_for_biff": {"method": "eq", "ref": False}},
        "unexpect": {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}}),
    # thunderbird/3f28fe4f-5d9d-4994-a456-efd78cfae1a3.json
    ("check_thunderbird_prefs", f"{PROFILE}/prefs.js",
     {"expect": {"mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym\\nXYZ Lab"}}}),
    # thunderbird/9b7bc335-06b5-4cd3-9119-1a649c478509.json
    ("check_thunderbird_filter", f"{PROFILE}/ImapMail/outlook.office365.com/msgFilterRules.dat",
     {"expect": [{"enabled": "yes", "action": "Forward", "actionValue": "anonym-x2024@gmail.com",
                  "condition": ["ALL"]}]}),
])
def test_osworlds_thunderbird_tasks_check_the_profile_in_the_seats_home(func: str, path: str,
                                                                        rules: dict[str, Any]) -> None:
    raw = {"id": "08c73485-7c6d-4681-999d-919f5c32dcfa", "instruction": "Set up Thunderbird.",
           "config": THUNDERBIRD_CONFIG,
           "evaluator": {"postconfig": CLOSE_THUNDERBIRD, "func": func,
                         "result": {"type": "vm_file", "path": path, "dest": "thunder-prefs.js"},
                         "expected": {"type": "rule", "rules": rules}}}
    converted = convert(raw, lambda url: b"profile")
    assert osworld_blockers(raw, source="t.json", fetch=lambda url: b"profile") == []
    (check,) = converted["checks"]
    assert check == {"name": f"{func} on vm_file", "metric": func,
                     "result": {"file": path.removeprefix("/home/user/")}, "expected": {"value": rules}}
    assert converted.files == {PROFILE_URL: b"profile"}


def test_osworlds_archive_task_zips_in_postconfig_and_compares_the_archive_with_the_gold_one() -> None:
    """multi_apps/5df7b33a-9f77-4101-823e-02f863e1c1ae.json, as written."""
    base = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/" \
           "5df7b33a-9f77-4101-823e-02f863e1c1ae/"
    raw = {"id": "5df7b33a-9f77-4101-823e-02f863e1c1ae", "instruction": "Zip the PDFs.",
           "config": [{"type": "download", "parameters": {"files": [{"url": base + "raw_book.zip",
                                                                     "path": "/home/user/Desktop/book.zip"}]}},
                      {"type": "execute", "parameters": {"command": [
                          "/bin/bash", "-c", "unzip -q /home/user/Desktop/book.zip -d /home/user/Desktop && "
                                             "rm /home/user/Desktop/book.zip"]}},
                      {"type": "launch", "parameters": {"command": ["nautilus", "/home/user/Desktop/book"]}},
                      {"type": "open", "parameters": {"path": "/home/user/Desktop/book/Spectral Graph Theory.pdf"}}],
           "evaluator": {"postconfig": [{"type": "execute", "parameters": {"command": [
               "/bin/bash", "-c", "cd /home/user/Desktop/book && zip -qr book.zip *.pdf"]}}],
               "func": "compare_archive",
               "result": {"type": "vm_file", "path": "/home/user/Desktop/book/book.zip", "dest": "book.zip"},
               "expected": {"type": "cloud_file", "path": base + "book.zip", "dest": "gold_book.zip"},
               "options": {"file_type": "pdf"}}}
    converted = convert(raw, lambda url: url.encode())
    (check,) = converted["checks"]
    assert check == {"name": "compare_archive on vm_file", "metric": "compare_archive",
                     "result": {"file": "Desktop/book/book.zip"}, "expected": {"fixture": base + "book.zip"},
                     "options": {"file_type": "pdf"}}
    (zip_step,) = converted["postconfig"]
    assert zip_step["run"][-1] == "cd /home/user/Desktop/book && zip -qr book.zip *.pdf"
    assert set(converted.files) == {base + "raw_book.zip", base + "book.zip"}
