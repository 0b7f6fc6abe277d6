"""OSWorld's Chrome metrics: the bookmarks metric, with the getter's reading of the Bookmarks file, and the
metrics of the live browser's tabs (is_expected_active_tab and its ``_approximate``, is_expected_url_pattern_match,
is_expected_tabs, with utils.py's compare_urls and are_lists_equal).

The tab metrics take what :mod:`cud.osworld.chrome_tabs` printed on the seat: the active tab's URL as text
(OSWorld's getters give it as text, or a dict whose ``url`` is all these metrics read), or the open tabs as a
JSON list (empty text for none, OSWorld's ``[]``). compare_urls reads domains with tldextract's bundled
public-suffix snapshot: OSWorld's ``tldextract.extract`` may fetch the newest list, which a judge without
network cannot. The metrics' logging is left out.

From desktop-env 1.0.2 (Apache-2.0): ``desktop_env/evaluators/metrics/chrome.py``
(is_expected_bookmarks), its logic line for line with its logging left out, and
``desktop_env/evaluators/getters/chrome.py`` (get_bookmarks), which reads the profile's
``Default/Bookmarks`` (OSWorld's ``~/.config/google-chrome``, the seat's ``~/.config/chromium``). A cud
check hands a metric the file, not a getter's value: the getter's reading is done here, on the judge's
copy of the file, before OSWorld's metric, so the metric takes the file's path (None when the profile
has none).
"""

from __future__ import annotations

import functools
import json
import re
from itertools import product
from typing import Any
from urllib.parse import ParseResult, urlparse, urlunparse

import tldextract

__all__ = ("are_lists_equal", "compare_urls", "is_expected_active_tab", "is_expected_active_tab_approximate",
           "is_expected_bookmarks", "is_expected_tabs", "is_expected_url_pattern_match", "read_bookmarks", "read_tabs")


def read_bookmarks(path: str | None) -> Any:
    """get_bookmarks: ``[]`` for no file (``get_file`` gives None) or an empty one, else the JSON's ``roots``."""
    if path is None:
        return []
    with open(path, "rb") as f:
        content = f.read()
    if not content:
        return []
    data = json.loads(content)
    return data.get('roots', {})


def is_expected_bookmarks(bookmarks: str | None, rule: dict[str, Any]) -> float:
    """``bookmarks``: the Bookmarks file's path (OSWorld's parameter of that name holds what get_bookmarks read)."""
    found: Any = read_bookmarks(bookmarks)
    if not found:
        return 0.
    elif rule['type'] == "bookmark_bar_folders_names":
        bookmark_bar_folders_names = [bookmark['name'] for bookmark in found['bookmark_bar']['children'] if
                                      bookmark['type'] == 'folder']
        return 1. if set(bookmark_bar_folders_names) == set(rule['names']) else 0.
    elif rule['type'] == "bookmark_bar_websites_urls":
        bookmark_bar_websites_urls = [bookmark['url'] for bookmark in found['bookmark_bar']['children'] if
                                      bookmark['type'] == 'url']
        return 1. if set(bookmark_bar_websites_urls) == set(rule['urls']) else 0.
    elif rule['type'] == "liked_authors_websites_urls":
        liked_authors_folder = next((bookmark for bookmark in found['bookmark_bar']['children'] if
                                     bookmark['type'] == 'folder' and bookmark['name'] == 'Liked Authors'), None)
        if liked_authors_folder:
            liked_authors_urls = [bookmark['url'] for bookmark in liked_authors_folder['children'] if
                                  bookmark['type'] == 'url']
            urls = rule['urls']
            for idx, url in enumerate(urls):
                if isinstance(url, str):
                    urls[idx] = [url]
            combinations = product(*urls)
            for combination in combinations:
                if set(combination) == set(liked_authors_urls):
                    return 1.
            return 0.
        else:
            return 0.
    else:
        raise TypeError(f"{rule['type']} not support yet!")


@functools.cache
def _extract() -> tldextract.TLDExtract:
    """tldextract's reader with its bundled snapshot only: never a download, never a cache file."""
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def compare_urls(url1: str | None, url2: str | None, full: bool = True) -> bool:
    """utils.py compare_urls: equal once the scheme is lowered, a lone ``www`` and the public suffix dropped, a
    bare ``/`` path emptied (and, not ``full``, params, query and fragment dropped)."""
    if url1 is None or url2 is None:
        return url1 == url2

    def parse_with_default_scheme(url: str) -> ParseResult:
        if not re.match(r'^[a-zA-Z][a-zA-Z0-9+\-.]*://', url):
            url = f"http://{url}"
        return urlparse(url)

    def normalize_url(url: str) -> str:
        parsed_url = parse_with_default_scheme(url)
        scheme = parsed_url.scheme.lower()
        extracted = _extract()(parsed_url.netloc.lower())
        subdomain = extracted.subdomain
        if subdomain == 'www':
            subdomain = ''
        if subdomain:
            normalized_netloc = f"{subdomain}.{extracted.domain}"
        else:
            normalized_netloc = extracted.domain
        normalized_path = parsed_url.path if parsed_url.path != '/' else ''
        normalized_parsed_url = ParseResult(
            scheme=scheme.lower(),
            netloc=normalized_netloc,
            path=normalized_path,
            params=parsed_url.params if full else '',
            query=parsed_url.query if full else '',
            fragment=parsed_url.fragment if full else '',
        )
        return urlunparse(normalized_parsed_url)

    return normalize_url(url1) == normalize_url(url2)


def are_lists_equal(list1: list[Any], list2: list[Any], comparison_func: Any) -> bool:
    """utils.py are_lists_equal: as long, and each item of the first equal to some item of the second."""
    if len(list1) != len(list2):
        return False
    for item1 in list1:
        if not any(comparison_func(item1, item2) for item2 in list2):
            return False
    return True


def _urls(active_tab_info: Any, rule: dict[str, Any]) -> tuple[Any, Any] | None:
    """The rule's URL and the active tab's (``active_tab_info`` itself, or its ``url``), as both of OSWorld's
    is_expected_active_tab metrics read them; None (a score of 0) without a tab or for a rule not of ``url``."""
    if not active_tab_info or rule['type'] != "url":
        return None
    actual = active_tab_info.get('url', None) if isinstance(active_tab_info, dict) else active_tab_info
    return rule['url'], actual


def is_expected_active_tab(active_tab_info: Any, rule: dict[str, Any]) -> float:
    """``active_tab_info``: the active tab's URL, empty text when no browser answered (OSWorld's None)."""
    urls = _urls(active_tab_info, rule)
    return 0 if urls is None else 1 if compare_urls(*urls) else 0


def is_expected_active_tab_approximate(active_tab_info: Any, rule: dict[str, Any]) -> float:
    """is_expected_active_tab with both URLs' queries dropped, and no other normalising."""
    urls = _urls(active_tab_info, rule)
    if urls is None:
        return 0

    def strip_query(url: Any) -> Any:
        return urlunparse(urlparse(url)._replace(query=""))
    return 1 if strip_query(urls[0]) == strip_query(urls[1]) else 0


def is_expected_url_pattern_match(result: Any, rules: dict[str, Any]) -> float:
    """``result``: the active tab's URL; every pattern of ``rules["expected"]`` must be found in it."""
    if not result:
        return 0.
    if isinstance(result, str):
        result_url = result
    elif isinstance(result, dict) and 'url' in result:
        result_url = result['url']
    else:
        return 0.
    patterns = rules["expected"]
    for pattern in patterns:
        match = re.search(pattern, result_url)
        if not match:
            return 0.
    return 1.


def read_tabs(text: str | None) -> Any:
    """What chrome_tabs printed for open_tabs_info: ``[]`` for nothing (no browser), else its JSON list."""
    return json.loads(text) if text else []


def is_expected_tabs(open_tabs: str | None, rule: dict[str, Any]) -> float:
    """``open_tabs``: the open tabs as chrome_tabs printed them (a JSON list of ``{"title", "url"}``)."""
    tabs = read_tabs(open_tabs)
    if not tabs:
        return 0.
    match_type = rule['type']
    if match_type == "url":
        expected_urls = rule['urls']
        actual_urls = [tab['url'] for tab in tabs]
        return 1 if are_lists_equal(expected_urls, actual_urls, compare_urls) else 0
    else:
        return 0
