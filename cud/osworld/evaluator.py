"""OSWorld's ``evaluator`` as cud checks, ``postconfig`` steps and ``pass_if`` (docs/osworld.md, "Evaluator").

Ported from OSWorld's desktop_env (Apache-2.0): desktop_env.py (DesktopEnv._set_evaluator_info
and evaluate), evaluators/getters (file.py: get_vm_file, get_cloud_file; general.py:
get_vm_command_line, get_vm_command_error; misc.py: get_rule; gimp.py: get_gimp_config_file; the getters that
act first are cud.osworld.getter_steps), and for ``infeasible`` the runner
of OpenAI's computer-use model (mm_agents/openai_cua_agent.py: OpenAICUAAgent.predict).

* A metric of :data:`cud.osworld.catalog.METRICS` becomes a ``metric`` check (docs/specs.md),
  its getters ``{file}``, ``{fixture}``, ``{value}`` or ``{command}``, a ``multi`` one ``{files}`` or
  ``{fixtures}`` with ``names`` and ``gives``; a few pairs with an exact
  counterpart among cud's own checks (:data:`NATIVE`) become those.
* Chrome's getters of one Preferences value, and of the live browser's tabs, are ``{command}`` getters
  (:mod:`cud.osworld.chrome`).
* ``conj = "or"`` is ``pass_if = "any"``; ``postconfig`` entries are setup steps run after the model.
* ``infeasible`` passes when the model's final message declares the task infeasible, as OSWorld's
  runner turns such a message into its FAIL action and evaluate() scores FAIL 1 (:data:`INFEASIBLE`);
  any other task's verdict is failed by such a message (the spec's ``fail_if_answer``), as evaluate()
  scores FAIL 0 whatever its metrics say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cud.errors import SpecError
from cud.osworld import chrome
from cud.osworld.catalog import METRICS, check_options
from cud.osworld.context import Context
from cud.osworld.getter_steps import vm_wallpaper, vscode_config
from cud.osworld.steps import ANY_STATUS, argv, config_step, wrap
from cud.spec import values as v
from cud.spec.metric import file_names

__all__ = ("INFEASIBLE", "INFEASIBLE_WORDS", "LIST_TREE", "evaluator")

#: mm_agents/openai_cua_agent.py, OpenAICUAAgent.predict's ``infeasible_word_list``: a message holding one
#: (its text lowered) becomes the FAIL action that ends the run.
INFEASIBLE_WORDS = ("infeasible", "unfeasible", "impossible", "not feasible", "cannot be done")
#: The ``answer`` an ``infeasible`` task's check wants: one of the words anywhere in the final message, ASCII
#: letters in any case. ``(?a)`` keeps the comparison to ASCII case as ``str.lower`` is for these words (no other
#: character lowers to one of their letters in place).
INFEASIBLE = "re:(?ai)" + "|".join(re.escape(w) for w in INFEASIBLE_WORDS)
#: Lists a directory tree as ``TYPE PATH`` lines (``d`` or ``f``), sorted bytewise: ``list_directory``.
LIST_TREE = ("/bin/sh", "-c", 'cd "$1" && find . -mindepth 1 \\( -type d -printf "d %P\\n" \\) -o '
             '\\( -type f -printf "f %P\\n" \\) | LC_ALL=C sort', "osworld")
#: vm_command_error returns the command's standard error: it becomes the check's output, stdout dropped.
STDERR_ONLY = f'timeout {ANY_STATUS[2].split()[1]} "$@" 2>&1 >/dev/null; exit 0'
_EVALUATOR_KEYS = frozenset({"func", "result", "expected", "options", "conj", "postconfig"})
#: (getter, metric) pairs with an exact counterpart among cud's own checks, and the expected type each takes.
NATIVE: dict[tuple[str, str], str] = {
    ("vm_command_line", "check_include_exclude"): "rule",
    ("vm_command_line", "exact_match"): "rule",
    ("list_directory", "exact_match"): "rule",
}
#: The getters a metric check takes, and the keys of each (the config keys OSWorld's getter reads).
GETTERS: dict[str, frozenset[str]] = {
    "vm_file": frozenset({"type", "path", "dest", "multi", "gives", "time_suffix", "time_format"}),
    "cloud_file": frozenset({"type", "path", "dest", "multi", "gives"}),
    "rule": frozenset({"type", "rules"}),
    "vm_command_line": frozenset({"type", "command", "shell"}),
    "vm_command_error": frozenset({"type", "command", "shell"}),
    "gimp_config_file": frozenset({"type", "file_name", "dest"}),
    **{name: frozenset({"type"}) for name in sorted(chrome.PROFILE_GETTERS)},
    "bookmarks": frozenset({"type"}),
    "vscode_config": frozenset({"type", "vscode_extension_command", "path", "dest"}),
    "vm_wallpaper": frozenset({"type", "dest"}),
    # goto_prefix glues a scheme to the address bar's elided text; the tabs' program reads whole URLs instead.
    "active_url_from_accessTree": frozenset({"type", "goto_prefix"}),
    "active_tab_info": frozenset({"type", "goto_prefix"}),
    "open_tabs_info": frozenset({"type"}),
    "active_tab_url_parse": frozenset({"type", "goto_prefix", "parse_keys", "replace", "split_list"}),
    "active_tab_html_parse": frozenset({"type", "goto_prefix", "category", "labelObject",
                                        *(k for keys in chrome.HTML_CATEGORIES.values() for k in keys)}),
}
#: gimp.py get_gimp_config_file's folder: ``~/.config/GIMP/2.10``, expanded in the VM user's home.
GIMP_CONFIG = "~/.config/GIMP/2.10"
#: Getters whose value only some metrics take: the bookmarks file, which the one metric that takes it reads
#: (cud.osworld.metrics.chrome), and the tabs' program's values (cud.osworld.chrome.TAB_METRICS).
_READ_BY_METRIC: dict[str, frozenset[str]] = {
    "bookmarks": frozenset({"is_expected_bookmarks"}),
    **{name: chrome.TAB_METRICS[kind] for name, kind in chrome.TAB_GETTERS.items()},
}
_REFUSED_GETTERS = {
    "cache_file": "it reads OSWorld's host cache, which a setup step's stdout wrote",
    "googledrive_file": "it needs a Google Drive account",
    "vm_terminal_output": "it reads the text of the focused gnome-terminal tab through the accessibility tree "
                          "(server/main.py: get_terminal_output), and no cud check hands a window's text to a "
                          "metric",
}
#: Metrics left out on purpose, and why.
_REFUSED_METRICS = {
    "check_python_file_by_test_suite": "it imports and runs the model's Python file inside the judge's process, "
                                       "where that code could write the verdict itself",
}


def evaluator(ctx: Context, value: object) -> dict[str, Any]:
    """The spec keys an OSWorld evaluator makes: ``checks``, and ``postconfig`` and ``pass_if`` when it has them."""
    ev = ctx.table("evaluator", _uncommented(value), _EVALUATOR_KEYS, "OSWorld evaluator")
    out: dict[str, Any] = {}
    post = ev.get("postconfig", [])
    if not isinstance(post, list):
        raise ctx.refuse("evaluator.postconfig", post, "evaluator.postconfig must be a list")
    if post:
        out["postconfig"] = [s for i, c in enumerate(post)
                             for s in ctx.attempt(config_step, ctx, f"evaluator.postconfig[{i}]", c) or []]
    conj = ev.get("conj", "and")
    if conj not in ("and", "or"):
        raise ctx.refuse("evaluator.conj", conj, f"evaluator.conj must be 'and' or 'or', got {v.shown(conj)}")
    funcs = ev.get("func")
    if funcs == "infeasible":  # desktop_env.py evaluate(): the last action FAIL scores 1, anything else 0
        out["checks"] = [{"name": "infeasible", "answer": INFEASIBLE}]
        return out
    many = isinstance(funcs, list)
    listed = {k: ev.get(k) if many else [ev.get(k)] for k in ("func", "result", "expected", "options")}
    if isinstance(funcs, list):
        for k in ("result", "expected", "options"):
            if k in ev and (not isinstance(ev[k], list) or len(ev[k]) != len(funcs)):
                raise ctx.refuse(f"evaluator.{k}", ev[k], f"evaluator.{k} must be a list as long as evaluator.func "
                                                          f"({len(funcs)})")
            listed[k] = ev.get(k) or [None] * len(funcs)
        if conj == "or":  # any metric at 1 scores 1 (evaluate's conj 'or')
            out["pass_if"] = "any"
    if not listed["func"]:
        raise ctx.refuse("evaluator.func", funcs, "evaluator.func must name a metric")
    out["checks"] = [c for i, parts in enumerate(zip(*listed.values(), strict=True))
                     for c in ctx.attempt(_checks, ctx, f"evaluator.func[{i}]" if many else "evaluator.func", parts) or []]
    if ctx.after:  # a getter's acts, after the postconfig as OSWorld's getters run after it
        out["postconfig"] = [*out.get("postconfig", []), *ctx.after]
    out["fail_if_answer"] = INFEASIBLE  # evaluate(): a feasible task whose last action is FAIL scores 0
    return out


def _uncommented(value: object) -> object:
    """A JSON object without its ``_``-prefixed keys: notes (``_config_note``, an option's ``_note``), which
    OSWorld's code never reads (evaluate() reads the evaluator's own keys; a metric's ``**options`` ignores them)."""
    if isinstance(value, Mapping):
        return {k: item for k, item in value.items() if not (isinstance(k, str) and k.startswith("_"))}
    return value


def _checks(ctx: Context, key: str, parts: tuple[object, ...]) -> list[dict[str, Any]]:
    return [check(ctx, key, *parts)]


def check(ctx: Context, key: str, func: object, result: object, expected: object, options: object) -> dict[str, Any]:
    """One metric with its getters as one check: a cud check for the NATIVE pairs, else a ``metric`` check."""
    rkey, ekey, okey = (key.replace("func", part) for part in ("result", "expected", "options"))
    gtype = result.get("type") if isinstance(result, Mapping) else None
    if isinstance(func, str) and isinstance(gtype, str) and (gtype, func) in NATIVE:
        return _native(ctx, key, func, gtype, result, expected, options)
    if isinstance(func, str) and func in _REFUSED_METRICS:
        raise ctx.refuse(key, func, f"OSWorld metric {func!r} in {key} has no counterpart in cud: "
                                    f"{_REFUSED_METRICS[func]}")
    if not isinstance(func, str) or func not in METRICS:
        raise ctx.refuse(key, func, f"OSWorld metric {func!r} in {key} has no counterpart in cud (supported: the "
                                    f"metrics of cud.osworld.catalog, and "
                                    + ", ".join(f"{m} on {g}" for g, m in NATIVE) + ")")
    if isinstance(gtype, str) and gtype in _READ_BY_METRIC and func not in _READ_BY_METRIC[gtype]:
        raise ctx.refuse(key, func, f"OSWorld getter {gtype!r} in {rkey} gives {func} a value cud reads only for "
                                    + ", ".join(sorted(_READ_BY_METRIC[gtype])))
    info = METRICS[func]
    out: dict[str, Any] = {"name": f"{func} on {gtype}"[:v.MAX_NAME], "metric": func,
                           "result": getter(ctx, rkey, result)}
    if info.expected:
        if expected is None:
            raise ctx.refuse(ekey, expected, f"OSWorld metric {func!r} in {key} compares with an expected value, "
                                             f"and {ekey} is missing")
        out["expected"] = getter(ctx, ekey, expected)
    elif expected is not None:
        raise ctx.refuse(ekey, expected, f"OSWorld metric {func!r} in {key} takes no expected value, and {ekey} "
                                         f"gives one")
    if options is not None and not isinstance(options, Mapping):
        raise ctx.refuse(okey, options, f"{okey} must be an object (the metric's options), got {v.shown(options)}")
    opts: dict[str, Any] = _uncommented(options or {})  # type: ignore[assignment]  # a Mapping, tested above
    try:
        check_options(func, opts, okey)  # the names the metric reads; their values are the metric's business
    except SpecError as exc:
        at = str(exc.details.get("key", okey))
        raise ctx.refuse(at, exc.details.get("value"), f"OSWorld {func} option {at.rsplit('.', 1)[-1]!r} in {okey} "
                                                        f"has no counterpart in cud: {exc.message}") from None
    if opts:
        out["options"] = opts
    return out


def getter(ctx: Context, key: str, value: object) -> dict[str, Any]:
    """A result or expected getter as a metric check's argument: ``{file}``, ``{fixture}``, ``{value}``, ``{command}``,
    or several files: ``{files}``, ``{fixtures}``."""
    gtype = ctx.kind(f"{key}.type", value.get("type") if isinstance(value, Mapping) else None, GETTERS,
                     _REFUSED_GETTERS, "getter")
    g = ctx.table(key, value, GETTERS[gtype], f"OSWorld {gtype} getter")
    if gtype == "rule":  # misc.py get_rule: the rules as they are
        return {"value": g.get("rules")}
    if gtype in chrome.PROFILE_GETTERS:  # getters/chrome.py: a value of the profile's Preferences
        return chrome.profile_getter(gtype)
    if gtype in chrome.TAB_GETTERS:  # getters/chrome.py: the live browser's active tab, or its open tabs
        return chrome.tab_getter(ctx, key, gtype, g)
    if gtype == "bookmarks":  # getters/chrome.py get_bookmarks: the file, read by is_expected_bookmarks
        return {"file": chrome.BOOKMARKS}
    if gtype in ("vm_command_line", "vm_command_error"):  # general.py: the server's execute, its stdout (stderr)
        args, rewrite = argv(ctx, key, g)
        return {"command": wrap(ANY_STATUS[2] if gtype == "vm_command_line" else STDERR_ONLY, args, rewrite=rewrite)}
    if gtype == "vscode_config":
        return vscode_config(ctx, key, g)
    if gtype == "vm_wallpaper":
        return vm_wallpaper(ctx, key, g)
    if gtype == "gimp_config_file":
        # gimp.py get_gimp_config_file: ~/.config/GIMP/2.10/<file_name> of the VM user's home, fetched as vm_file's
        # file is (it gives None for an empty file too: check_config_status, its one metric, scores that 0 as it
        # scores an empty file, no line matching).
        name = g.get("file_name")
        return {"file": ctx.home(f"{key}.file_name", f"{GIMP_CONFIG}/{name}" if isinstance(name, str) else name)}
    if g.get("multi", False):  # OSWorld tests its truth: "true" is true
        return _several(ctx, key, gtype, g)
    return getter_one(ctx, key, gtype, g.get("path"))


def _several(ctx: Context, key: str, gtype: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """A ``multi`` file getter: its files copied side by side under their ``dest`` names, the metric given those
    ``gives`` picks in file order (a set in file.py: duplicates and indexes past the end pick nothing); one path
    given alone is the plain ``file``/``fixture``, as before (the metric gets that one file)."""
    paths, dests = g.get("path"), g.get("dest")
    for part, items in (("path", paths), ("dest", dests)):
        if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
            raise ctx.refuse(f"{key}.{part}", items, f"{key}.{part} must be a list of strings (multi)")
    assert isinstance(paths, list) and isinstance(dests, list)
    if len(paths) != len(dests):
        raise ctx.refuse(f"{key}.dest", dests, f"{key}.dest must name each of the {len(paths)} files of {key}.path "
                                                  f"(multi)")
    gives = g.get("gives", [0])
    if not isinstance(gives, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in gives):
        raise ctx.refuse(f"{key}.gives", gives, f"{key}.gives must be a list of indexes of {key}.path (multi)")
    picked = sorted({i for i in gives if 0 <= i < len(paths)})
    if not picked:  # file.py would give the metric an empty list
        raise ctx.refuse(f"{key}.gives", gives, f"{key}.gives picks none of the {len(paths)} files of {key}.path "
                                                  f"(multi)")
    if len(paths) == 1:
        return getter_one(ctx, key, gtype, paths[0])
    try:
        names = list(file_names(f"{key}.dest", dests, len(paths)))
    except SpecError as exc:
        raise ctx.refuse(str(exc.details.get("key", f"{key}.dest")), exc.details.get("value"),
                         f"{key}.dest cannot name the copies (multi): {exc.message}") from None
    if gtype == "vm_file":
        files = [ctx.home(f"{key}.path[{i}]", p) for i, p in enumerate(paths)]
        return {"files": files, "names": names, "gives": picked}
    return {"fixtures": [ctx.download(f"{key}.path[{i}]", p) for i, p in enumerate(paths)], "names": names,
            "gives": picked}


def getter_one(ctx: Context, key: str, gtype: str, path: object) -> dict[str, Any]:
    """One file of a file getter: a home ``file`` (vm_file) or a downloaded ``fixture`` (cloud_file)."""
    if gtype == "vm_file":  # file.py get_vm_file: the file, None when the VM has none
        return {"file": ctx.home(f"{key}.path", path)}
    return {"fixture": ctx.download(f"{key}.path", path)}  # file.py get_cloud_file: downloaded, a local file


def _native(ctx: Context, key: str, func: str, gtype: str, result: object, expected: object,
            options: object) -> dict[str, Any]:
    rkey, ekey = key.replace("func", "result"), key.replace("func", "expected")
    g = ctx.table(rkey, result, frozenset({"type", "command", "shell", "path"}), "OSWorld result")
    etype = expected.get("type") if isinstance(expected, Mapping) else None
    if etype != NATIVE[gtype, func]:
        raise ctx.refuse(f"{ekey}.type", etype, f"OSWorld expected type {etype!r} in {ekey} has no counterpart in cud "
                                                f"for {func} on {gtype} (supported: {NATIVE[gtype, func]!r})")
    want = ctx.table(ekey, expected, frozenset({"type", "rules"}), "OSWorld expected")
    ctx.table(key.replace("func", "options"), _uncommented(options or {}), frozenset(), f"OSWorld {func} option")
    name = f"{func} on {gtype}"[:v.MAX_NAME]
    rules = want.get("rules")
    if gtype == "list_directory":
        path = ctx.home(f"{rkey}.path", g.get("path"))
        tree = rules.get("expected") if isinstance(rules, Mapping) else None
        listing = _tree(ctx, f"{ekey}.rules.expected", tree, path.rsplit("/", 1)[-1])
        return {"name": name, "command": [*LIST_TREE, path],
                "output": {"matches": "re:\\A" + re.escape("".join(f"{line}\n" for line in listing)) + "\\Z"}}
    args, rewrite = argv(ctx, rkey, g)
    command = wrap(ANY_STATUS[2], args, rewrite=rewrite)
    if func == "exact_match":
        text = rules.get("expected") if isinstance(rules, Mapping) else None
        if not isinstance(text, str):
            raise ctx.refuse(f"{ekey}.rules.expected", text, f"{ekey}.rules.expected must be a string")
        return {"name": name, "command": command, "output": {"matches": "re:\\A" + re.escape(text) + "\\Z"}}
    r = ctx.table(f"{ekey}.rules", rules, frozenset({"include", "exclude"}), "OSWorld rule")
    output: dict[str, list[str]] = {}
    for part in ("include", "exclude"):
        items = r.get(part, [])
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            raise ctx.refuse(f"{ekey}.rules.{part}", items, f"{ekey}.rules.{part} must be a list of strings")
        if part == "exclude" and "" in items:
            raise ctx.refuse(f"{ekey}.rules.exclude", items, f"{ekey}.rules.exclude holds '', which every output "
                                                             f"contains: the check could never pass")
        output[part] = [s for s in items if s]  # '' is in every output: an include of it always holds
    return {"name": name, "command": command, "output": output}


def _tree(ctx: Context, key: str, node: object, root: str) -> list[str]:
    """OSWorld's directory tree (``{type, name, children}``) as the sorted ``TYPE PATH`` lines LIST_TREE prints."""
    if not isinstance(node, Mapping) or node.get("type") != "directory" or node.get("name") != root:
        raise ctx.refuse(key, node, f"{key} must be the tree of the directory {root!r} "
                                    f"({{type: 'directory', name: {root!r}, children: […]}})")
    lines: list[str] = []

    def walk(at: str, children: object, prefix: str) -> None:
        if not isinstance(children, list):
            raise ctx.refuse(at, children, f"{at} must be a list of {{type, name}}")
        for i, child in enumerate(children):
            where = f"{at}[{i}]"
            kind, name = (child.get("type"), child.get("name")) if isinstance(child, Mapping) else (None, None)
            if kind not in ("file", "directory") or not isinstance(name, str) or not name or "/" in name \
                    or "\n" in name:
                raise ctx.refuse(where, child, f"{where} must be {{type: 'file' or 'directory', name}}")
            lines.append(f"{kind[0]} {prefix}{name}")
            if kind == "directory":
                walk(f"{where}.children", child.get("children", []), f"{prefix}{name}/")

    walk(f"{key}.children", node.get("children", []), "")
    return sorted(lines, key=lambda line: line.encode("utf-8"))

