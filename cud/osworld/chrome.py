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
  reads the live browser's tabs from its DevTools list as the seat's user; each is taken only by the metrics
  of :data:`TAB_METRICS`, which read of its value no more than the program gives.

Google Chrome's profile, ``~/.config/google-chrome``, is Chromium's ``~/.config/chromium`` (:data:`PROFILE`).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cud.osworld.chrome_open_tabs import CONNECT_SECONDS, LOAD_SECONDS
from cud.osworld.chrome_profile import FALLBACK
from cud.osworld.context import Context
from cud.osworld.seat import SYSTEM_PYTHON
from cud.spec import values as v

__all__ = ("BOOKMARKS", "BROWSER", "OSWORLD_PROFILE", "PROFILE", "PROFILE_GETTERS", "TAB_GETTERS", "TAB_METRICS",
           "open_tabs", "profile_getter", "program", "seat_command", "tab_getter")

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
               "active_tab_url_parse": "url_parse"}
#: The metrics that take each chrome_tabs getter: they read only the URL(s) the program prints (active_tab_info's
#: title and content, and the elided address-bar text of active_url_from_accessTree, are not there).
TAB_METRICS = {"active_url": frozenset({"is_expected_active_tab", "is_expected_active_tab_approximate",
                                        "is_expected_url_pattern_match"}),
               "open_tabs": frozenset({"is_expected_tabs"}), "url_parse": frozenset({"check_direct_json_object"})}


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
    # A module's annotated assignment is evaluated at run time, and ``typing`` is gone: a plain one instead.
    tree.body = [ast.Assign(targets=[n.target], value=n.value, lineno=n.lineno)
                 if isinstance(n, ast.AnnAssign) and n.value is not None else n for n in tree.body]
    return ast.unparse(tree)


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
    url_parse getter's config is an argument, as JSON."""
    config: list[str] = []
    if TAB_GETTERS[name] == "url_parse":
        config = [json.dumps(_url_parse_config(ctx, key, g))]
    return {"command": [SYSTEM_PYTHON, "-c", program("chrome_tabs"), PROFILE, TAB_GETTERS[name], *config]}


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
