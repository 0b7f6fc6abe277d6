"""OSWorld's Chrome on a cud seat: Debian's Chromium in Google Chrome's place (docs/osworld.md, "Chrome").

OSWorld's VM image runs ``google-chrome --remote-debugging-port=1337``, ``socat`` forwards the VM's port
9222 to it so that the host's Playwright reaches it (controllers/setup.py ``_chrome_open_tabs_setup``,
evaluators/getters/chrome.py), and ``pkill chrome`` ends it before a getter reads its profile. A seat has
Debian's ``chromium``, and cud's steps run inside the seat, so:

* ``google-chrome ARGS`` becomes ``chromium ARGS`` with ``--remote-debugging-port=0``: Chromium picks a
  free loopback port and writes it in the profile's ``DevToolsActivePort``, which only the seat's user
  reads; seats sharing a machine never fight over port 1337;
* the socat forwarder, whose only reader is OSWorld's host, becomes no step;
* ``pkill chrome`` becomes ``pkill chromium`` (Chromium's processes are ``chromium``, not ``chrome``);
* ``chrome_open_tabs`` becomes a ``run`` of :mod:`cud.osworld.chrome_open_tabs` with the URLs as arguments;
* the getters of :data:`PROFILE_GETTERS` become ``command`` getters running :mod:`cud.osworld.chrome_profile`,
  which reads the profile's Preferences as the seat's user, as the getters read the VM's file.
* the getters of :data:`TAB_GETTERS` become ``command`` getters running :mod:`cud.osworld.chrome_tabs`, which
  reads the live browser's tabs from its DevTools list as the seat's user (``active_tab_html_parse``:
  :mod:`cud.osworld.chrome_html`, which reads the front tab's DOM by the rules, :data:`HTML_CATEGORIES`); each
  is taken only by the metrics of :data:`TAB_METRICS`, which read of its value no more than the program gives.

Google Chrome's profile, ``~/.config/google-chrome``, is Chromium's ``~/.config/chromium`` (:data:`PROFILE`).
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cud.osworld.chrome_open_tabs import CONNECT_SECONDS, LOAD_SECONDS
from cud.osworld.chrome_profile import FALLBACK
from cud.osworld.context import Context
from cud.osworld.seat import SYSTEM_PYTHON
from cud.spec import values as v

__all__ = ("BOOKMARKS", "BROWSER", "HTML_CATEGORIES", "OSWORLD_PROFILE", "PROFILE", "PROFILE_GETTERS", "TAB_GETTERS",
           "TAB_METRICS", "open_tabs", "profile_getter", "program", "seat_command", "tab_getter")

#: The seat's browser, as the session's PATH finds it (Debian's package).
BROWSER = "chromium"
#: Chromium's user data directory in the seat's home, in Google Chrome's (:data:`OSWORLD_PROFILE`) place.
PROFILE = ".config/chromium"
OSWORLD_PROFILE = ".config/google-chrome"
#: getters/chrome.py get_bookmarks' file, which cud.osworld.metrics.chrome.is_expected_bookmarks reads.
BOOKMARKS = f"{PROFILE}/Default/Bookmarks"
#: The names OSWorld's tasks start Google Chrome by.
_CHROME_NAMES = frozenset({"google-chrome", "google-chrome-stable"})
_PORT = re.compile(r"--remote-debugging-port=\d+")
#: OSWorld's forwarder of the VM's 9222 to Chrome's 1337, for the host's Playwright.
_FORWARDER = ("socat", "tcp-listen:9222,fork", "tcp:localhost:1337")
#: The run step's bound beyond the program's wait for the browser and each URL's load.
_SPARE_SECONDS = 15
#: The most URLs one step opens within cud's longest ``run`` (600 s).
MAX_URLS = (600 - CONNECT_SECONDS - _SPARE_SECONDS) // LOAD_SECONDS
#: OSWorld's getters of one value of the profile's Preferences (cud.osworld.chrome_profile).
PROFILE_GETTERS = frozenset(FALLBACK)
#: OSWorld's getters of the live browser's tabs, and the chrome_tabs getter each is.
TAB_GETTERS = {"active_url_from_accessTree": "active_url", "active_tab_info": "active_url", "open_tabs_info": "open_tabs",
               "active_tab_url_parse": "url_parse", "active_tab_html_parse": "html_parse"}
#: The metrics that take each chrome_tabs getter: they read only the URL(s) the program prints (active_tab_info's
#: title and content, and the elided address-bar text of active_url_from_accessTree, are not there).
TAB_METRICS = {"active_url": frozenset({"is_expected_active_tab", "is_expected_active_tab_approximate",
                                        "is_expected_url_pattern_match"}),
               "open_tabs": frozenset({"is_expected_tabs"}), "url_parse": frozenset({"check_direct_json_object"}),
               "html_parse": frozenset({"check_direct_json_object"})}
#: get_active_tab_html_parse's keys each category reads, and the shape of each: ``rank`` {class: {index: key}},
#: ``names`` {class: [text, …]}, ``keys`` {class or xpath: key}, ``texts`` [text, …], ``pairs`` {text: text}.
HTML_CATEGORIES = {
    "class": {"class_multiObject": "rank", "class_multiObject_child": "rank", "class_multiObject_only_child": "rank",
              "class_multiObject_search_exist": "names", "class_singleObject": "keys"},
    "xpath": {"xpathObject": "keys"},
    "input": {"inputObject": "keys"},
    "class&url": {"class_multiObject": "names", "class_multiObject_li": "names", "url_include_expected": "texts",
                  "url_include_expected_multichoice": "pairs"},
}
#: The categories get_active_tab_html_parse reads that cud does not, and why.
_HTML_REFUSED = {"label": "it finds elements by Playwright's text= selector engine (its own matching of visible "
                          "text), which the page's DOM has no counterpart of"}


def seat_command(args: list[str]) -> list[str] | None:
    """An OSWorld command's argv as it runs on the seat (the module's rules); None for no step at all."""
    if tuple(args) == _FORWARDER:
        return None
    if args == ["pkill", "chrome"]:
        return ["pkill", BROWSER]
    if args and args[0] in _CHROME_NAMES:
        return [BROWSER, *(_PORT.sub("--remote-debugging-port=0", a) for a in args[1:])]
    return args


@functools.cache
def program(module: str) -> str:
    """The source of ``module`` (a standard-library program beside this one) as ``python3 -c`` text: without its
    docstrings, comments and annotations, so that it fits in one argument of a spec's argv
    (:data:`cud.spec.values.MAX_ARG`); the functions it imports from a program beside it are copied in, as the
    seat's ``python3`` has no cud to import them from."""
    tree = ast.parse(Path(__file__).with_name(f"{module}.py").read_text(encoding="utf-8"))
    tree.body = [n for n in tree.body if not (isinstance(n, ast.ImportFrom) and n.module in ("__future__", "typing"))]
    tree.body = [d for n in tree.body for d in (_inlined(n) if isinstance(n, ast.ImportFrom) else [n])]
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                    str):
                node.body = node.body[1:] or [ast.Pass()]
        if isinstance(node, ast.FunctionDef):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
    # A module's annotated assignment is evaluated at run time, and ``typing`` is gone: a plain one instead (a
    # function's too, for its length).
    tree = _Unannotated().visit(tree)
    text = ast.unparse(tree)
    # One space a level, not four: unparse writes no string over several lines (the docstrings are gone), so a
    # line's leading spaces are all indentation. Checked, as the text must be the same program.
    short = "\n".join(" " * ((len(line) - len(line.lstrip(" "))) // 4) + line.lstrip(" ")
                      for line in text.splitlines())
    if ast.dump(ast.parse(short)) != ast.dump(ast.parse(text)):
        raise AssertionError(f"program {module!r} changed when its indentation was shortened")
    if len(short) <= v.MAX_ARG:
        return short
    # Too long for one argument even so: the same text, compressed, run by a line of the standard library.
    packed = base64.b85encode(zlib.compress(short.encode("utf-8"), 9)).decode("ascii")
    return f"import base64, zlib\nexec(zlib.decompress(base64.b85decode({packed!r})))"


class _Unannotated(ast.NodeTransformer):
    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt | None:
        if node.value is None:
            return node
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)


def _inlined(node: ast.ImportFrom) -> list[ast.stmt]:
    """``from cud.osworld.M import f, …`` as M's own imports and the named definitions: the seat has no cud."""
    package, _, module = (node.module or "").rpartition(".")
    if package != __package__:
        return [node]
    source = ast.parse(Path(__file__).with_name(f"{module}.py").read_text(encoding="utf-8"))
    names = {a.name for a in node.names}
    return [n for n in source.body if isinstance(n, ast.Import)
            or isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name in names]


def open_tabs(ctx: Context, key: str, urls: object) -> list[dict[str, Any]]:
    """``chrome_open_tabs``'s ``urls_to_open`` as a ``run`` of the program, each URL an argument."""
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise ctx.refuse(key, urls, f"{key} must be a non-empty list of URLs, got {v.shown(urls)}")
    if len(urls) > MAX_URLS:
        raise ctx.refuse(key, urls, f"{key} opens {len(urls)} URLs, more than the {MAX_URLS} one step loads within "
                                    f"cud's longest run step (600 s)")
    return [{"run": [SYSTEM_PYTHON, "-c", program("chrome_open_tabs"), PROFILE, *urls],
             "timeout": CONNECT_SECONDS + LOAD_SECONDS * len(urls) + _SPARE_SECONDS}]


def profile_getter(name: str) -> dict[str, Any]:
    """One of :data:`PROFILE_GETTERS` as a metric check's ``command`` argument: the value as its output."""
    return {"command": [SYSTEM_PYTHON, "-c", program("chrome_profile"), PROFILE, name]}


def tab_getter(ctx: Context, key: str, name: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """One of :data:`TAB_GETTERS` as a metric check's ``command`` argument: the value as its output; the
    url_parse and html_parse getters' config is an argument, as JSON."""
    config: list[str] = []
    if TAB_GETTERS[name] == "html_parse":
        config = [json.dumps(_html_parse_config(ctx, key, g))]
        if len(config[0]) > v.MAX_ARG:
            raise ctx.refuse(key, g, f"{key}'s rules take {len(config[0])} characters as JSON, more than one "
                                     f"argument holds ({v.MAX_ARG})")
        return {"command": [SYSTEM_PYTHON, "-c", program("chrome_html"), PROFILE, *config]}
    if TAB_GETTERS[name] == "url_parse":
        config = [json.dumps(_url_parse_config(ctx, key, g))]
    return {"command": [SYSTEM_PYTHON, "-c", program("chrome_tabs"), PROFILE, TAB_GETTERS[name], *config]}


def _html_parse_config(ctx: Context, key: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """get_active_tab_html_parse's category and the keys it reads, refused where the getter would raise (an index
    ``int`` rejects, a missing category) or read what cud does not; the keys its category does not read are left
    out, as the getter ignores them."""
    category = g.get("category")
    if isinstance(category, str) and category in _HTML_REFUSED:
        raise ctx.refuse(f"{key}.category", category, f"OSWorld active_tab_html_parse category {category!r} in "
                                                      f"{key} has no counterpart in cud: {_HTML_REFUSED[category]}")
    if not isinstance(category, str) or category not in HTML_CATEGORIES:
        raise ctx.refuse(f"{key}.category", category, f"{key}.category must be one of "
                                                      f"{', '.join(HTML_CATEGORIES)}, got {v.shown(category)}")
    config: dict[str, Any] = {"category": category}
    for name, shape in HTML_CATEGORIES[category].items():
        if name in g:
            config[name] = _html_rule(ctx, f"{key}.{name}", g[name], shape)
    return config


def _html_rule(ctx: Context, key: str, value: object, shape: str) -> object:
    """One rule of get_active_tab_html_parse's config, checked to be of ``shape`` (:data:`HTML_CATEGORIES`)."""
    def texts(item: object) -> bool:
        return isinstance(item, list) and all(isinstance(t, str) for t in item)

    def index(text: object) -> bool:
        try:
            return isinstance(text, str) and int(text) >= 0  # a negative one past the end raises in the getter
        except ValueError:
            return False

    ok = {"texts": texts(value),
          "pairs": isinstance(value, Mapping) and all(isinstance(t, str) for t in value.values()),
          "keys": isinstance(value, Mapping) and all(isinstance(t, str) for t in value.values()),
          "names": isinstance(value, Mapping) and all(texts(t) for t in value.values()),
          "rank": isinstance(value, Mapping) and all(
              isinstance(t, Mapping) and all(index(i) and isinstance(k, str) for i, k in t.items())
              for t in value.values())}[shape]
    if not ok:
        want = {"texts": "a list of texts", "pairs": "an object of texts", "keys": "an object naming a key for each "
                "selector", "names": "an object of lists of texts", "rank": "an object of {index: key} objects, "
                "each index a whole number from 0"}[shape]
        raise ctx.refuse(key, value, f"{key} must be {want}, got {v.shown(value)}")
    return value


def _url_parse_config(ctx: Context, key: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """get_active_tab_url_parse's keys, refused where the getter would raise (a KeyError, a ``split`` of a list)."""
    keys = g.get("parse_keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ctx.refuse(f"{key}.parse_keys", keys, f"{key}.parse_keys must be a list of query keys, got "
                                                    f"{v.shown(keys)}")
    config: dict[str, Any] = {"parse_keys": keys}
    if "replace" in g:
        replace = g["replace"]
        if not isinstance(replace, Mapping) or not all(isinstance(k, str) and k in keys and isinstance(n, str)
                                                       for k, n in replace.items()):
            raise ctx.refuse(f"{key}.replace", replace, f"{key}.replace must map keys of {key}.parse_keys to new "
                                                        f"names, got {v.shown(replace)}")
        config["replace"] = dict(replace)
    split = g.get("split_list", False)
    if not isinstance(split, bool):
        raise ctx.refuse(f"{key}.split_list", split, f"{key}.split_list must be true or false, got {v.shown(split)}")
    if split:
        config["split_list"] = True
    return config
