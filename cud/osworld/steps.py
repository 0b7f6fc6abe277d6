"""OSWorld's ``config`` and ``evaluator.postconfig`` entries as cud setup steps (docs/osworld.md, "Config").

Ported from OSWorld's desktop_env (Apache-2.0): controllers/setup.py (SetupController's
``_{type}_setup`` methods) and server/main.py (the VM's server, which runs them). Each step
does what OSWorld's does, and the module's constants say where each rule comes from:

* a command's string is split as the server splits it (``shlex.split``; ``launch`` first by
  the controller's ``str.split``), ``~/`` arguments are expanded, the screen placeholders are
  filled; a command runs for at most 120 s and its exit status is never checked (server/main.py:
  execute_command; SetupController._execute_setup ignores ``returncode``);
* ``open`` waits for a window whose title holds the file's name and activates it
  (server/main.py: open_file);
* ``activate_window`` and ``close_window`` run wmctrl as the server does, status unchecked.
* Google Chrome's commands and ``chrome_open_tabs`` run on the seat's Chromium (:mod:`cud.osworld.chrome`).

Paths of OSWorld's VM user (``/home/user``) become the seat's home: path parameters become paths
in the home; a command that names ``/home/user`` anywhere (an argument, shell text, a ``python -c``
program) runs under :data:`HOME_REWRITE`, which replaces it with the seat's ``$HOME`` in every
argument before running it (unless the seat sees its home at /home/user: ``as_written``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from cud.osworld import chrome
from cud.osworld.context import OSWORLD_HOME, Context
from cud.spec import values as v

__all__ = ("ANY_STATUS", "COMMAND_SECONDS", "HOME_REWRITE", "argv", "config_step", "wrap")

#: Seconds OSWorld's server gives a command (server/main.py: execute_command's ``timeout=120``).
COMMAND_SECONDS = 120
#: The cud ``run`` step's own bound: the command's 120 s and time for the wrapper to end it.
RUN_SECONDS = COMMAND_SECONDS + 10
#: Seconds ``open`` waits for its window: cud's longest ``wait_for`` (OSWorld's server: 1800).
OPEN_SECONDS = 300
#: Runs ``"$@"`` for at most COMMAND_SECONDS and always exits 0: OSWorld never checks a setup command's
#: exit status, and ``vm_command_line`` returns the output whatever the status. The argv is passed as
#: arguments, never as script text.
ANY_STATUS = ("/bin/sh", "-c", f'timeout {COMMAND_SECONDS} "$@"; exit 0', "osworld")
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
#: Shell text put before a wrapper's body: every ``/home/user`` in every argument that is not part of a longer
#: name (``/home/username``) becomes the seat's ``$HOME``. A home whose path the rewrite could not keep as one
#: word in shell text (a space, a quote) ends the command with status 126 before it runs.
HOME_REWRITE = (
    'case $HOME in ""|*[!/' + _NAME_CHARS + ']*) echo "osworld: cannot put the home $HOME in place of '
    + OSWORLD_HOME + '" >&2; exit 126;; esac\n'
    "for a do\n"
    "  shift; r=\n"
    "  while :; do\n"
    f"    case $a in *{OSWORLD_HOME}*) ;; *) break;; esac\n"
    f"    r=$r${{a%%{OSWORLD_HOME}*}}; a=${{a#*{OSWORLD_HOME}}}\n"
    f'    case $a in [{_NAME_CHARS}]*) r=$r{OSWORLD_HOME};; *) r=$r$HOME;; esac\n'
    "  done\n"
    '  set -- "$@" "$r$a"\n'
    "done\n")
#: ``open``'s activation (server/main.py: open_file): the first window of ``wmctrl -l`` whose line holds the
#: file's name without its extension, activated by id; status 1 if there is none.
ACTIVATE_OPENED = ("/bin/sh", "-c", 'id=$(wmctrl -l | grep -F -e "$1" | head -n 1 | cut -d " " -f 1) && '
                   '[ -n "$id" ] && wmctrl -i -a "$id"', "osworld")
#: One command of a shell text's ``&&`` chain that installs Debian packages (or updates apt's lists) as root with
#: the VM user's sudo password. A seat's user has no sudo: the seat's template has the packages instead
#: (sandbox/deps.sh --profile osworld), and :data:`HAS_PACKAGES` checks they are there.
_SUDO_APT = re.compile(r"echo \{CLIENT_PASSWORD\} \| sudo -S apt(?:-get)? "
                       r"(?:(update)(?: -y)?|install((?: [^\s&|;<>()$`'\"\\]+)+))")
#: A Debian package's name (section 5.6.1 of Debian's policy manual).
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
#: Exits 1 naming the first of its arguments that is not an installed Debian package: a setup step whose
#: failure says the seat lacks what OSWorld's task would have installed, so the task ends ``error`` (cud could
#: not set it up), never judged on a seat that cannot do it.
HAS_PACKAGES = ("/bin/sh", "-c", 'for p do [ "$(dpkg-query -W -f=\'${db:Status-Status}\' "$p" 2>/dev/null)" = '
                'installed ] || { echo "the seat lacks the Debian package $p, which the OSWorld task installs as '
                'root (sandbox/deps.sh --profile osworld installs it)"; exit 1; }; done', "osworld")
#: Each config type's parameters: the keyword arguments of SetupController's ``_{type}_setup``.
PARAMETERS: dict[str, frozenset[str]] = {
    "launch": frozenset({"command", "shell"}),
    "execute": frozenset({"command", "shell", "stdout", "stderr", "until"}),
    "command": frozenset({"command", "shell", "stdout", "stderr", "until"}),
    "open": frozenset({"path"}),
    "download": frozenset({"files"}),
    "sleep": frozenset({"seconds"}),
    "activate_window": frozenset({"window_name", "strict", "by_class"}),
    "close_window": frozenset({"window_name", "strict", "by_class"}),
    "chrome_open_tabs": frozenset({"urls_to_open"}),
}
#: Types refused by name, and why.
REFUSED: dict[str, str] = {
    "googledrive": "it needs a Google Drive account",
    "login": "it logs into a web account",
    "chrome_close_tabs": "it drives a Chrome with remote debugging (CDP) through Playwright",
    "update_browse_history": "it writes Chrome's history database through the VM image's own paths",
}
#: Parameters refused by name, and why.
_REFUSED_PARAMETERS: dict[str, str] = {
    "stdout": "it keeps the command's output in OSWorld's host cache for a later cache_file getter",
    "stderr": "it keeps the command's errors in OSWorld's host cache for a later cache_file getter",
    "until": "it repeats the command until its output says so",
}


def wrap(body: str, args: list[str], *, rewrite: bool) -> list[str]:
    """``args`` run by ``/bin/sh -c BODY`` as ``"$@"``, after :data:`HOME_REWRITE` when ``rewrite``."""
    return ["/bin/sh", "-c", (HOME_REWRITE if rewrite else "") + body, "osworld", *args]


def config_step(ctx: Context, key: str, item: object) -> list[dict[str, Any]]:
    """One ``config`` (or ``postconfig``) entry as the cud setup steps that do what OSWorld's does."""
    entry = ctx.table(key, item, frozenset({"type", "parameters"}), "OSWorld config")
    kind = ctx.kind(f"{key}.type", entry.get("type"), PARAMETERS, REFUSED, "config type")
    at = f"{key}.parameters"
    p = ctx.table(at, entry.get("parameters", {}), PARAMETERS[kind], f"OSWorld {kind!r} parameter")
    for name, why in _REFUSED_PARAMETERS.items():
        if name in p:
            raise ctx.refuse(f"{at}.{name}", p[name], f"OSWorld {kind!r} parameter {name!r} in {at} has no "
                                                      f"counterpart in cud: {why}")
    if kind in ("execute", "command", "launch"):
        packages, rest = _sudo_installs(ctx, f"{at}.command", p) if kind != "launch" else ([], p.get("command"))
        steps: list[dict[str, Any]] = [{"run": [*HAS_PACKAGES, *packages], "timeout": RUN_SECONDS}] if packages else []
        if rest is None:
            return steps
        args, rewrite = argv(ctx, at, {**p, "command": rest}, split=_launch_split if kind == "launch" else shlex.split)
        seat_args = chrome.seat_command(args)  # Google Chrome's commands as Chromium's (cud.osworld.chrome)
        if seat_args is None:
            return steps
        if kind == "launch":
            return [{"launch": wrap('exec "$@"', seat_args, rewrite=True) if rewrite else seat_args}]
        return [*steps, {"run": wrap(ANY_STATUS[2], seat_args, rewrite=rewrite), "timeout": RUN_SECONDS}]
    if kind == "chrome_open_tabs":
        return chrome.open_tabs(ctx, f"{at}.urls_to_open", p.get("urls_to_open"))
    if kind == "open":
        path = ctx.home(f"{at}.path", p.get("path"))
        stem = _stem(path)
        return [{"open": path, "wait_for": {"window_title": "re:" + re.escape(stem), "timeout": OPEN_SECONDS}},
                {"run": [*ACTIVATE_OPENED, stem], "timeout": RUN_SECONDS}]
    if kind == "sleep":
        return [{"sleep": p.get("seconds")}]
    if kind in ("activate_window", "close_window"):
        return [{"run": [*ANY_STATUS, *_wmctrl(ctx, at, p, "a" if kind == "activate_window" else "c")],
                 "timeout": RUN_SECONDS}]
    files = p.get("files")
    if not isinstance(files, list) or not files:
        raise ctx.refuse(f"{at}.files", files, f"{at}.files must be a non-empty list of {{url, path}}")
    copies = []
    for j, one in enumerate(files):
        where = f"{at}.files[{j}]"
        f = ctx.table(where, one, frozenset({"url", "path"}), "OSWorld download")
        copies.append({"src": ctx.download(f"{where}.url", f.get("url")), "dest": ctx.home(f"{where}.path", f.get("path"))})
    return [{"files": copies}]


def _sudo_installs(ctx: Context, key: str, p: Mapping[str, Any]) -> tuple[list[str], object]:
    """The Debian packages a shell command's ``&&`` chain installs with sudo (:data:`_SUDO_APT`), and the command
    without those links (None when nothing is left). Any other use of the password stays, and is refused."""
    command = p.get("command")
    if not p.get("shell") or not isinstance(command, str) or "{CLIENT_PASSWORD}" not in command:
        return [], command
    packages: list[str] = []
    kept = []
    for link in command.split(" && "):
        found = _SUDO_APT.fullmatch(link.strip())
        if found is None:
            kept.append(link)
            continue
        for word in (found.group(2) or "").split():
            if word in ("-y", "--yes"):
                continue
            if not _PACKAGE.fullmatch(word):
                raise ctx.refuse(key, command, f"{key} installs {word!r} with sudo, which is not a Debian package's "
                                               f"name")
            if word not in packages:
                packages.append(word)
    return packages, " && ".join(kept) if kept else None


def _launch_split(command: str) -> list[str]:
    # SetupController._launch_setup splits a string of several words at whitespace; the server shlex-splits the rest.
    words = command.split()
    return words if len(words) > 1 else shlex.split(command)


def _stem(path: str) -> str:
    """The file's name without its extension, as server/main.py's open_file looks for it (os.path.splitext)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[:dot] if dot > 0 and name[:dot].strip(".") else name


def _wmctrl(ctx: Context, key: str, p: Mapping[str, Any], action: str) -> list[str]:
    """server/main.py's activate_window and close_window: ``wmctrl -[x][F]a|c NAME``."""
    name = p.get("window_name")
    if not isinstance(name, str) or not name.strip():
        raise ctx.refuse(f"{key}.window_name", name, f"{key}.window_name must be a non-blank string")
    flags = ("x" if ctx.flag(key, p, "by_class") else "") + ("F" if ctx.flag(key, p, "strict") else "")
    return ["wmctrl", f"-{flags}{action}", ctx.fill(f"{key}.window_name", name)]


def argv(ctx: Context, key: str, p: Mapping[str, Any], *, split: Any = shlex.split) -> tuple[list[str], bool]:
    """An OSWorld command (a list, a string split as OSWorld splits it, or shell text) as an argv, and whether it
    names /home/user, so that it runs under :data:`HOME_REWRITE`."""
    command, shell = p.get("command"), p.get("shell", False)
    if not isinstance(shell, bool | str | int | None):
        raise ctx.refuse(f"{key}.shell", shell, f"{key}.shell must be true or false, got {v.shown(shell)}")
    if shell:  # Python's truth value, as the server's subprocess.run(shell=…) takes it: "true" is true
        if not isinstance(command, str) or not command.strip():
            raise ctx.refuse(f"{key}.command", command, f"{key}.command with shell must be a non-blank string")
        args = ["/bin/sh", "-c", ctx.fill(f"{key}.command", command)]
    else:
        if isinstance(command, str):
            try:
                command = split(command)
            except ValueError as exc:
                raise ctx.refuse(f"{key}.command", command, f"{key}.command cannot be split as OSWorld's server "
                                                            f"splits it (shlex): {exc}") from None
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise ctx.refuse(f"{key}.command", command, f"{key}.command must be a non-empty list of strings, got "
                                                        f"{v.shown(command)}")
        # The server expands an argument that starts with ~/ (os.path.expanduser): in the VM, /home/user/…
        args = [OSWORLD_HOME + a[1:] if a.startswith("~/") else a
                for a in (ctx.fill(f"{key}.command[{i}]", a) for i, a in enumerate(command))]
    return args, not ctx.as_written and any(OSWORLD_HOME in a for a in args)
