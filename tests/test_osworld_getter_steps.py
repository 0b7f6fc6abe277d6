"""OSWorld's getters that act before a file is read (cud/osworld/getter_steps.py): vscode_config's replay and
vm_wallpaper's copy, as postconfig steps after the task's own, on OSWorld's task files as written.

The replay's programs run for real against a stand-in ``pyautogui`` module that writes down each call, beside
the programs OSWorld's own get_replay (desktop-env 1.0.2) sends: the calls must be the same. The wallpaper's
script runs for real with GLib's gsettings on a keyfile backend in a temporary home.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.convert import convert_osworld, osworld_blockers
from cud.osworld.getter_steps import PKGS_PREFIX, WALLPAPER_DIR, WALLPAPER_SCRIPT
from cud.osworld.steps import ANY_STATUS, RUN_SECONDS
from cud.spec import parse_spec

ACTIVATE_CODE = {"type": "activate_window", "parameters": {"window_name": "Visual Studio Code"}}
#: vs_code/53ad5833-3455-407b-bbc6-45b4c79ab8fb.json's evaluator, as written.
OPEN_PROJECT = {"postconfig": [ACTIVATE_CODE], "func": "compare_config",
                "expected": {"type": "rule", "rules": {"expected": "project"}},
                "result": {"type": "vscode_config", "vscode_extension_command": "OpenProject",
                           "path": "/home/user/OpenProject.txt", "dest": "OpenProject.txt"}}
#: vlc/efcf0d81-0835-4880-b2fd-d866e8bc2294.json's evaluator, as written.
GOLD = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/vlc/" \
       "efcf0d81-0835-4880-b2fd-d866e8bc2294/interstellar.png"
WALLPAPER = {"func": "compare_images",
             "expected": {"type": "cloud_file", "path": GOLD, "dest": "interstellar_wallpaper_gold.png"},
             "result": {"type": "vm_wallpaper", "dest": "result_wallpaper.png"},
             "options": {"reference_base_result": 0.11}}


def convert(evaluator: dict[str, Any]) -> dict[str, Any]:
    raw = {"id": "t-1", "instruction": "do it", "config": [], "evaluator": evaluator}
    converted = convert_osworld(raw, source="t.json", fetch=lambda url: b"gold")
    parse_spec(dict(converted))
    assert osworld_blockers(raw, source="t.json", fetch=lambda url: b"gold") == []
    return converted


def test_vscode_config_replays_the_command_after_the_postconfig_then_reads_the_file() -> None:
    converted = convert(OPEN_PROJECT)
    (check,) = converted["checks"]
    assert check == {"name": "compare_config on vscode_config", "metric": "compare_config",
                     "result": {"file": "OpenProject.txt"}, "expected": {"value": {"expected": "project"}}}
    activate, hotkey, typewrite, press, sleep = converted["postconfig"]
    assert activate["run"][-3:] == ["wmctrl", "-a", "Visual Studio Code"]  # the task's own postconfig first
    for step, words in ((hotkey, ["ctrl", "shift", "p"]), (typewrite, ["OpenProject"]), (press, ["enter"])):
        assert step["run"][:6] == [*ANY_STATUS, "python", "-c"] and step["run"][7:] == words
        assert step["timeout"] == RUN_SECONDS
    assert sleep == {"sleep": 1.0}


def test_several_metrics_keep_their_checks_and_the_replay_follows_the_postconfig() -> None:
    """multi_apps/510f64c8-9bcc-4be1-8d30-638705850618.json's evaluator: a command check, then the replay's."""
    history = ["/bin/bash", "-c", "use_terminal=$(cat ~/.bash_history | grep \"[c]ode \"); if [ -z \"$use_terminal\" ]; "
                                  "then echo \"false\"; else echo \"true\"; fi"]
    converted = convert({
        "postconfig": [{"type": "execute", "parameters": {"command": ["/bin/bash", "-c", "killall gnome-terminal-server"]}},
                       ACTIVATE_CODE],
        "func": ["check_include_exclude", "compare_config"],
        "result": [{"type": "vm_command_line", "command": history}, OPEN_PROJECT["result"]],
        "expected": [{"type": "rule", "rules": {"include": ["true"]}}, {"type": "rule", "rules": {"expected": "project"}}]})
    grep, config = converted["checks"]
    assert grep["output"] == {"include": ["true"], "exclude": []} and config["result"] == {"file": "OpenProject.txt"}
    assert len(converted["postconfig"]) == 6 and converted["postconfig"][-1] == {"sleep": 1.0}


@pytest.mark.parametrize("text", ["it's", "a\\b", "two\nlines", "", 3])
def test_a_command_osworld_cannot_type_as_written_is_refused(text: object) -> None:
    raw = {"id": "t-1", "instruction": "do it", "config": [],
           "evaluator": {**OPEN_PROJECT, "result": {**OPEN_PROJECT["result"], "vscode_extension_command": text}}}
    with pytest.raises(SpecError, match="vscode_extension_command must be a non-empty string without a quote"):
        convert_osworld(raw, source="t.json", fetch=lambda url: b"gold")


def _osworld_replay_programs(command: str) -> list[str]:
    """The python -c programs OSWorld's own get_replay sends for get_vscode_config's Linux trajectory."""
    import desktop_env
    path = Path(desktop_env.__file__).parent / "evaluators" / "getters" / "replay.py"
    spec = importlib.util.spec_from_file_location("osworld_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sent: list[str] = []

    class Controller:
        def execute_python_command(self, program: str) -> None:
            sent.append(PKGS_PREFIX + program)  # controllers/python.py: pkgs_prefix.format(command=...)

    env: Any = type("Env", (), {"controller": Controller()})()
    module.get_replay(env, [{"type": "hotkey", "param": ["ctrl", "shift", "p"]},
                            {"type": "typewrite", "param": command}, {"type": "press", "param": "enter"}])
    return sent


def _calls(argv: list[str], tmp: Path) -> list[Any]:
    """What ``argv`` (a ``python -c`` program) calls on pyautogui, written down by a stand-in module."""
    (tmp / "pyautogui.py").write_text(
        "import json, os\nFAILSAFE = True\n"
        "def _record(name):\n"
        "    def call(*args):\n"
        "        with open(os.environ['CALLS'], 'a') as out:\n"
        "            out.write(json.dumps([name, list(args)]) + '\\n')\n"
        "    return call\n"
        "hotkey, typewrite, press = _record('hotkey'), _record('typewrite'), _record('press')\n")
    calls = tmp / "calls"
    calls.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tmp), "CALLS": str(calls)}
    subprocess.run([sys.executable if argv[0] == "python" else argv[0], *argv[1:]], env=env, check=True)
    return [json.loads(line) for line in calls.read_text().splitlines()]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"), exclude_characters="'\\"),
               min_size=1, max_size=12))
def test_the_replay_calls_pyautogui_as_osworlds_get_replay_does(tmp_path: Path, command: str) -> None:
    raw = {**OPEN_PROJECT, "result": {**OPEN_PROJECT["result"], "vscode_extension_command": command}}
    steps = convert(raw)["postconfig"][1:4]
    ours = [call for step in steps for call in _calls(step["run"][4:], tmp_path)]
    theirs = [call for program in _osworld_replay_programs(command) for call in _calls(["python", "-c", program],
                                                                                      tmp_path)]
    assert ours == theirs == [["hotkey", ["ctrl", "shift", "p"]], ["typewrite", [command]], ["press", ["enter"]]]


# -- vm_wallpaper ---------------------------------------------------------------------------------


def test_vm_wallpaper_copies_the_wallpaper_into_the_home_after_the_postconfig() -> None:
    converted = convert(WALLPAPER)
    (check,) = converted["checks"]
    path = f"{WALLPAPER_DIR}/result_wallpaper.png"
    assert check == {"name": "compare_images on vm_wallpaper", "metric": "compare_images", "result": {"file": path},
                     "expected": {"fixture": GOLD}, "options": {"reference_base_result": 0.11}}
    assert converted["postconfig"] == [{"run": ["/bin/sh", "-c", WALLPAPER_SCRIPT, "osworld", path],
                                        "timeout": RUN_SECONDS}]
    raw = {"id": "t-1", "instruction": "do it", "config": [],
           "evaluator": {**WALLPAPER, "result": {"type": "vm_wallpaper", "dest": "../x.png"}}}
    with pytest.raises(SpecError, match="cannot map onto the seat's home"):
        convert_osworld(raw, source="t.json", fetch=lambda url: b"gold")


def wallpaper(tmp: Path, uri: str | None) -> tuple[bytes, bytes]:
    """The copy WALLPAPER_SCRIPT leaves in a home whose GNOME picture-uri is ``uri`` (None: never set), and the
    bytes OSWorld's server/main.py sends there (get_wallpaper_linux; get_vm_wallpaper's b"" when it sends none)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp / "home"), "GSETTINGS_BACKEND": "keyfile",
           "XDG_CONFIG_HOME": str(tmp / "config")}
    keyfile = tmp / "config" / "glib-2.0" / "settings" / "keyfile"
    keyfile.unlink(missing_ok=True)
    if uri is not None:
        subprocess.run(["gsettings", "set", "org.gnome.desktop.background", "picture-uri", uri], env=env, check=True)
    printed = subprocess.check_output(["gsettings", "get", "org.gnome.desktop.background", "picture-uri"], env=env)
    path = printed.decode("utf-8").strip().replace("file://", "").replace("'", "")
    sent = b""
    if path and os.path.isfile(path):  # send_file opens the path as written: "x.png/" is no file (pathlib's would be)
        with open(path, "rb") as f:
            sent = f.read()
    done = subprocess.run(["/bin/sh", "-c", WALLPAPER_SCRIPT, "osworld", f"{WALLPAPER_DIR}/bg.png"], env=env,
                          capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    return (tmp / "home" / WALLPAPER_DIR / "bg.png").read_bytes(), sent


@pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v gsettings"], capture_output=True).returncode != 0,
                    reason="GLib's gsettings is not installed")
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["file://{}", "{}", "resource://{}", "file://{}.missing", "file://{}/"]),
       st.text(alphabet="ab -_.", min_size=1, max_size=8), st.booleans())
def test_the_wallpapers_copy_is_the_file_osworlds_server_sends(tmp_path: Path, form: str, name: str,
                                                               stale: bool) -> None:
    picture = tmp_path / "pictures" / f"{name}.png"
    picture.parent.mkdir(exist_ok=True)
    picture.write_bytes(b"\x89PNG " + name.encode())
    uri = form.format(picture)
    if stale:  # a copy left from before is never what is read
        (tmp_path / "home" / WALLPAPER_DIR).mkdir(parents=True, exist_ok=True)
        (tmp_path / "home" / WALLPAPER_DIR / "bg.png").write_bytes(b"stale")
    ours, theirs = wallpaper(tmp_path, uri)
    assert ours == theirs, uri
    ours, theirs = wallpaper(tmp_path, None)  # GNOME's default
    assert ours == theirs
