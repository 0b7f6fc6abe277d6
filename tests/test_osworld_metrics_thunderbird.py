"""cud's Thunderbird metrics give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws the profile files these metrics read (prefs.js lines, msgFilterRules.dat filters, a mail
folder's messages, with noise and malformed lines) and the rules the tasks give; cud's port
(cud/osworld/metrics/thunderbird.py) and OSWorld's function (tests/support/osworld_reference.py) must
score alike, or raise alike.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ("check_thunderbird_prefs", "check_thunderbird_filter", "check_thunderbird_folder")


def agree(name: str, *args: Any, **options: Any) -> None:
    ours, theirs = outcome(metric(name), *args, **options), outcome(reference(name), *args, **options)
    assert ours == theirs, f"{name}{args!r} {options!r}: cud {ours}, OSWorld {theirs}"


def on_file(name: str, text: str, *args: Any, **options: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "file")
        path.write_text(text)
        agree(name, str(path), *args, **options)
        agree(name, None, *args, **options)


def test_each_metric_is_catalogued() -> None:
    for name in NAMES:
        assert FUNCTIONS[name] == f"thunderbird:{name}" and METRICS[name].expected
    assert METRICS["check_thunderbird_folder"].options == {"ignore_status", "ignore_keys", "remove_deleted",
                                                           "remove_duplicate"}


# -- prefs.js ------------------------------------------------------------------------------------

PREF_KEYS = ["mail.server.default.applyIncomingFilters", "extensions.activeThemeID", "mail.identity.id1.auto_quote",
             'a\\"b']
pref_values = st.one_of(st.booleans(), st.integers(-3, 3),
                        st.sampled_from(["default-theme@mozilla.org", "thunderbird-compact-dark@mozilla.org",
                                         "Anonym\nXYZ Lab", 'say "hi"', ""]))


@st.composite
def pref_lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["pref", "pref", "pref", "comment", "broken", "raw"]))
    key = draw(st.sampled_from(PREF_KEYS))
    if kind == "comment":
        return "// Mozilla User Preferences"
    if kind == "broken":  # no closing ");": not a pref line
        return f'user_pref("{key}", true'
    if kind == "raw":  # a value JSON cannot read: both raise
        return f'user_pref("{key}", tru);'
    return f'  user_pref("{key}", {json.dumps(draw(pref_values))});  '


pref_rules = st.dictionaries(st.sampled_from(PREF_KEYS), st.one_of(
    st.fixed_dictionaries({"method": st.sampled_from(["eq", "ne"]), "ref": pref_values}),
    st.fixed_dictionaries({"method": st.sampled_from(["re", "re.S", "re.I"]),
                           "ref": st.sampled_from(["dark", "Anonym\\nXYZ Lab", "^$", "hi"])})), max_size=3)


@SETTINGS
@given(st.lists(pref_lines(), max_size=8), pref_rules, pref_rules)
@example(['user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");'],
         {"extensions.activeThemeID": {"method": "re", "ref": "dark"}}, {})
def test_check_thunderbird_prefs_scores_as_osworld(lines: list[str], expect: dict[str, Any],
                                                   unexpect: dict[str, Any]) -> None:
    on_file("check_thunderbird_prefs", "\n".join(lines) + "\n", {"expect": expect, "unexpect": unexpect})
    on_file("check_thunderbird_prefs", "\n".join(lines), {"expect": expect})


# -- msgFilterRules.dat --------------------------------------------------------------------------

CONDITIONS = ["AND (subject,contains,discount)", "ALL", 'OR (from,is,"a\\"b")', "AND (body,doesn't contain,x)",
              "OR (to or cc,contains,me)"]


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def filter_files(draw: st.DrawFn) -> str:
    lines = ['version="9"', 'logging="no"']
    for _ in range(draw(st.integers(0, 3))):
        fields = [("name", draw(st.sampled_from(["Promo", 'x "y"', ""]))),
                  ("enabled", draw(st.sampled_from(["yes", "no"]))), ("type", "17"),
                  ("action", draw(st.sampled_from(["Move to folder", "Forward", "Mark read"]))),
                  ("actionValue", draw(st.sampled_from(["mailbox://nobody@Local%20Folders/Promotions",
                                                        "anonym-x2024@gmail.com", 'C:\\mail "x"']))),
                  ("condition", " ".join(draw(st.lists(st.sampled_from(CONDITIONS), min_size=1, max_size=3))))]
        if draw(st.integers(0, 9)) == 0:  # a filter out of order: a field before its name= line
            fields.reverse()
        lines += [f"{key}={quoted(value)}" for key, value in fields]
    return "\n".join(lines) + "\n"


records = st.lists(st.dictionaries(
    st.sampled_from(["name", "enabled", "action", "actionValue", "condition"]),
    st.one_of(st.sampled_from(["yes", "Promo", "Forward", "Move to folder", "anonym-x2024@gmail.com",
                               'C:\\mail "x"']),
              st.lists(st.sampled_from(["ALL", "AND (subject,contains,discount)"]), max_size=2)), max_size=3),
    max_size=2)


@SETTINGS
@given(filter_files(), records, records)
@example('name="F"\nenabled="yes"\ntype="17"\naction="Forward"\nactionValue="anonym-x2024@gmail.com"\n'
         'condition="ALL"\n', [{"enabled": "yes", "action": "Forward", "actionValue": "anonym-x2024@gmail.com",
                                "condition": ["ALL"]}], [])
@example('name="F"\nenabled="no"\naction="Forward"\nactionValue="C:\\\\mail \\"x\\""\n'
         'condition="OR (from,is,\\"a\\\\\\"b\\")"\n', [], [{"actionValue": 'C:\\mail "x"'}])
def test_check_thunderbird_filter_scores_as_osworld(text: str, expect: list[Any], unexpect: list[Any]) -> None:
    on_file("check_thunderbird_filter", text, {"expect": expect, "unexpect": unexpect})
    on_file("check_thunderbird_filter", text, {"expect": expect})


# -- a mail folder -------------------------------------------------------------------------------

messages = st.lists(st.one_of(
    st.just(""), st.just("  \n"),
    st.builds("X-Mozilla-Status: {}\nX-Mozilla-Keys: {}\nMIME-Version: 1.0\nSubject: {}\n\nbody\n".format,
              st.sampled_from(["0001", "0008", "0009", "0000"]), st.sampled_from(["", "$label1"]),
              st.sampled_from(["Bills", "Hi"]))), max_size=4)
folder_options = st.fixed_dictionaries({}, optional={name: st.booleans() for name in
                                                     ("ignore_status", "ignore_keys", "remove_deleted",
                                                      "remove_duplicate")})


@SETTINGS
@given(messages, messages, folder_options)
def test_check_thunderbird_folder_scores_as_osworld(ours: list[str], gold: list[str], options: dict[str, bool]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp, "have_seen"), Path(tmp, "have_seen_gold")
        first.write_text("".join(f"FROM - {m}" for m in ours))
        second.write_text("".join(f"FROM - {m}" for m in gold))
        for pair in ((str(first), str(second)), (str(second), str(second)), (None, str(second)),
                     ([str(first), str(second)], [str(second), str(second)])):
            agree("check_thunderbird_folder", *pair, **options)


def test_the_judge_runs_the_thunderbird_metrics_on_a_profiles_files(tmp_path: Path) -> None:
    """Each port is registered (FUNCTIONS, the catalog) and scores through the judge's request, on the files and
    rules of OSWorld's Thunderbird tasks."""
    from cud.osworld.judge import judge

    prefs = tmp_path / "prefs.js"
    prefs.write_text('// Mozilla User Preferences\n'
                     'user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");\n'
                     'user_pref("mail.server.default.applyIncomingFilters", true);\n'
                     'user_pref("mail.imap.use_status_for_biff", false);\n')
    filters = tmp_path / "msgFilterRules.dat"
    filters.write_text('version="9"\nlogging="no"\nname="Promotions"\nenabled="yes"\ntype="17"\n'
                       'action="Move to folder"\nactionValue="mailbox://nobody@Local%20Folders/Promotions"\n'
                       'condition="AND (subject,contains,discount)"\n')
    signature = {"expect": {"mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym\\nXYZ Lab"}}}
    biff = {"expect": {"mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
                       "mail.imap.use_status_for_biff": {"method": "eq", "ref": False}},
            "unexpect": {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}}
    promotions = {"expect": [{"enabled": "yes", "action": "Move to folder",
                              "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
                              "condition": ["AND (subject,contains,discount)"]}]}
    forward = {"expect": [{"enabled": "yes", "action": "Forward", "condition": ["ALL"]}]}
    for name, path, rules, score in (("check_thunderbird_prefs", prefs, signature, 1.0),
                                     ("check_thunderbird_prefs", prefs, biff, 1.0),
                                     ("check_thunderbird_prefs", prefs, {"expect": {"x": {"method": "eq", "ref": 1}}}, 0.0),
                                     ("check_thunderbird_filter", filters, promotions, 1.0),
                                     ("check_thunderbird_filter", filters, forward, 0.0)):
        request = {"metric": name, "result": {"path": str(path)}, "expected": {"value": rules}}
        assert judge(request) == {"score": score}, (name, rules)
    absent = judge({"metric": "check_thunderbird_prefs", "result": {"none": "absent"}, "expected": {"value": biff}})
    assert absent == {"score": 0.0}
