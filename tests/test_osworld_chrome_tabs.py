"""cud's reading of the active tab's URL query (cud/osworld/chrome_tabs.py ``url_parse``) gives OSWorld's: against
desktop-env 1.0.2's get_active_tab_url_parse (tests/support/osworld_reference.py), handed the same URL through the
address bar of an accessibility tree as OSWorld's getter reads it, on Hypothesis-made queries and configs; and the
text the program prints scores under check_direct_json_object as OSWorld's object does."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.osworld.chrome_tabs import url_parse
from cud.osworld.metrics import metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import FakeVm, address_bar, reference, reference_getter

KEYS = ["q", "city", "n", "fuel_slugs[]", "modelList", ""]




value = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=6)
query = st.lists(st.tuples(st.sampled_from(KEYS), value | st.just("a,b,,c")), max_size=5).map(urllib.parse.urlencode)
url = st.tuples(st.sampled_from(["https://www.example.com/s", "http://127.0.0.1:8000/x.html"]), query).map(
    lambda p: f"{p[0]}?{p[1]}")


@st.composite
def config(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    out: dict[str, Any] = {"parse_keys": keys}
    if draw(st.booleans()):
        out["replace"] = draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(["time", "t", *KEYS]),
                                              max_size=2))
    if draw(st.booleans()):
        out["split_list"] = draw(st.booleans())
    return out


@settings(max_examples=300, deadline=None)
@given(url, config())
@example("https://www.example.com/s?city=O%27Hare&n=1,2", {"parse_keys": ["city", "n"], "replace": {"n": "numbers"},
                                                             "split_list": True})
@example("https://www.example.com/s?q=a&q=b", {"parse_keys": ["q", "z"]})
def test_url_parse_reads_the_query_as_osworld(address: str, conf: dict[str, Any]) -> None:
    found = reference_getter("chrome", "get_active_tab_url_parse")(FakeVm(tree=address_bar(address)), {**conf, "goto_prefix": ""})
    ours = url_parse(address, conf)
    assert ours == found
    # What the program prints, as check_direct_json_object reads it (every ' turned into "), is the same object.
    printed = json.dumps(ours).replace("'", "\\u0027")
    assert json.loads(printed.strip().replace("'", '"')) == found
    for rules in ({"expected": found}, {"expected": {k: "x" for k in found}}):
        assert outcome(metric("check_direct_json_object"), printed, rules) == \
            outcome(reference("check_direct_json_object"), found, rules)
