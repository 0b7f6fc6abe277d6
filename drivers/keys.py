"""The one key-name table: what models call a key -> the X keysym to press.

X11 (XTEST) and VNC (RFB KeyEvent) both speak X keysyms, so this module is the
only place a key name is interpreted. Lookup is case-insensitive and tries, in
order: the model-name aliases below, a single character (typed as that
character), then any X keysym name (``Return``, ``Page_Up``, ``KP_Enter``).
"""

from __future__ import annotations

from functools import lru_cache

from Xlib import XK

from cud.errors import UnknownKey

__all__ = ("keysym_for_name", "keysym_for_char", "MODIFIER_KEYSYMS", "MAX_KEYS_PER_COMBO",
           "KEYMAP_SETTLE_SECONDS")

#: Seconds X clients get to re-read the keymap after a keysym was put on a spare
#: keycode (by the X11 driver, or by a VNC server), before a key that needs it is
#: sent. Chromium re-reads it asynchronously after MappingNotify and handles a key
#: that arrives sooner with the old keymap: it types nothing (seen through both
#: drivers: è, à, П lost in most runs; 0.1 s was enough in every run measured).
KEYMAP_SETTLE_SECONDS = 0.15

# Keysym groups python-xlib does not load by default but models ask for (F13-F24
# and keypad keys are in miscellany; Greek, Cyrillic etc. only matter for names).
for _group in ("xkb", "latin2", "latin3", "latin4", "greek", "cyrillic", "publishing", "technical"):
    XK.load_keysym_group(_group)

#: A combo longer than this is not something a person could press; refuse it.
MAX_KEYS_PER_COMBO = 8

# Model names (OpenAI CUA, Anthropic and xdotool habits) -> X keysym names.
_ALIASES: dict[str, str] = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "ctrl": "Control_L",
    "control": "Control_L",
    "alt": "Alt_L",
    "option": "Alt_L",
    "shift": "Shift_L",
    "cmd": "Super_L",
    "command": "Super_L",
    "win": "Super_L",
    "windows": "Super_L",
    "super": "Super_L",
    "meta": "Super_L",
    "arrowleft": "Left",
    "arrowright": "Right",
    "arrowup": "Up",
    "arrowdown": "Down",
    "left": "Left",
    "right": "Right",
    "up": "Up",
    "down": "Down",
    "pageup": "Prior",
    "pagedown": "Next",
    "pgup": "Prior",
    "pgdn": "Next",
    "home": "Home",
    "end": "End",
    "insert": "Insert",
    "ins": "Insert",
    "delete": "Delete",
    "del": "Delete",
    "backspace": "BackSpace",
    "tab": "Tab",
    "space": "space",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "print": "Print",
    "pause": "Pause",
    "menu": "Menu",
    "contextmenu": "Menu",
    **{f"f{n}": f"F{n}" for n in range(1, 25)},
    # pyautogui's names (its KEY_NAMES) that X calls otherwise, for the models answering in pyautogui.
    "ctrlleft": "Control_L", "ctrlright": "Control_R", "altleft": "Alt_L", "altright": "Alt_R",
    "shiftleft": "Shift_L", "shiftright": "Shift_R", "winleft": "Super_L", "winright": "Super_R",
    "optionleft": "Alt_L", "optionright": "Alt_R", "prntscrn": "Print", "prtsc": "Print", "prtscr": "Print",
    "apps": "Menu", "modechange": "Mode_switch", "add": "KP_Add", "subtract": "KP_Subtract",
    "multiply": "KP_Multiply", "divide": "KP_Divide", "decimal": "KP_Decimal", "separator": "KP_Separator",
    **{f"num{n}": f"KP_{n}" for n in range(10)},
}

MODIFIER_KEYSYMS = frozenset(
    XK.string_to_keysym(name)
    for name in ("Shift_L", "Shift_R", "Control_L", "Control_R", "Alt_L", "Alt_R", "Super_L", "Super_R",
                 "Meta_L", "Meta_R", "ISO_Level3_Shift", "Mode_switch", "Hyper_L", "Hyper_R")
)

# Characters that are keys in their own right and have a dedicated keysym.
_CHAR_KEYSYMS = {"\n": XK.XK_Return, "\r": XK.XK_Return, "\t": XK.XK_Tab, "\b": XK.XK_BackSpace}


def _keysym_names() -> dict[str, int]:
    """Every X keysym name python-xlib knows, by lower-case name (first spelling wins)."""
    table: dict[str, int] = {}
    for attr, value in vars(XK).items():
        if attr.startswith("XK_") and isinstance(value, int):
            table.setdefault(attr[3:].lower(), value)
    return table


_BY_LOWER_NAME = _keysym_names()


def keysym_for_char(char: str) -> int:
    """The keysym that types ``char``: Latin-1 is its code point, the rest Unicode keysyms."""
    special = _CHAR_KEYSYMS.get(char)
    if special is not None:
        return special
    code = ord(char)
    if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
        raise UnknownKey(f"cannot type control character {char!r}", char=char)
    if code <= 0xFF:
        return code
    return 0x01000000 | code


@lru_cache(maxsize=512)
def keysym_for_name(name: str) -> int:
    """Resolve a model's key name to a keysym, or raise UnknownKey naming it."""
    if not isinstance(name, str) or not name:
        raise UnknownKey(f"unknown key {name!r}", key=name)
    alias = _ALIASES.get(name.lower())
    if alias is not None:
        return XK.string_to_keysym(alias)
    if len(name) == 1:
        # A lone letter in a combo means the key, not the capital: CTRL+A is ctrl+a.
        return keysym_for_char(name.lower() if name.isascii() else name)
    exact = XK.string_to_keysym(name)
    if exact:
        return exact
    by_lower = _BY_LOWER_NAME.get(name.lower())
    if by_lower is not None:
        return by_lower
    raise UnknownKey(f"unknown key {name!r}", key=name)
