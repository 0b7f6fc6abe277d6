"""OSWorld's Chrome bookmarks metric, with the getter's reading of the Bookmarks file.

From desktop-env 1.0.2 (Apache-2.0): ``desktop_env/evaluators/metrics/chrome.py``
(is_expected_bookmarks), its logic line for line with its logging left out, and
``desktop_env/evaluators/getters/chrome.py`` (get_bookmarks), which reads the profile's
``Default/Bookmarks`` (OSWorld's ``~/.config/google-chrome``, the seat's ``~/.config/chromium``). A cud
check hands a metric the file, not a getter's value: the getter's reading is done here, on the judge's
copy of the file, before OSWorld's metric, so the metric takes the file's path (None when the profile
has none).
"""

from __future__ import annotations

import json
from itertools import product
from typing import Any

__all__ = ("is_expected_bookmarks", "read_bookmarks")


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
