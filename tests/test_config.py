"""Config: TOML plus flags, and a ConfigError naming key and value for every bad value."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.daemon import config as top
from cud.daemon.budget import config as budget
from cud.daemon.config import default_socket, load_config, resolve_api_key
from cud.daemon.hooks import config as hooks
from cud.daemon.model import history
from cud.daemon.seats import config as seats
from cud.daemon.seats.config import SeatConfig
from cud.daemon.targets.rules import RULE_KEYS
from cud.daemon.tasks.guard_config import GUARD_KEYS
from cud.daemon.video import config as video
from cud.errors import ConfigError

ENV = {"DISPLAY": ":7"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cud.toml"
    path.write_text(text)
    return path


def test_defaults_and_environment(tmp_path: Path) -> None:
    config = load_config(None, {"socket": "/tmp/s", "state_dir": str(tmp_path)}, env=ENV)
    assert config.seats == (SeatConfig("default", display=":7"),)
    assert config.model == "gpt-5.4" and config.approval == "safety"
    assert config.access.submit_users == () and config.retention.max_tasks == 1000


def test_a_full_file_and_flags_override_it(tmp_path: Path) -> None:
    path = write(tmp_path, """
socket = "/tmp/from-file.sock"
state_dir = "/tmp/state"
display = ":3"
model = "m-file"
approval = "actions"
approval_timeout = 5
max_steps = 9
wait_seconds = 0.5
settle_timeout = 0
base_url = "http://127.0.0.1:1/v1"
[access]
submit_users = ["root", 0]
approve_groups = ["root"]
[retention]
max_tasks = 3
max_age_days = 0.5
""")
    config = load_config(path, {"model": "m-flag", "max_steps": None, "socket": "/tmp/flag.sock"}, env={})
    assert config.model == "m-flag" and config.max_steps == 9 and str(config.socket) == "/tmp/flag.sock"
    assert config.seats == (SeatConfig("default", display=":3"),)
    assert config.approval == "actions" and config.approval_timeout == 5.0
    assert config.access.submit_users == ("root", "0") and config.access.approve_groups == ("root",)
    assert config.retention.max_tasks == 3 and config.retention.max_age_days == 0.5
    # --vnc on the command line replaces a display from the file
    assert load_config(path, {"vnc": "127.0.0.1::5900"}, env={}).seats == (SeatConfig("default", vnc="127.0.0.1::5900"),)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("bogus = 1", "unknown config key 'bogus'"),
        ("display = 'nope'", "'display' must be an X display like ':0' or ':1.0', got 'nope'"),
        ("vnc = '127.0.0.1:5900'", "'vnc' must be HOST::PORT"),
        ("display = ':1'\nvnc = 'h::1'", "exclude each other"),
        ("approval = 'never'", "'approval' must be 'safety' or 'actions', got 'never'"),
        ("approval_timeout = -1", "'approval_timeout' must be a positive finite number, got -1"),
        ("approval_timeout = 'soon'", "'approval_timeout' must be a number, got 'soon'"),
        ("max_steps = 0", "'max_steps' must be a positive integer, got 0"),
        ("max_steps = true", "'max_steps' must be a positive integer, got True"),
        ("vnc = '127.0.0.1::5900'\nvnc_horizontal_scroll = 'sideways'",
         "'vnc_horizontal_scroll' must be 'auto', 'buttons' or 'shift', got 'sideways'"),
        ("vnc_horizontal_scroll = 'shift'", "'vnc_horizontal_scroll' needs 'vnc'"),
        ("driver_timeout = 0.1", "'driver_timeout' must be a number of seconds from 0.5 to 600, got 0.1"),
        ("driver_timeout = 'x'", "'driver_timeout' must be a number, got 'x'"),
        ("driver_processes = 1", "'driver_processes' must be true or false, got 1"),
        ("driver_processes = 'yes'", "'driver_processes' must be true or false, got 'yes'"),
        ("max_duration = 0", "'max_duration' must be an integer from 1 to 604800, got 0"),
        ("max_duration = 1.5", "'max_duration' must be an integer from 1 to 604800, got 1.5"),
        ("max_connections = 0", "'max_connections' must be an integer from 1 to 65536, got 0"),
        ("max_connections = 'many'", "'max_connections' must be an integer from 1 to 65536, got 'many'"),
        ("model = ''", "'model' must be a non-empty string"),
        ("base_url = 'ftp://x'", "'base_url' must be an http:// or https:// URL, got 'ftp://x'"),
        ("api_key_credential = '../etc/passwd'", "credential name without '/'"),
        ("[access]\nsubmit_users = ['no-such-user-cud']", "unknown user 'no-such-user-cud'"),
        ("[access]\nsubmit_users = 'root'", "'access.submit_users' must be a list"),
        ("[access]\nwho = []", "unknown config key 'access.who'"),
        ("max_step = 3", "unknown config key 'max_step'; did you mean 'max_steps'?"),
        ("[retention]\nmax_task = 3", "unknown config key 'retention.max_task'; did you mean 'max_tasks'?"),
        ("[retention]\nmax_tasks = -5", "'retention.max_tasks' must be a positive integer, got -5"),
        ("vnc_password_file = '/x'", "'vnc_password_file' needs 'vnc'"),
        ("display = [", "not valid TOML"),
        ("[guard]\nrepeat_limit = -1", "'guard.repeat_limit' must be an integer from 0 to 1000, got -1"),
        ("[guard]\ncycle_limit = 21", "'guard.cycle_limit' must be an integer from 0 to 20, got 21"),
        ("[guard]\ncycle_limit = 2.5", "'guard.cycle_limit' must be an integer from 0 to 20, got 2.5"),
        ("[guard]\non_stuck = 'pray'", "'guard.on_stuck' must be 'ask' or 'fail', got 'pray'"),
        ("[guard]\nrepeat_limt = 3", "unknown config key 'guard.repeat_limt'; did you mean 'repeat_limit'?"),
    ],
)
def test_every_bad_value_names_key_and_value(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV)
    assert needle in caught.value.message


#: Every table of the config file: how its head is written, and the keys its room allows.
TABLES = {
    "": ("", top.TOP_KEYS),
    "access": ("[access]", top.ACCESS_KEYS),
    "retention": ("[retention]", top.RETENTION_KEYS),
    "metrics": ("[metrics]", top.METRICS_KEYS),
    "policy": ("[policy]", top.POLICY_KEYS),
    "policy.rules[0]": ("[[policy.rules]]", RULE_KEYS),
    "seats[0]": ("[[seats]]", seats.SEAT_KEYS),
    "notify[0]": ("[[notify]]", hooks.HOOK_KEYS),
    "video": ("[video]", video.VIDEO_KEYS),
    "history": ("[history]", history.HISTORY_KEYS),
    "budget": ("[budget]", budget.BUDGET_KEYS),
    'budget.prices."m"': ('[budget.prices."m"]', budget.PRICE_KEYS),
    "guard": ("[guard]", GUARD_KEYS),
}


def _unknown_key_error(table: str, typo: str) -> ConfigError:
    head, _ = TABLES[table]
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), f"{head}\n{typo} = 1\n")
        with pytest.raises(ConfigError) as caught:
            load_config(path, {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV)
    return caught.value


@pytest.mark.parametrize(("table", "typo", "meant"), [
    ("", "max_step", "max_steps"), ("", "dispaly", "display"), ("access", "submit_user", "submit_users"),
    ("video", "enabeld", "enabled"), ("seats[0]", "dispaly", "display"), ("notify[0]", "evnets", "events"),
    ("policy.rules[0]", "actoin", "action"), ("policy", "rule", "rules"), ("history", "mdoe", "mode"),
    ("budget", "daily_cots", "daily_cost"), ('budget.prices."m"', "ouptut", "output"),
])
def test_a_misspelt_key_of_any_table_gets_did_you_mean(table: str, typo: str, meant: str) -> None:
    error = _unknown_key_error(table, typo)
    path = f"{table}.{typo}" if table else typo
    assert error.message.startswith(f"unknown config key {path!r}; did you mean {meant!r}? known: "), error.message
    assert error.details == {"key": path, "suggestion": meant}


@st.composite
def typos(draw: st.DrawFn) -> tuple[str, str]:
    """A table and one of its keys (3 letters or more) with one slip of the keyboard: a letter dropped,
    doubled, swapped with the next or replaced."""
    table = draw(st.sampled_from(sorted(TABLES)))
    keys = sorted(k for k in TABLES[table][1] if len(k) >= 3)
    key = draw(st.sampled_from(keys))
    i = draw(st.integers(0, len(key) - 2))
    slip = draw(st.sampled_from(["drop", "double", "swap", "replace"]))
    letter = draw(st.sampled_from("abcdefghijklmnopqrstuvwxyz_"))
    typo = {"drop": key[:i] + key[i + 1:], "double": key[:i] + key[i] + key[i:],
            "swap": key[:i] + key[i + 1] + key[i] + key[i + 2:], "replace": key[:i] + letter + key[i + 1:]}[slip]
    if typo in TABLES[table][1]:
        typo += "x"  # a slip that made another real key is no slip: make it one
    return table, typo


@settings(max_examples=200, deadline=None)
@given(typos())
@example(("", "max_step"))
@example(("", "dispaly"))
def test_any_slip_in_any_tables_key_is_answered_with_a_key_of_that_table(case: tuple[str, str]) -> None:
    table, typo = case
    error = _unknown_key_error(table, typo)
    assert "did you mean" in error.message, error.message
    assert error.details["suggestion"] in TABLES[table][1]


def test_missing_file_and_missing_display(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.toml", {}, env=ENV)
    with pytest.raises(ConfigError, match="no display"):
        load_config(None, {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env={})


def test_default_socket() -> None:
    assert default_socket({"CUD_SOCKET": "/tmp/a.sock"}) == Path("/tmp/a.sock")
    expected = Path("/run/cud/cud.sock") if os.geteuid() == 0 else Path("/run/user/1/cud.sock")
    assert default_socket({"XDG_RUNTIME_DIR": "/run/user/1"}) == expected


def test_api_key_sources_in_order(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "openai-api-key").write_text("sk-from-credential")
    base = {"socket": "/tmp/s", "state_dir": "/tmp/x"}
    by_file = load_config(None, {**base, "api_key_file": str(key_file)}, env=ENV)
    assert resolve_api_key(by_file, {"OPENAI_API_KEY": "sk-env"}) == "sk-from-file"
    by_cred = load_config(write(tmp_path, "api_key_credential = 'openai-api-key'"), base, env=ENV)
    assert resolve_api_key(by_cred, {"CREDENTIALS_DIRECTORY": str(creds)}) == "sk-from-credential"
    with pytest.raises(ConfigError, match="CREDENTIALS_DIRECTORY is not set"):
        resolve_api_key(by_cred, {})
    plain = load_config(None, base, env=ENV)
    assert resolve_api_key(plain, {"OPENAI_API_KEY": "sk-env"}) == "sk-env"
    assert resolve_api_key(plain, {}) is None  # the daemon starts; the tasks that need it are refused
    assert resolve_api_key(plain, {"OPENAI_API_KEY": " \n"}) is None
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        resolve_api_key(load_config(None, {**base, "api_key_file": str(empty)}, env=ENV), {})


def test_a_request_table_passes_responses_parameters_through_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, """
[request]
truncation = "auto"
reasoning = { effort = "low", summary = "concise" }
store = false
temperature = 1
metadata = { team = "ops" }
[[request.context_management]]
type = "compaction"
compact_threshold = 200000
""")
    config = load_config(path, {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV)
    assert dict(config.request) == {
        "truncation": "auto",
        "reasoning": {"effort": "low", "summary": "concise"},
        "store": False,
        "temperature": 1,
        "metadata": {"team": "ops"},
        "context_management": [{"type": "compaction", "compact_threshold": 200000}],
    }
    assert load_config(None, {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV).request == {}


@pytest.mark.parametrize(
    ("text", "needle", "key"),
    [
        # keys: the SDK's ResponseCreateParams, with a suggestion when one is close
        ("truncaton = 'auto'", ("unknown config key 'request.truncaton': not a Responses parameter of the installed "
                                "openai SDK; did you mean 'truncation'?"), "request.truncaton"),
        ("extra_body = {}", "unknown config key 'request.extra_body'", "request.extra_body"),
        # the loop's own keys
        ("model = 'gpt-x'", "'request.model' cannot be set: the computer loop owns it", "request.model"),
        ("input = 'hi'", "'request.input' cannot be set: the computer loop owns it", "request.input"),
        ("tools = []", "'request.tools' cannot be set: the computer loop owns it", "request.tools"),
        ("previous_response_id = 'resp_1'", "'request.previous_response_id' cannot be set", "request.previous_response_id"),
        ("stream = true", "'request.stream' cannot be set", "request.stream"),
        # values: the SDK's types, strictly, nested keys included
        ("truncation = 'sometimes'", "'request.truncation' must be 'auto' or 'disabled', got 'sometimes'",
         "request.truncation"),
        ("reasoning = { effort = 'lowest' }", "'request.reasoning.effort' must be 'none', 'minimal', 'low'",
         "request.reasoning.effort"),
        ("reasoning = { effrot = 'low' }", "unknown config key 'request.reasoning.effrot'", "request.reasoning.effrot"),
        ("reasoning = 'low'", "'request.reasoning' must be a valid dictionary, got 'low'", "request.reasoning"),
        ("max_output_tokens = '500'", "'request.max_output_tokens' must be a valid integer, got '500'",
         "request.max_output_tokens"),
        ("max_output_tokens = 1.5", "'request.max_output_tokens' must be a valid integer, got 1.5",
         "request.max_output_tokens"),
        ("context_management = { type = 'compaction' }",
         "'request.context_management' must be a valid list, got {'type': 'compaction'}", "request.context_management"),
        ("context_management = [{ compact_threshold = 5 }]", "'request.context_management[0].type' is missing",
         "request.context_management[0].type"),
        ("context_management = [{ type = 'compaction', compact_threshold = 'big' }]",
         "'request.context_management[0].compact_threshold' must be a valid integer, got 'big'",
         "request.context_management[0].compact_threshold"),
        ("text = { format = { type = 'yaml' } }",
         "'request.text.format' matches none of the openai SDK's types for it, got {'type': 'yaml'}",
         "request.text.format"),
        ("metadata = { when = 2026-01-01 }", "'request.metadata.when' must be JSON-like", "request.metadata.when"),
    ],
)
def test_a_bad_request_key_or_value_is_named(tmp_path: Path, text: str, needle: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, "[request]\n" + text), {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV)
    assert needle in caught.value.message
    assert caught.value.details["key"] == key


def test_request_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config key 'request' must be a table, got 'auto'"):
        load_config(write(tmp_path, "request = 'auto'"), {"socket": "/tmp/s", "state_dir": "/tmp/x"}, env=ENV)


THREE_SEATS = """
[[seats]]
name = "left"
display = ":1"
[[seats]]
name = "mid.2"
display = ":2.0"
[[seats]]
name = "vnc_b"
vnc = "127.0.0.1::5901"
vnc_password_file = "/etc/cud/b.pass"
vnc_horizontal_scroll = "shift"
"""


def test_seats_from_tables_from_flags_and_flags_replace_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, THREE_SEATS)
    config = load_config(path, {}, env=ENV)
    assert config.seats == (
        SeatConfig("left", display=":1"),
        SeatConfig("mid.2", display=":2.0"),
        SeatConfig("vnc_b", vnc="127.0.0.1::5901", vnc_password_file=Path("/etc/cud/b.pass"),
                   vnc_horizontal_scroll="shift"),
    )
    flags = load_config(path, {"seat": ["a=:4", "b=:5"]}, env=ENV)
    assert flags.seats == (SeatConfig("a", display=":4"), SeatConfig("b", display=":5"))
    assert load_config(path, {"display": ":9"}, env=ENV).seats == (SeatConfig("default", display=":9"),)


@pytest.mark.parametrize(
    ("flags", "text", "needle"),
    [
        ({"seat": ["left:1"]}, "", "--seat 'left:1' must be NAME=DISPLAY"),
        ({"seat": ["a=:1", "a=:2"]}, "", "two seats are named 'a'"),
        ({"seat": ["a=:1", "b=:1"]}, "", "seats 'a' and 'b' both drive ':1'"),
        ({"seat": ["-a=:1"]}, "", "seat name"),
        ({"seat": ["a=screen"]}, "", "got 'screen'"),
        ({"seat": ["a=:1"], "display": ":2"}, "", "--seat and --display exclude each other"),
        ({}, "display = ':1'\n" + THREE_SEATS, "'display' and [[seats]] exclude each other"),
        ({}, "seats = 3", "'seats' must be one or more [[seats]] tables, got 3"),
        ({}, "[[seats]]\ndisplay = ':1'", "'seats[0]' needs a 'name'"),
        ({}, "[[seats]]\nname = 'a'", "seat 'a' needs 'seats[0].display' or 'seats[0].vnc'"),
        ({}, "[[seats]]\nname = 'a'\ndisplay = ':1'\nscreen = 2", "unknown config key 'seats[0].screen'"),
        ({}, "[[seats]]\nname = 'a'\ndisplay = ':1'\nvnc_password_file = '/p'",
         "'seats[0].vnc_password_file' needs 'seats[0].vnc'"),
        ({}, "[[seats]]\nname = 'a'\nvnc = 'h::1'\n[[seats]]\nname = 'b'\nvnc = 'h::99999'",
         "'seats[1].vnc' must be HOST::PORT"),
    ],
)
def test_bad_seats_are_named(tmp_path: Path, flags: dict[str, object], text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), flags, env=ENV)
    assert needle in info.value.message, info.value.message
