"""[[notify]] in the config: good tables parse to hooks; every class of bad value is a ConfigError
naming its key and value (generated, not picked), and `cud run` stops on one."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.daemon.config import load_config
from cud.daemon.hooks.config import EVENTS, FORMATS, HookConfig
from cud.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BASE = 'socket = "/tmp/cud-test.sock"\nstate_dir = "/tmp/cud-test-state"\ndisplay = ":9"\n'
# New examples every run (a fixed set finds only what it found the first time); a failure prints its
# example and the blob that replays it (@reproduce_failure), and the example database replays it next run.
SETTINGS = settings(max_examples=60, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
ENV: dict[str, str] = {}


def toml_string(text: str) -> str:
    # A JSON string is a TOML basic string, once DEL (which TOML wants escaped) is escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def load(tmp: Path, hook: str, env: dict[str, str] | None = None) -> tuple[HookConfig, ...]:
    path = tmp / "cud.toml"
    path.write_text(BASE + "[[notify]]\n" + hook, encoding="utf-8")
    return load_config(path, env=env if env is not None else ENV).notify


def refused(tmp: Path, hook: str, key: str, value: object, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(tmp, hook, env)
    message = caught.value.message
    assert key in message and repr(value) in message, (message, key, value)
    return caught.value


# Text TOML can carry: no surrogates (not UTF-8).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notify-config")


def test_good_hooks_parse_with_their_defaults(tmp: Path) -> None:
    secret = tmp / "secret"
    secret.write_text("Bearer abc\n")
    path = tmp / "cud.toml"
    path.write_text(BASE + f"""
[[notify]]
command = ["/usr/bin/env", "true"]
env = {{ LANG = "C.UTF-8" }}
[[notify]]
name = "phone"
events = ["approval_requested", "task_failed"]
webhook = "https://ntfy.example.com/cud-alerts"
format = "ntfy"
secret_header = "Authorization"
secret_file = "{secret}"
timeout = 2.5
retries = 0
backoff = 0
concurrency = 1
""")
    first, second = load_config(path, env={}).notify
    assert first == HookConfig(name="notify[0]", events=frozenset(EVENTS), command=("/usr/bin/env", "true"),
                               env={"LANG": "C.UTF-8"})
    assert first.kind == "command" and first.timeout == 10.0 and first.retries == 3 and first.concurrency == 4
    assert second.kind == "webhook" and second.name == "phone" and second.format == "ntfy"
    assert second.events == {"approval_requested", "task_failed"} and second.secret_file == secret
    assert (second.timeout, second.retries, second.backoff, second.concurrency) == (2.5, 0, 0.0, 1)
    assert "abc" not in repr(load_config(path, env={}))  # the secret stays in its file
    creds = tmp / "creds"
    creds.mkdir(exist_ok=True)
    (creds / "slack-token").write_text("t0ken")
    [hook] = load(tmp, 'webhook = "http://127.0.0.1:9/x"\nsecret_header = "X-T"\nsecret_credential = "slack-token"\n',
                  env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert hook.secret_file == creds / "slack-token"


@SETTINGS
@given(event=TEXT.filter(lambda e: e not in EVENTS), place=st.integers(0, 2))
def test_an_unknown_event_is_named(tmp: Path, event: str, place: int) -> None:
    events = ["task_failed", "seat_recovered"]
    events.insert(place, event)
    refused(tmp, f'command = ["/usr/bin/true"]\nevents = [{", ".join(map(toml_string, events))}]\n',
            "notify[0].events", event)


@SETTINGS
@given(program=TEXT.filter(lambda p: not p.startswith("/") and "\x00" not in p), args=st.lists(TEXT, max_size=3))
def test_a_relative_command_path_is_named(tmp: Path, program: str, args: list[str]) -> None:
    argv = ", ".join(toml_string(a) for a in [program, *args])
    error = refused(tmp, f"command = [{argv}]\n", "notify[0].command", program)
    assert "absolute path" in error.message


@SETTINGS
@given(name=st.text("abcdefghij-_.", min_size=1, max_size=12))
def test_a_missing_or_non_executable_program_is_named(tmp: Path, name: str) -> None:
    missing = f"/nonexistent-cud-dir/{name}"
    refused(tmp, f"command = [{toml_string(missing)}]\n", "notify[0].command", missing)
    plain = tmp / f"plain-{name}"
    plain.write_text("not a program")
    plain.chmod(0o644)
    refused(tmp, f"command = [{toml_string(str(plain))}]\n", "notify[0].command", str(plain))


HOST = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
MALFORMED_URLS = st.one_of(
    TEXT.filter(lambda t: "://" not in t),  # no scheme at all (ntfy.sh/topic, words, nothing)
    st.builds("{}://{}/hook".format, st.sampled_from(["ftp", "file", "ws", "gopher", "htp", "javascript"]), HOST),
    st.builds("http://{}:{}/".format, HOST, st.integers(65536, 10**7)),  # port out of range
    st.builds("https://{}:{}/".format, HOST, TEXT.filter(lambda p: p and not p.isdigit() and "/" not in p
                                                          and "@" not in p and "?" not in p and "#" not in p)),
    st.builds("https://{}{}{}/".format, HOST, st.sampled_from([" ", "\t", "\n", "\u3000"]), HOST),  # whitespace
    st.builds("https://{}:{}@{}/".format, HOST, HOST, HOST),  # credentials belong in secret_file
    st.builds("http://{}/#{}".format, HOST, HOST),  # a fragment is never sent
    st.builds("{}:///path".format, st.sampled_from(["http", "https"])),  # no host
)


@SETTINGS
@given(url=MALFORMED_URLS)
def test_a_malformed_url_is_named(tmp: Path, url: str) -> None:
    refused(tmp, f"webhook = {toml_string(url)}\n", "notify[0].webhook", url)


@SETTINGS
@given(fmt=TEXT.filter(lambda f: f not in FORMATS))
def test_an_unknown_format_is_named(tmp: Path, fmt: str) -> None:
    refused(tmp, f'webhook = "https://example.com/h"\nformat = {toml_string(fmt)}\n', "notify[0].format", fmt)


@SETTINGS
@given(name=st.text("abcdefghij0123456789-_", min_size=1, max_size=16))
def test_a_missing_credentials_file_is_named(tmp: Path, name: str) -> None:
    missing = str(tmp / "no-such-dir" / name)
    hook = f'webhook = "https://example.com/h"\nsecret_header = "Authorization"\nsecret_file = {toml_string(missing)}\n'
    error = refused(tmp, hook, "notify[0].secret_file", missing)
    assert "No such file" in error.message
    creds = tmp / "empty-creds"
    creds.mkdir(exist_ok=True)
    hook = f'webhook = "https://example.com/h"\nsecret_header = "X-Token"\nsecret_credential = {toml_string(name)}\n'
    refused(tmp, hook, "notify[0].secret_credential", str(creds / name), env={"CREDENTIALS_DIRECTORY": str(creds)})
    refused(tmp, hook, "notify[0].secret_credential", name, env={})


NUMBERS = st.one_of(st.floats(allow_nan=True), st.integers(-10**6, 10**6), TEXT, st.booleans())
#: Each number key's range as the config takes it, and whether it takes fractions.
RANGES = {"timeout": (0.1, 300, True), "retries": (0, 10, False), "backoff": (0, 600, True), "concurrency": (1, 64, False)}


def _taken(key: str, value: object) -> bool:
    low, high, fractions = RANGES[key]
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and (fractions or type(value) is int)
    return number and low <= value <= high  # type: ignore[operator]


def _near_the_ends(key: str) -> st.SearchStrategy[object]:
    """Any number, but mostly one at or just either side of an end of the key's range, where an off-by-one or
    a wrong comparison shows."""
    ends = [float(end) for end in RANGES[key][:2]]
    exact = [v for end in ends for v in (math.nextafter(end, -math.inf), end, math.nextafter(end, math.inf),
                                         math.floor(end) - 1, math.ceil(end), math.floor(end) + 1)]
    around = st.one_of(*(st.floats(end - 1, end + 1) for end in ends))
    return st.one_of(NUMBERS, around, *[st.sampled_from(exact)] * 3)


@pytest.mark.parametrize("key", sorted(RANGES))
@SETTINGS
@given(data=st.data())
def test_an_out_of_range_number_is_named(tmp: Path, key: str, data: st.DataObject) -> None:
    value = data.draw(_near_the_ends(key), label="value")
    if _taken(key, value):
        [hook] = load(tmp, f'command = ["/usr/bin/true"]\n{key} = {value!r}\n')
        assert getattr(hook, key) == value
        return
    text = toml_string(value) if isinstance(value, str) else str(value).lower()
    if isinstance(value, float):
        text = {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(text, repr(value))
    refused(tmp, f'command = ["/usr/bin/true"]\n{key} = {text}\n', f"notify[0].{key}", value)


@pytest.mark.parametrize(("hook", "key", "value"), [
    ('command = ["/usr/bin/true"]\nwebhook = "https://example.com/"\n', "notify[0]", None),
    ('events = ["task_failed"]\n', "notify[0]", None),
    ('command = ["/usr/bin/true"]\nformat = "slack"\n', "notify[0].format", None),
    ('webhook = "https://example.com/"\nenv = { A = "b" }\n', "notify[0].env", None),
    ('command = ["/usr/bin/true"]\nurl = "https://example.com/"\n', "notify[0].url", None),
    ('command = "/usr/bin/true"\n', "notify[0].command", "/usr/bin/true"),
    ('command = []\n', "notify[0].command", []),
    ('command = ["/usr/bin/true"]\nevents = []\n', "notify[0].events", []),
    ('command = ["/usr/bin/true"]\nenv = { CUD_EVENT = "x" }\n', "notify[0].env.CUD_EVENT", "CUD_EVENT"),
    ('command = ["/usr/bin/true"]\nenv = { LD_PRELOAD = "/x.so" }\n', "notify[0].env.LD_PRELOAD", "LD_PRELOAD"),
    ('webhook = "https://example.com/"\nsecret_header = "Bad Header"\nsecret_file = "/etc/hostname"\n',
     "notify[0].secret_header", "Bad Header"),
    ('webhook = "https://example.com/"\nsecret_header = "Authorization"\n', "notify[0].secret_header", None),
    ('webhook = "https://example.com/"\nsecret_file = "/etc/hostname"\n', "notify[0].secret_file", None),
    ('webhook = "https://example.com/"\nsecret_header = "A"\nsecret_file = "rel/path"\n', "notify[0].secret_file",
     "rel/path"),
    ('webhook = "https://ntfy.sh/"\nformat = "ntfy"\n', "notify[0].webhook", "https://ntfy.sh/"),
])
def test_each_misplaced_or_missing_key_is_named(tmp: Path, hook: str, key: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp, hook)
    assert key in caught.value.message and (value is None or repr(value) in caught.value.message), caught.value.message


def test_notify_must_be_an_array_of_tables_with_distinct_names(tmp: Path) -> None:
    path = tmp / "cud.toml"
    path.write_text(BASE + '[notify]\ncommand = ["/usr/bin/true"]\n')
    with pytest.raises(ConfigError, match=r"'notify' must be an array of tables"):
        load_config(path, env={})
    with pytest.raises(ConfigError, match=r"two \[\[notify\]\] hooks are named 'x'"):
        load(tmp, 'name = "x"\ncommand = ["/usr/bin/true"]\n[[notify]]\nname = "x"\ncommand = ["/usr/bin/true"]\n')


def test_cud_run_stops_at_once_on_a_bad_hook(tmp: Path) -> None:
    path = tmp / "bad-run.toml"
    path.write_text(BASE + '[[notify]]\ncommand = ["notify-send", "cud"]\n')
    done = subprocess.run([sys.executable, "-m", "cud.daemon.main", "run", "--config", str(path)],
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x"},
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "config key 'notify[0].command' must be a command whose program is an absolute path" in done.stderr
    assert "'notify-send'" in done.stderr


@SETTINGS
@given(scheme=st.sampled_from(["http", "https"]), host=st.one_of(HOST, st.just("127.0.0.1"), st.just("[::1]"),
                                                                  st.builds("{}.example.com".format, HOST)),
       port=st.one_of(st.just(""), st.integers(1, 65535).map(":{}".format)),
       path=st.lists(HOST, max_size=3).map("/".join), query=st.one_of(st.just(""), HOST.map("?q={}".format)))
def test_every_well_formed_url_is_taken_as_written(tmp: Path, scheme: str, host: str, port: str, path: str,
                                                   query: str) -> None:
    url = f"{scheme}://{host}{port}/{path}{query}"
    [hook] = load(tmp, f"webhook = {toml_string(url)}\n")
    assert hook.webhook == url and hook.kind == "webhook"
