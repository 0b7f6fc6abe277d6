"""cud's is_expected_bookmarks (cud/osworld/metrics/chrome.py) gives OSWorld's verdicts: against desktop-env 1.0.2's
get_bookmarks followed by its is_expected_bookmarks (tests/support/osworld_reference.py), on Hypothesis-made
Bookmarks files (Chromium's format, with parts missing or of the wrong type) and the rules OSWorld's tasks give."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.osworld.metrics import metric
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import FakeVm, reference, reference_getter

URLS = ["https://jalammar.github.io/illustrated-transformer/", "https://blog.eleuther.ai/rotary-embeddings/",
        "https://a.example/"]
NAMES = ["Favorites", "Liked Authors", "Work"]


#: Where OSWorld's getter finds Chrome's Bookmarks in the VM.
BOOKMARKS_PATH = "/home/user/.config/google-chrome/Default/Bookmarks"

def theirs(content: bytes | None, rule: dict[str, Any]) -> Any:
    def run() -> float:
        found = reference_getter("chrome", "get_bookmarks")(FakeVm(content=content, asked=BOOKMARKS_PATH), {})
        score: float = reference("is_expected_bookmarks")(found, rule)
        return score
    return outcome(run)


def ours(content: bytes | None, rule: dict[str, Any]) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        if content is not None:
            path = str(Path(tmp) / "Bookmarks")
            Path(path).write_bytes(content)
        return outcome(metric("is_expected_bookmarks"), path, rule)


url_node = st.fixed_dictionaries({"type": st.just("url"), "url": st.sampled_from(URLS), "name": st.just("x")})
node = st.recursive(url_node, lambda inner: st.fixed_dictionaries(
    {"type": st.just("folder"), "name": st.sampled_from(NAMES), "children": st.lists(inner, max_size=3)}), max_leaves=6)
odd = st.none() | st.integers() | st.text(max_size=3) | st.fixed_dictionaries({}, optional={"type": st.just("url")})
roots = st.fixed_dictionaries({}, optional={
    "bookmark_bar": st.fixed_dictionaries({"children": st.lists(node, max_size=4)})
    | st.fixed_dictionaries({}, optional={"children": st.lists(node | odd, max_size=3) | odd}) | odd,
    "other": st.just({"children": []})})
content = (st.fixed_dictionaries({"roots": roots}).map(lambda d: json.dumps(d).encode())
           | st.fixed_dictionaries({}, optional={"roots": roots | odd, "version": st.just(1)}).map(
    lambda d: json.dumps(d).encode()) | st.sampled_from([None, b"", b"{", b"[]", b"null"]))
urls = st.lists(st.sampled_from(URLS), max_size=3)
rule = (st.fixed_dictionaries({"type": st.just("bookmark_bar_folders_names"), "names": st.lists(st.sampled_from(NAMES),
                                                                                                max_size=3)})
        | st.fixed_dictionaries({"type": st.just("bookmark_bar_websites_urls"), "urls": urls})
        | st.fixed_dictionaries({"type": st.just("liked_authors_websites_urls"),
                                 "urls": st.lists(st.sampled_from(URLS) | urls, max_size=3)})
        | st.just({"type": "bookmark_bar_other"}))

TRANSFORMER = json.dumps({"roots": {"bookmark_bar": {"children": [
    {"type": "url", "url": URLS[0], "name": "The Illustrated Transformer"}]}}}).encode()
TWICE = json.dumps({"roots": {"bookmark_bar": {"children": [
    {"type": "url", "url": u, "name": "x"} for u in (URLS[0], URLS[1], URLS[0])]}}}).encode()


@settings(max_examples=300, deadline=None)
@given(content, rule)
@example(TRANSFORMER, {"type": "bookmark_bar_websites_urls", "urls": [URLS[0]]})
@example(TRANSFORMER, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]})
@example(None, {"type": "bookmark_bar_websites_urls", "urls": []})
@example(TWICE, {"type": "bookmark_bar_websites_urls", "urls": [URLS[1], URLS[0]]})  # a set: order and repeats aside
@example(json.dumps({"roots": {"bookmark_bar": {"children": [{"type": "folder", "name": "Liked Authors", "children": [
    {"type": "url", "url": URLS[1]}, {"type": "url", "url": URLS[2]}]}]}}}).encode(),
    {"type": "liked_authors_websites_urls", "urls": [[URLS[0], URLS[2]], URLS[1]]})
def test_is_expected_bookmarks_scores_as_osworld(content: bytes | None, rule: dict[str, Any]) -> None:
    assert ours(content, copy.deepcopy(rule)) == theirs(content, copy.deepcopy(rule))


def test_the_transformer_bookmark_passes_and_a_missing_one_fails() -> None:
    assert ours(TRANSFORMER, {"type": "bookmark_bar_websites_urls", "urls": [URLS[0]]}) == ("score", 1.0)
    assert ours(TRANSFORMER, {"type": "bookmark_bar_websites_urls", "urls": URLS[:2]}) == ("score", 0.0)
    assert ours(None, {"type": "bookmark_bar_folders_names", "names": []}) == ("score", 0.0)


# -- the metrics of the live browser's tabs ------------------------------------------------------------------------
# cud's getters (cud/osworld/chrome_tabs.py) give the active tab's URL as text ("" for none: OSWorld's None) and the
# open tabs as a JSON list ("" for none: OSWorld's []); OSWorld's metrics are given what its getters give.

SCHEMES = ["https://", "http://", "", "HTTPS://", "chrome://"]
HOSTS = ["www.drugs.com", "drugs.com", "www.airbnb.com.sg", "airbnb.com", "a.b.github.io", "127.0.0.1:8000",
         "localhost", "WWW.Example.co.uk", "www.www.example.com", "settings"]
PATHS = ["", "/", "/npc/", "/npc", "/a?x=1#f", "/p;q", "/appearance"]
url = (st.tuples(st.sampled_from(SCHEMES), st.sampled_from(HOSTS), st.sampled_from(PATHS)).map("".join)
       | st.text(max_size=12))
PATTERNS = ["^https://(www\\.)?drugs\\.com", "npc", "forms\\?title=", "^chrome://settings/appearance/?$", "", "(",
            "[a-", "github"]


def ours_tab(name: str, value: str, rule: dict[str, Any]) -> Any:
    return outcome(metric(name), value, rule)


@settings(max_examples=300, deadline=None)
@given(url, url)
@example("https://www.drugs.com/npc/", "https://drugs.com/npc")
@example("https://www.airbnb.com.sg/", "http://airbnb.com")
@example("", "https://www.drugs.com/npc/")
def test_is_expected_active_tab_scores_as_osworld(active: str, expected: str) -> None:
    rule = {"type": "url", "url": expected}
    theirs_ = outcome(reference("is_expected_active_tab"), active or None, rule)
    assert ours_tab("is_expected_active_tab", active, rule) == theirs_
    if active:  # active_tab_info's dict: its url is all the metric reads
        info = {"title": "t", "url": active, "content": "<html></html>"}
        assert outcome(reference("is_expected_active_tab"), info, rule) == theirs_
    other = {"type": "title", "url": expected}
    assert ours_tab("is_expected_active_tab", active, other) == outcome(reference("is_expected_active_tab"),
                                                                        active or None, other)


@settings(max_examples=300, deadline=None)
@given(url, st.lists(st.sampled_from(PATTERNS) | st.text(max_size=4), max_size=3))
@example("https://www.drugs.com/npc/", ["^https://(www\\.)?drugs\\.com", "npc"])
@example("https://www.drugs.com/npc/", ["("])
@example("", [])
def test_is_expected_url_pattern_match_scores_as_osworld(active: str, patterns: list[str]) -> None:
    rules = {"expected": patterns}
    theirs_ = outcome(reference("is_expected_url_pattern_match"), active or None, rules)
    assert ours_tab("is_expected_url_pattern_match", active, rules) == theirs_
    if active:
        info = {"title": "t", "url": active, "content": ""}
        assert outcome(reference("is_expected_url_pattern_match"), info, rules) == theirs_


@settings(max_examples=300, deadline=None)
@given(st.lists(url, max_size=4), st.lists(url, max_size=4), st.sampled_from(["url", "title"]))
@example(["https://www.lonelyplanet.com/", "https://airbnb.com"], ["https://www.airbnb.com", "https://lonelyplanet.com"],
         "url")
@example([], [], "url")
def test_is_expected_tabs_scores_as_osworld(opened: list[str], expected: list[str], kind: str) -> None:
    tabs = [{"title": f"t{i}", "url": u} for i, u in enumerate(opened)]
    rule = {"type": kind, "urls": expected}
    assert ours_tab("is_expected_tabs", json.dumps(tabs) if tabs else "", rule) == \
        outcome(reference("is_expected_tabs"), tabs, copy.deepcopy(rule))


def test_the_tab_metrics_pass_the_right_tab_and_fail_another() -> None:
    assert ours_tab("is_expected_active_tab", "https://www.drugs.com/npc/",
                    {"type": "url", "url": "http://drugs.com/npc/"}) == ("score", 0.0)  # the scheme counts
    assert ours_tab("is_expected_active_tab", "https://www.drugs.com/npc/",
                    {"type": "url", "url": "https://drugs.com/npc/"}) == ("score", 1.0)
    assert ours_tab("is_expected_active_tab", "https://www.drugs.com/npp/",
                    {"type": "url", "url": "https://drugs.com/npc"}) == ("score", 0.0)
    assert ours_tab("is_expected_url_pattern_match", "http://127.0.0.1:8000/one.html",
                    {"expected": ["one\\.html$"]}) == ("score", 1.0)
    assert ours_tab("is_expected_url_pattern_match", "", {"expected": []}) == ("score", 0.0)
    one = json.dumps([{"title": "a", "url": "https://a.example/"}])
    assert ours_tab("is_expected_tabs", one, {"type": "url", "urls": ["https://a.example"]}) == ("score", 1.0)
    assert ours_tab("is_expected_tabs", one, {"type": "url", "urls": ["https://b.example"]}) == ("score", 0.0)


@settings(max_examples=200, deadline=None)
@given(url, url)
@example("chrome://password-manager/passwords", "chrome://password-manager/passwords?q=1")
@example("https://www.drugs.com/npc/", "https://drugs.com/npc/")
def test_is_expected_active_tab_approximate_scores_as_osworld(active: str, expected: str) -> None:
    rule = {"type": "url", "url": expected}
    assert ours_tab("is_expected_active_tab_approximate", active, rule) == \
        outcome(reference("is_expected_active_tab_approximate"), active or None, rule)
