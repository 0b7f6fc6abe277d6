"""OSWorld's task files as cud task specs: the subset that needs no Ubuntu-specific image (docs/osworld.md).

An OSWorld task (``evaluation_examples/examples/*/*.json``) has an ``instruction``, a
``config`` list of setup steps (``{"type", "parameters"}``) and an ``evaluator`` (a result
getter, an expected value and a metric). :func:`convert_osworld` maps the supported subset onto
a spec mapping that :func:`cud.spec.parse_spec` accepts, and refuses anything else with a
SpecError that names the type and where it is. ``download`` URLs (and ``cloud_file`` expected
files) are fetched here, on the submitter's side, never by the seat.

Paths: OSWorld's tasks run in an Ubuntu VM as the user ``user``, so they name files by absolute
paths under ``/home/user``. The seat's home takes its place: ``/home/user/X`` and ``~/X`` become
``X`` in the home; any other path is refused, naming it. For seats whose session sees its home at
``/home/user`` (``[[seats]] home_path``, docs/sessions.md), ``as_written``: commands, shell text
included, run as the task wrote them, and only the paths cud itself reads and writes (a download's
destination, a checked file) become paths in the home.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cud.errors import SpecError
from cud.protocol import SeatView
from cud.seat_needs import is_tag
from cud.spec import values as v
from cud.spec.schema import Spec, parse_spec
from cud.spec.wire import MAX_SPEC_FILE_BYTES

__all__ = ("OSWORLD_HOME", "OsworldSpec", "convert_osworld", "fetch_url", "load_osworld", "sees_home_user")

Fetch = Callable[[str], bytes]
#: The home of OSWorld's VM user, which the seat's home stands for.
OSWORLD_HOME = "/home/user"
#: Seconds the default fetcher gives one download in all.
FETCH_SECONDS = 60.0
#: Seconds ``activate_window`` waits for its window to show.
ACTIVATE_SECONDS = 60
#: A ``vm_command_line`` getter returns the command's output whatever its exit status; a cud
#: ``command`` check also wants exit status 0, so the command runs under this wrapper, which
#: passes it its arguments as ``"$@"`` (never as text in the script) and always exits 0.
ANY_STATUS = ("/bin/sh", "-c", '"$@"; exit 0', "osworld")
#: Lists a directory tree as ``TYPE PATH`` lines (``d`` or ``f``), sorted bytewise: ``list_directory``.
LIST_TREE = ("/bin/sh", "-c", 'cd "$1" && find . -mindepth 1 \\( -type d -printf "d %P\\n" \\) -o '
             '\\( -type f -printf "f %P\\n" \\) | LC_ALL=C sort', "osworld")
_TASK_KEYS = frozenset({"id", "snapshot", "instruction", "source", "config", "evaluator", "trajectory",
                        "related_apps", "proxy", "fixed_ip", "possibility_of_env_change"})
_EVALUATOR_KEYS = frozenset({"func", "result", "expected", "options", "conj", "postconfig"})
_CONFIG_PARAMETERS: dict[str, frozenset[str]] = {
    "launch": frozenset({"command", "shell", "timeout"}),
    "execute": frozenset({"command", "shell", "timeout"}),
    "command": frozenset({"command", "shell", "timeout"}),
    "open": frozenset({"path"}),
    "download": frozenset({"files"}),
    "sleep": frozenset({"seconds"}),
    "activate_window": frozenset({"window_name", "strict", "by_class"}),
}
#: (getter, metric) pairs with a faithful counterpart, and the expected value's type each takes.
_PAIRS: dict[tuple[str, str], str] = {
    ("vm_command_line", "check_include_exclude"): "rule",
    ("vm_command_line", "exact_match"): "rule",
    ("vm_file", "compare_text_file"): "cloud_file",
    ("list_directory", "exact_match"): "rule",
}
_GETTERS = frozenset(g for g, _ in _PAIRS)
_METRICS = frozenset(m for _, m in _PAIRS)
_ERE_SPECIAL = re.compile(r"([.\[\]()*+?{}|^$\\])")


class OsworldSpec(dict[str, Any]):
    """A converted task: the spec mapping itself (``parse_spec`` accepts it, as a spec file's TOML), and in
    :attr:`files` the bytes of every file it names on the submitter's side, by the name it gives them
    (a download's or a ``cloud_file``'s URL): what :func:`cud.spec.load.load_spec` returns beside a spec."""

    files: dict[str, bytes]


def sees_home_user(seats: Sequence[SeatView] | None, chosen: Sequence[str] | None) -> bool:
    """Whether every seat of ``seats`` that tasks may go to (``chosen``, or all) sees its home at /home/user
    (``home_path``): then converted tasks run their commands ``as_written``. None (a fleet's seats, unknown here): no."""
    used = [s for s in seats or [] if not chosen or s["name"] in chosen]
    return bool(used) and all(s.get("home_path") == OSWORLD_HOME for s in used)


def convert_osworld(task: Mapping[str, Any], *, source: str, fetch: Fetch, as_written: bool = False) -> OsworldSpec:
    """``task`` (an OSWorld task's JSON, read from ``source``) as a spec mapping; SpecError names what has no counterpart.
    ``as_written``: for seats that see their home at /home/user, commands are not rewritten (the module's text)."""
    return _Converter(source, fetch, as_written).task(task)


def load_osworld(path: Path, *, fetch: Fetch | None = None, as_written: bool = False) -> tuple[Spec, dict[str, bytes]]:
    """The OSWorld task in ``path`` as a parsed Spec and its files, as :func:`cud.spec.load.load_spec` returns them."""
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read OSWorld task file {str(path)!r}: {exc.strerror}", key="",
                        value=str(path)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"OSWorld task file {str(path)!r} is not JSON: {exc}", key="", value=str(path)) from None
    converted = convert_osworld(raw, source=str(path), fetch=fetch or fetch_url, as_written=as_written)
    return parse_spec(dict(converted)), converted.files


class _NoOtherSchemes(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            fp.close()
            raise urllib.error.URLError(f"redirected to {newurl!r}, which is not http or https")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_url(url: str, *, limit: int = MAX_SPEC_FILE_BYTES, seconds: float = FETCH_SECONDS) -> bytes:
    """GET ``url`` (http or https only, redirects too) within ``limit`` bytes and ``seconds``; SpecError says why not."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise SpecError(f"cannot fetch {url!r}: only http and https URLs are fetched", key="url", value=url)
    deadline = time.monotonic() + seconds
    opener = urllib.request.build_opener(_NoOtherSchemes)
    chunks: list[bytes] = []
    size = 0
    try:
        with opener.open(urllib.request.Request(url, headers={"User-Agent": "cuctl"}), timeout=seconds) as response:
            while chunk := response.read(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise SpecError(f"{url!r} is larger than the {limit} bytes a spec's file may have "
                                    f"(MAX_SPEC_FILE_BYTES)", key="url", value=url, limit=limit)
                if time.monotonic() > deadline:
                    raise SpecError(f"fetching {url!r} took more than {seconds:g} s", key="url", value=url)
                chunks.append(chunk)
    except (OSError, ValueError) as exc:  # URLError, HTTPError and socket timeouts are OSErrors
        if isinstance(exc, urllib.error.HTTPError):
            exc.close()  # it holds the response's socket
        raise SpecError(f"cannot fetch {url!r}: {getattr(exc, 'reason', None) or exc}", key="url",
                        value=url) from None
    return b"".join(chunks)


class _Converter:
    def __init__(self, source: str, fetch: Fetch, as_written: bool = False) -> None:
        self.source = source
        self.fetch = fetch
        self.as_written = as_written
        self.files: dict[str, bytes] = {}

    def refuse(self, key: str, value: object, why: str) -> SpecError:
        return SpecError(f"{self.source}: {why}", key=key, value=v.shown(value))

    def table(self, key: str, value: object, allowed: frozenset[str], what: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.refuse(key, value, f"{key} must be an object ({what}), got {v.shown(value)}")
        for name in value:
            if name not in allowed:
                raise self.refuse(f"{key}.{name}", name, f"{what} key {name!r} in {key} has no counterpart in cud "
                                                         f"(known: {', '.join(sorted(allowed))})")
        return dict(value)

    def task(self, task: Mapping[str, Any]) -> OsworldSpec:
        raw = self.table("task", task, _TASK_KEYS, "OSWorld task")
        instruction = raw.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            raise self.refuse("instruction", instruction, f"the task's 'instruction' must be a non-blank string, got "
                                                          f"{v.shown(instruction)}")
        configs = raw.get("config", [])
        if not isinstance(configs, list):
            raise self.refuse("config", configs, f"the task's 'config' must be a list, got {v.shown(configs)}")
        spec = OsworldSpec(prompt=instruction, tags=["osworld"], reset=True,
                           setup=[step for i, c in enumerate(configs) for step in self.config(f"config[{i}]", c)],
                           checks=self.evaluator(raw.get("evaluator")))
        if is_tag(raw.get("id")):
            spec["tags"].append(raw["id"])
        spec.files = self.files
        try:
            parse_spec(dict(spec))  # what the converter made must be a spec: refused here, not on the seat
        except SpecError as exc:
            raise self.refuse(exc.details.get("key", ""), exc.details.get("value"),
                              f"the converted task is not a valid spec: {exc.message}") from None
        return spec

    # -- config: setup steps -------------------------------------------------------------------------

    def config(self, key: str, item: object) -> list[dict[str, Any]]:
        entry = self.table(key, item, frozenset({"type", "parameters"}), "OSWorld config")
        kind = entry.get("type")
        if not isinstance(kind, str) or kind not in _CONFIG_PARAMETERS:
            raise self.refuse(f"{key}.type", kind, f"OSWorld config type {kind!r} in {key} has no counterpart in cud "
                                                   f"(supported: {', '.join(_CONFIG_PARAMETERS)})")
        at = f"{key}.parameters"
        p = self.table(at, entry.get("parameters", {}), _CONFIG_PARAMETERS[kind], f"OSWorld {kind!r} parameter")
        if kind in ("execute", "command"):
            step: dict[str, Any] = {"run": self.argv(at, p)}
            if "timeout" in p:
                step["timeout"] = p["timeout"]
            return [step]
        if kind == "launch":
            return [{"launch": self.argv(at, p)}]
        if kind == "open":
            return [{"open": self.home(f"{at}.path", p.get("path"))}]
        if kind == "sleep":
            return [{"sleep": p.get("seconds")}]
        if kind == "activate_window":
            return [{"run": self.activate(at, p), "timeout": ACTIVATE_SECONDS}]
        files = p.get("files")
        if not isinstance(files, list) or not files:
            raise self.refuse(f"{at}.files", files, f"{at}.files must be a non-empty list of {{url, path}}")
        copies = []
        for j, one in enumerate(files):
            where = f"{at}.files[{j}]"
            f = self.table(where, one, frozenset({"url", "path"}), "OSWorld download")
            copies.append({"src": self.download(f"{where}.url", f.get("url")),
                           "dest": self.home(f"{where}.path", f.get("path"))})
        return [{"files": copies}]

    def download(self, key: str, url: object) -> str:
        if not isinstance(url, str) or not url.strip():
            raise self.refuse(key, url, f"{key} must be a URL, got {v.shown(url)}")
        if url not in self.files:
            try:
                data = self.fetch(url)
            except SpecError as exc:
                raise self.refuse(key, url, f"{key}: {exc.message}") from None
            except (OSError, ValueError) as exc:
                raise self.refuse(key, url, f"{key}: cannot fetch {url!r}: {exc}") from None
            self.files[url] = bytes(data)
        return url

    def argv(self, key: str, p: Mapping[str, Any]) -> list[str]:
        """An OSWorld command (a list, a string split as its server does, or a shell string) as an argv."""
        command, shell = p.get("command"), p.get("shell", False)
        if not isinstance(shell, bool):
            raise self.refuse(f"{key}.shell", shell, f"{key}.shell must be true or false, got {v.shown(shell)}")
        if shell:
            if not isinstance(command, str) or not command.strip():
                raise self.refuse(f"{key}.command", command, f"{key}.command with shell must be a non-blank string")
            if OSWORLD_HOME in command and not self.as_written:
                raise self.refuse(f"{key}.command", command,
                                  f"{key}.command is a shell command naming {OSWORLD_HOME!r}, which cud cannot map "
                                  f"onto the seat's home inside shell text (write ~/… or a relative path: commands "
                                  f"run in the home, with HOME set)")
            return ["/bin/sh", "-c", command]
        if isinstance(command, str):
            command = command.split()  # as OSWorld's server does with a string and no shell
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise self.refuse(f"{key}.command", command, f"{key}.command must be a non-empty list of strings, got "
                                                         f"{v.shown(command)}")
        return [self.argument(f"{key}.command[{i}]", a) for i, a in enumerate(command)]

    def argument(self, key: str, arg: str) -> str:
        if self.as_written:  # the session sees its home at /home/user: the argument means what it says there
            return arg
        if arg in (OSWORLD_HOME, OSWORLD_HOME + "/"):
            return "."  # the home itself: commands run in it
        if arg.startswith((OSWORLD_HOME + "/", "~/")):
            # A directory written with its trailing slash (cp x /home/user/Desktop/) keeps it: cp then insists on a
            # directory there, as in OSWorld's VM.
            if arg.endswith("/") and not arg.endswith("//"):
                with contextlib.suppress(SpecError):  # else refused below, naming the argument as written
                    return self.home(key, arg[:-1]) + "/"
            return self.home(key, arg)
        if OSWORLD_HOME in arg:
            raise self.refuse(key, arg, f"{key} is {arg!r}: cud maps an argument that is a path under "
                                        f"{OSWORLD_HOME}/ onto the seat's home, not one that holds such a path")
        return arg

    def home(self, key: str, path: object) -> str:
        """``/home/user/X`` or ``~/X`` as ``X`` in the seat's home; any other path is refused, naming it."""
        if isinstance(path, str):
            for prefix in (OSWORLD_HOME + "/", "~/"):
                if path.startswith(prefix):
                    try:
                        return v.home_path(key, path[len(prefix):])
                    except SpecError:
                        break
        raise self.refuse(key, path, f"{key} is {v.shown(path)}, a path cud cannot map onto the seat's home: only "
                                     f"{OSWORLD_HOME}/… and ~/… map (OSWorld's VM user is 'user'; the seat's home "
                                     f"takes {OSWORLD_HOME}'s place), without '..', '.', '//' or control characters")

    def activate(self, key: str, p: Mapping[str, Any]) -> list[str]:
        """``activate_window``: xdotool finds the window (title, or class with ``by_class``) and activates it."""
        name = p.get("window_name")
        if not isinstance(name, str) or not name.strip():
            raise self.refuse(f"{key}.window_name", name, f"{key}.window_name must be a non-blank string")
        for flag in ("strict", "by_class"):
            if not isinstance(p.get(flag, False), bool):
                raise self.refuse(f"{key}.{flag}", p[flag], f"{key}.{flag} must be true or false")
        # OSWorld's server uses wmctrl -a (a case-insensitive substring), -F with strict (the whole name);
        # xdotool matches a POSIX extended regex, case-insensitive, so the name is escaped and anchored.
        pattern = _ERE_SPECIAL.sub(r"\\\1", name)
        if p.get("strict", False):
            pattern = f"^{pattern}$"
        # --sync: search until the window shows (a launch before it does not wait), within the run's timeout.
        return ["xdotool", "search", "--sync", "--limit", "1", "--class" if p.get("by_class", False) else "--name",
                pattern, "windowactivate"]

    # -- evaluator: checks ---------------------------------------------------------------------------

    def evaluator(self, value: object) -> list[dict[str, Any]]:
        ev = self.table("evaluator", value, _EVALUATOR_KEYS, "OSWorld evaluator")
        if ev.get("postconfig"):
            raise self.refuse("evaluator.postconfig", ev["postconfig"],
                              "OSWorld evaluator 'postconfig' (setup run after the agent, before judging) has no "
                              "counterpart in cud: a spec's setup runs before the model")
        conj = ev.get("conj", "and")
        if conj != "and":
            raise self.refuse("evaluator.conj", conj, f"OSWorld evaluator conj {conj!r} has no counterpart in cud: "
                                                      f"a verdict passes when every check passes ('and')")
        funcs = ev.get("func")
        many = isinstance(funcs, list)
        listed = {k: ev.get(k) if many else [ev.get(k)] for k in ("func", "result", "expected", "options")}
        if isinstance(funcs, list):  # many
            for k in ("result", "expected", "options"):
                if k in ev and (not isinstance(ev[k], list) or len(ev[k]) != len(funcs)):
                    raise self.refuse(f"evaluator.{k}", ev[k], f"evaluator.{k} must be a list as long as "
                                                               f"evaluator.func ({len(funcs)})")
                listed[k] = ev.get(k) or [None] * len(funcs)
        if not listed["func"]:
            raise self.refuse("evaluator.func", funcs, "evaluator.func must name a metric")
        return [self.check(f"evaluator.func[{i}]" if many else "evaluator.func", *parts)
                for i, parts in enumerate(zip(*listed.values(), strict=True))]

    def check(self, key: str, func: object, result: object, expected: object, options: object) -> dict[str, Any]:
        if not isinstance(func, str) or func not in _METRICS:
            raise self.refuse(key, func, f"OSWorld metric {func!r} in {key} has no counterpart in cud (supported: "
                                         f"{', '.join(sorted(_METRICS))})")
        rkey, ekey = key.replace("func", "result"), key.replace("func", "expected")
        getter = self.table(rkey, result, frozenset({"type", "command", "shell", "path", "dest"}), "OSWorld result")
        gtype = getter.get("type")
        if not isinstance(gtype, str) or gtype not in _GETTERS:
            raise self.refuse(f"{rkey}.type", gtype, f"OSWorld result getter {gtype!r} in {rkey} has no counterpart in "
                                                     f"cud (supported: {', '.join(sorted(_GETTERS))})")
        if (gtype, func) not in _PAIRS:
            raise self.refuse(key, func, f"OSWorld metric {func!r} on the getter {gtype!r} ({key}) has no "
                                         f"counterpart in cud (supported pairs: "
                                         + ", ".join(f"{g} with {m}" for g, m in _PAIRS) + ")")
        want = self.table(ekey, expected, frozenset({"type", "rules", "path", "dest"}), "OSWorld expected")
        if want.get("type") != _PAIRS[gtype, func]:
            raise self.refuse(f"{ekey}.type", want.get("type"),
                              f"OSWorld expected type {want.get('type')!r} in {ekey} has no counterpart in cud for "
                              f"{func} (supported: {_PAIRS[gtype, func]!r})")
        opts = self.table(key.replace("func", "options"), options or {}, frozenset({"ignore_blanks", "ignore_case"})
                          if func == "compare_text_file" else frozenset(), f"OSWorld {func} option")
        name = f"{func} on {gtype}"[:v.MAX_NAME]
        if gtype == "vm_file":
            path = self.home(f"{rkey}.path", getter.get("path"))
            fixture = self.download(f"{ekey}.path", want.get("path"))
            if not opts.get("ignore_blanks") and not opts.get("ignore_case"):
                return {"name": name, "file": path, "equals": fixture}
            return {"name": name, "file": path, "matches": _text_pattern(self.files[fixture].decode("utf-8", "replace"),
                                                                         **opts)}
        rules = want.get("rules")
        if gtype == "list_directory":
            path = self.home(f"{rkey}.path", getter.get("path"))
            tree = rules.get("expected") if isinstance(rules, Mapping) else None
            listing = self.tree(f"{ekey}.rules.expected", tree, path.rsplit("/", 1)[-1])
            return {"name": name, "command": [*LIST_TREE, path],
                    "output": {"matches": "re:\\A" + re.escape("".join(f"{line}\n" for line in listing)) + "\\Z"}}
        command = [*ANY_STATUS, *self.argv(rkey, getter)]
        if func == "exact_match":
            text = rules.get("expected") if isinstance(rules, Mapping) else None
            if not isinstance(text, str):
                raise self.refuse(f"{ekey}.rules.expected", text, f"{ekey}.rules.expected must be a string")
            return {"name": name, "command": command, "output": {"matches": "re:\\A" + re.escape(text) + "\\Z"}}
        r = self.table(f"{ekey}.rules", rules, frozenset({"include", "exclude"}), "OSWorld rule")
        output: dict[str, list[str]] = {}
        for part in ("include", "exclude"):
            items = r.get(part, [])
            if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
                raise self.refuse(f"{ekey}.rules.{part}", items, f"{ekey}.rules.{part} must be a list of strings")
            if part == "exclude" and "" in items:
                raise self.refuse(f"{ekey}.rules.exclude", items, f"{ekey}.rules.exclude holds '', which every output "
                                                                  f"contains: the check could never pass")
            output[part] = [s for s in items if s]  # '' is in every output: an include of it always holds
        return {"name": name, "command": command, "output": output}

    def tree(self, key: str, node: object, root: str) -> list[str]:
        """OSWorld's directory tree (``{type, name, children}``) as the sorted ``TYPE PATH`` lines LIST_TREE prints."""
        if not isinstance(node, Mapping) or node.get("type") != "directory" or node.get("name") != root:
            raise self.refuse(key, node, f"{key} must be the tree of the directory {root!r} "
                                         f"({{type: 'directory', name: {root!r}, children: […]}})")
        lines: list[str] = []

        def walk(at: str, children: object, prefix: str) -> None:
            if not isinstance(children, list):
                raise self.refuse(at, children, f"{at} must be a list of {{type, name}}")
            for i, child in enumerate(children):
                where = f"{at}[{i}]"
                kind, name = (child.get("type"), child.get("name")) if isinstance(child, Mapping) else (None, None)
                if kind not in ("file", "directory") or not isinstance(name, str) or not name or "/" in name \
                        or "\n" in name:
                    raise self.refuse(where, child, f"{where} must be {{type: 'file' or 'directory', name}}")
                lines.append(f"{kind[0]} {prefix}{name}")
                if kind == "directory":
                    walk(f"{where}.children", child.get("children", []), f"{prefix}{name}/")

        walk(f"{key}.children", node.get("children", []), "")
        return sorted(lines, key=lambda line: line.encode("utf-8"))


def _text_pattern(text: str, *, ignore_blanks: bool = False, ignore_case: bool = False) -> str:
    """compare_text_file's options as one regex over the whole file: blanks collapse, case is ignored."""
    if ignore_blanks:
        words = text.split()
        body = r"\s*" + r"\s+".join(re.escape(w) for w in words) + r"\s*" if words else r"\s*"
    else:
        body = re.escape(text)
    return "re:" + ("(?i)" if ignore_case else "") + r"\A" + body + r"\Z"
