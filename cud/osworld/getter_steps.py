"""OSWorld's getters that act on the seat before reading a file: their acts become ``postconfig`` steps.

Ported from OSWorld's desktop_env 1.0.2 (Apache-2.0): evaluators/getters/vscode.py
(get_vscode_config, with replay.py's get_replay), evaluators/getters/info.py (get_vm_wallpaper)
and server/main.py's ``/wallpaper``. Each getter gives the metric check a ``{file}`` of the home,
and adds to :attr:`Context.after` the steps that make or change that file, which the converter runs
after the task's own ``postconfig``: OSWorld runs a getter just before its own metric, after the
postconfig too, so the one difference is for a task with several metrics, whose other checks then
see the seat after these steps (docs/osworld.md, "Getters that act").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cud.osworld.context import Context
from cud.osworld.steps import ANY_STATUS, RUN_SECONDS

__all__ = ("VSCODE_KEYS", "WALLPAPER_DIR", "WALLPAPER_SCRIPT", "vm_wallpaper", "vscode_config")

#: controllers/python.py: PythonController's ``pkgs_prefix``, before each replayed pyautogui call.
PKGS_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
#: get_vscode_config's replay on Linux: open the command palette, type the command, run it; then one second.
VSCODE_KEYS = ("ctrl", "shift", "p")
#: Characters get_replay cannot carry in its ``pyautogui.typewrite('TEXT')`` literal as themselves (OSWorld
#: would type something else, or its Python program would not parse); cud passes the text as an argument.
_UNTYPABLE = frozenset("'\\\n\r")
#: Where the wallpaper's copy goes, in the seat's home (the judge's copy keeps the getter's ``dest`` name).
WALLPAPER_DIR = ".cache/osworld-vm-wallpaper"
#: server/main.py's ``/wallpaper`` on Linux: gsettings' picture-uri, stripped, every ``file://`` and ``'`` taken
#: out, and that file sent; get_vm_wallpaper writes an empty file when there is none. Here the file is copied to
#: ``$HOME/$1``, which is empty first. ``$1`` is the getter's path, an argument, never script text.
WALLPAPER_SCRIPT = (
    'dest="$HOME/$1"; mkdir -p "${dest%/*}" && rm -f "$dest" && : > "$dest" || exit 0\n'
    "src=$(gsettings get org.gnome.desktop.background picture-uri 2>/dev/null | "
    "sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e 's|file://||g' -e \"s/'//g\")\n"
    '[ -n "$src" ] && [ -f "$src" ] && cp -- "$src" "$dest"\n'
    "exit 0")


def _pyautogui(call: str, *args: str) -> dict[str, Any]:
    """One replayed action, as PythonController.execute_python_command runs it (120 s, status unchecked); its
    words are arguments of the program, never part of its text."""
    return {"run": [*ANY_STATUS, "python", "-c", PKGS_PREFIX + f"import sys; pyautogui.{call}(*sys.argv[1:])",
                    *args], "timeout": RUN_SECONDS}


def vscode_config(ctx: Context, key: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """get_vscode_config: the command typed into VS Code's command palette, a second's wait, then the file."""
    text = g.get("vscode_extension_command")
    if not isinstance(text, str) or not text or _UNTYPABLE & set(text):
        raise ctx.refuse(f"{key}.vscode_extension_command", text,
                         f"{key}.vscode_extension_command must be a non-empty string without a quote, backslash or "
                         f"line break (OSWorld types it from inside a Python string literal)")
    path = ctx.home(f"{key}.path", g.get("path"))
    ctx.after += [_pyautogui("hotkey", *VSCODE_KEYS), _pyautogui("typewrite", text), _pyautogui("press", "enter"),
                  {"sleep": 1.0}]
    return {"file": path}


def vm_wallpaper(ctx: Context, key: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """get_vm_wallpaper: the file GNOME's picture-uri names, copied into the home as the getter's ``dest``."""
    dest = g.get("dest")
    if not isinstance(dest, str) or not dest:
        raise ctx.refuse(f"{key}.dest", dest, f"{key}.dest must name the wallpaper's copy (OSWorld's getter reads it)")
    path = ctx.home(f"{key}.dest", f"{WALLPAPER_DIR}/{dest}")
    ctx.after.append({"run": ["/bin/sh", "-c", WALLPAPER_SCRIPT, "osworld", path], "timeout": RUN_SECONDS})
    return {"file": path}
