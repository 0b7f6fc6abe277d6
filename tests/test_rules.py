"""Policy rules and the target phrase: parsing (random rule configs), matching, and what people are shown."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.daemon.config import load_config
from cud.daemon.targets.rules import RULE_KEYS, decide, parse_rules
from cud.errors import ConfigError
from cud.phrases.actions import describe_action

WINDOW = {"id": 1, "class": "Chromium", "instance": "chromium", "title": "Settings – Chromium", "pid": 4121,
          "process": "chromium"}
BUTTON = {"role": "push button", "name": "Delete account", "description": "", "states": [],
          "application": "Chromium", "bounds": [0, 0, 10, 10]}
POINT = {"kind": "point", "x": 530, "y": 191, "window": WINDOW, "element": BUTTON, "note": None, "ms": 3.0}


def rules(text: str) -> Any:
    return parse_rules("policy.rules", text)


def test_the_phrase_names_element_window_process_and_pid() -> None:
    action = {"type": "click", "button": "left", "x": 530, "y": 191}
    assert describe_action(action, POINT) == (
        'click "Delete account" (push button) in "Settings – Chromium" (chromium, pid 4121) at (530, 191)')
    typed = describe_action({"type": "type", "text": "hi"}, {**POINT, "kind": "focus"})
    assert typed == "type 'hi' into \"Delete account\" (push button) in \"Settings – Chromium\" (chromium, pid 4121)"
    window_only = describe_action(action, {**POINT, "element": None})
    assert window_only == 'click the window "Settings – Chromium" (chromium, pid 4121) at (530, 191)'
    vnc = {"kind": "point", "window": None, "element": None, "note": "unknown (VNC): …", "ms": 0}
    assert describe_action(action, vnc) == "click unknown (VNC) at (530, 191)"


@given(st.text(max_size=200))
def test_app_text_never_carries_control_characters(name: str) -> None:
    target = {**POINT, "element": {**BUTTON, "name": name}, "window": {**WINDOW, "title": name, "process": name}}
    phrase = describe_action({"type": "click", "button": "left", "x": 1, "y": 2}, target)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in phrase), repr(phrase)


def test_first_match_wins_and_the_default_stays() -> None:
    table = [{"action": "type", "app": "xterm", "decision": "ask"},
             {"role": "push button", "name": "re:delete|pay|send|transfer", "decision": "deny"},
             {"app": "chromium", "decision": "allow"}]
    parsed = rules(table)
    click = decide(parsed, (), "click", POINT)
    assert click is not None and (click.decision, click.rule) == ("deny", "policy.rules[1]")
    other = {**POINT, "element": {**BUTTON, "name": "Save"}}
    allowed = decide(parsed, (), "click", other)
    assert allowed is not None and allowed.decision == "allow"
    assert decide(parsed, (), "click", {**other, "window": {**WINDOW, "class": "Gedit", "instance": "gedit",
                                                            "process": "gedit"},
                                        "element": {**BUTTON, "name": "Save", "application": "gedit"}}) is None


def test_a_rule_that_cannot_see_asks_and_a_submitter_only_tightens() -> None:
    deny = rules([{"role": "push button", "name": "delete*", "decision": "deny"}])
    unsure = decide(deny, (), "click", {**POINT, "element": None})
    assert unsure is not None and unsure.decision == "ask" and "role, name" in unsure.unsure
    allow = rules([{"app": "chromium", "decision": "allow"}])
    task = parse_rules("rules", [{"name": "delete*", "decision": "ask"}], stricter_only=True)
    tightened = decide(allow, task, "click", POINT)
    assert tightened is not None and (tightened.decision, tightened.rule) == ("ask", "rules[0]")
    with pytest.raises(ConfigError, match=r"'submit' field 'rules\[0\].decision' is 'allow'"):
        parse_rules("rules", [{"decision": "allow"}], stricter_only=True, what="'submit' field")


def test_rules_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "cud.toml"
    path.write_text('display = ":9"\n[[policy.rules]]\naction = ["type", "keypress"]\nwindow_class = "XTerm"\n'
                    'decision = "ask"\n')
    (rule,) = load_config(path, env={}).rules
    assert rule.decision == "ask" and rule.actions == {"type", "keypress"}
    path.write_text('display = ":9"\n[[policy.rules]]\ntitle = "re:["\ndecision = "ask"\n')
    with pytest.raises(ConfigError, match=r"'policy.rules\[0\].title' is 're:\['"):
        load_config(path, env={})


# -- random rule configs: every bad one is a ConfigError naming its key and value ---------------------------
_GOOD = {"action": ["click", ["type", "keypress"]], "app": ["xterm", ["chrom*", "re:fire(fox)?"]],
         "window_class": ["XTerm"], "title": ["*Settings*"], "role": ["push button"],
         "name": ["re:delete|pay", "Cancel"], "decision": ["allow", "ask", "deny"], "id": ["no payments"]}
_BAD: dict[str, list[Any]] = {"action": ["tap", [], ["click", 3], 7], "app": ["", 5, [], ["ok", None]],
                              "window_class": [0, ""], "title": ["re:(", True], "role": [[], 1.5],
                              "name": ["re:*x", {"a": 1}], "decision": ["maybe", None, 1, "ALLOW"],
                              "id": ["", 3, "x" * 81]}


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 4))
def test_random_rule_configs(rng: random.Random, others: int) -> None:
    table: dict[str, Any] = {"decision": "ask"}
    for key in rng.sample(sorted(_GOOD), others):
        table[key] = rng.choice(_GOOD[key])
    kind = rng.choice(["good", "bad value", "unknown key"])
    bad_key: str | None = None
    if kind == "bad value":
        bad_key = rng.choice(sorted(_BAD))
        table[bad_key] = rng.choice(_BAD[bad_key])
    elif kind == "unknown key":
        bad_key = rng.choice(["actions", "Name", "rule", "deny", "class"])
        assert bad_key not in RULE_KEYS
        table[bad_key] = "x"
    index = rng.randrange(3)
    value = [{"decision": "allow"}] * index + [table]
    if bad_key is None:
        assert len(rules(value)) == index + 1
        return
    with pytest.raises(ConfigError) as caught:
        rules(value)
    message = caught.value.message
    assert f"policy.rules[{index}].{bad_key}" in message, (table, message)
    if kind == "bad value" and not isinstance(table[bad_key], list):
        assert repr(table[bad_key])[:40] in message, (table, message)


def test_seats_name_where_their_targets_are_read(tmp_path: Path) -> None:
    path = tmp_path / "cud.toml"
    path.write_text('[[seats]]\nname = "vm"\nvnc = "127.0.0.1::5901"\nx_display = ":1"\n'
                    'session_bus = "unix:path=/tmp/bus-vm"\n\n[[seats]]\nname = "x"\ndisplay = ":2"\n')
    vm, x = load_config(path, env={}).seats
    assert (vm.target_display, vm.session_bus) == (":1", "unix:path=/tmp/bus-vm")
    assert (x.target_display, x.session_bus) == (":2", None)
    for table, message in (('display = ":2"\nx_display = ":3"', "'seats[0].x_display' is for a VNC seat"),
                           ('vnc = "h::1"\nx_display = "one"', "'seats[0].x_display'"),
                           ('display = ":2"\nsession_bus = "nowhere"', "'seats[0].session_bus'")):
        path.write_text(f'[[seats]]\nname = "a"\n{table}\n')
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(path, env={})
