"""OSWorld's getters of the live browser's tabs, as a program the seat's user runs: ``python3 -c SOURCE PROFILE
GETTER``, which writes the getter's value on its standard output.

Ported from desktop-env 1.0.2 (OSWorld's code, Apache-2.0), evaluators/getters/chrome.py:

* ``active_url`` stands for ``get_active_url_from_accessTree`` and ``get_active_tab_info`` (whose metrics,
  is_expected_active_tab and is_expected_url_pattern_match, read only its ``url``): the URL of the tab the
  user last brought to the front, as text;
* ``open_tabs`` stands for ``get_open_tabs_info``: every tab's ``{"title", "url"}``, as a JSON list.
* ``url_parse CONFIG`` stands for ``get_active_tab_url_parse``: the query values of the active tab's URL that
  CONFIG (the getter's ``parse_keys``, ``replace``, ``split_list``, as JSON) names, as a JSON object, ``null``
  without a browser. Its one metric, check_direct_json_object, reads the text as JSON after turning every
  ``'`` into ``"``, so the program writes a ``'`` of a value as ``\u0027``.

OSWorld reads the address bar of Google Chrome's accessibility tree (``goto_prefix`` glued to its text, which
elides ``https://www.``) and, for ``get_active_tab_info``, loads that URL again in a new page through
Playwright. This program reads the browser's own DevTools list on loopback instead (``/json/list``): its
pages come most recently activated first, so the first is the tab in front, and its URL is the whole URL,
never an elided one (docs/osworld.md, "Chrome", says where the values differ). When no browser answers
(no ``DevToolsActivePort``, or a stale one), the value is empty, as OSWorld's getters give None or ``[]``;
the metrics score that 0.

The standard library only, so the system's ``python3`` runs it.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from typing import Any

from cud.osworld.chrome_open_tabs import call, endpoint


def pages(profile: str) -> list[dict[str, str]]:
    """The browser's tabs, most recently activated first; none when no browser answers."""
    try:
        listed = call(endpoint(profile), "/json/list")
    except (OSError, ValueError):
        return []
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in listed if t.get("type") == "page"]


def url_parse(url: str, config: dict[str, Any]) -> dict[str, Any]:
    """get_active_tab_url_parse's reading of the URL's query, its expressions as written."""
    query_params = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    extracted_params = {key: query_params.get(key, [''])[0] for key in config["parse_keys"]}
    if "replace" in config:
        for key in config["replace"].keys():
            value = extracted_params.pop(key)
            extracted_params[config["replace"][key]] = value
    if config.get("split_list", False):
        return {key: extracted_params[key].split(',') for key in extracted_params.keys()}
    return extracted_params


def main(argv: list[str]) -> int:
    profile, name, *config = argv
    tabs = pages(profile)
    if name == "active_url":
        out = tabs[0]["url"] if tabs else ""
    elif name == "open_tabs":
        out = json.dumps(tabs) if tabs else ""
    elif name == "url_parse":
        out = json.dumps(url_parse(tabs[0]["url"], json.loads(config[0])) if tabs else None).replace("'", "\\u0027")
    else:
        raise SystemExit(f"chrome_tabs: no getter {name!r}")
    sys.stdout.buffer.write(out.encode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
