"""Debian's xterm under openbox, running a terminal program that reports what xterm sent it.

The program (``xterm_probe.py``, standard library only) reads its tty raw, as
full-screen terminal programs do; see its docstring for what it makes of the
bytes. xterm is configured through ``-xrm`` so that what a person can do at a
terminal reaches the program distinctly:

- ``metaSendsEscape``: Alt+x arrives as ``ESC x``;
- ``modifyOtherKeys: 1``: Ctrl+Enter (and Ctrl+Tab, Shift+Enter…) arrive as
  ``CSI 27;m;code~`` instead of a bare ``\\r``; plain and shifted letters stay
  plain characters (level 2 would send Shift+A as an escape sequence);
- ``shiftEscape: always`` and ``omitTranslation: popup-menu``: shifted and
  controlled clicks are reported to the program instead of starting xterm's own
  selection or popping up its menus (otherwise a Ctrl+click opens a menu that
  grabs the pointer);
- ``omitTranslation: fullscreen, shift-fonts, paging, scroll-lock, reset``:
  Alt+Enter would make the window full screen and Shift+KP_Add would change
  the font (both move every pixel the tests aim at); Shift+PageUp and
  Alt+middle click would act on xterm's scrollback instead of reaching the program;
- ``disallowedWindowOps`` without 13 and 14: the program may ask where its text
  area is on the screen (``CSI 13;2 t``) — the origin of xterm's pixel mouse
  reports — and nothing more (no moving or resizing).

Mouse reports are in pixels (SGR-Pixels, DECSET 1016), so the pad tests get
exact screen points, and the base ``fence()`` works: the marker motion is
reported pixel-exactly, and keys and pointer reports reach the program through
the one pty stream, in the order xterm saw them. Not offered: "dnd" (a terminal
has no HTML5 drag and drop).
"""

from __future__ import annotations

from ..recorder import wait_until
from .reporting import ReportingApp

__all__ = ("APP", "XtermApp")

#: Fixed: 80×24 cells of DejaVu Sans Mono 12 (10×20 px), 2 px inner border; openbox keeps the position.
GEOMETRY = "80x24+40+40"
RESOURCES = {
    "metaSendsEscape": "true",
    "modifyOtherKeys": "1",
    "shiftEscape": "always",
    "omitTranslation": "popup-menu,fullscreen,shift-fonts,paging,scroll-lock,reset",
    "allowWindowOps": "false",
    "disallowedWindowOps": "1,2,3,4,5,6,7,8,9,11,18,19,20,21,GetSelection,SetSelection,SetWinLines,SetXprop",
    "cursorBlink": "false",
    "visualBell": "false",
}


def _active_window(display_name: str) -> int:
    """openbox's ``_NET_ACTIVE_WINDOW`` (0 when none)."""
    from Xlib import X
    from Xlib.display import Display

    dpy = Display(display_name)
    try:
        prop = dpy.screen().root.get_full_property(dpy.intern_atom("_NET_ACTIVE_WINDOW"), X.AnyPropertyType)
        return int(prop.value[0]) if prop and len(prop.value) else 0
    finally:
        dpy.close()


class XtermApp(ReportingApp):
    name = "xterm"
    probe = "xterm_probe.py"
    capabilities = frozenset({"buttons", "back_forward", "dblclick", "drag_select", "scroll", "keys", "type",
                              "type_newline"})

    def argv(self) -> list[str]:
        resources = [arg for key, value in RESOURCES.items() for arg in ("-xrm", f"XTerm*{key}: {value}")]
        log = self.desktop.workdir / f"{self.name}.log"  # the probe's traceback lands beside xterm's messages
        return ["xterm", "-u8", "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", GEOMETRY, "-b", "2", "+sb",
                "-title", "cud xterm probe", *resources, "-e", *super().argv(), str(log)]

    def start(self) -> None:
        super().start()
        window = int(self._state()["window"])
        # The probe's first position report may predate openbox's reparenting; once openbox has made
        # the window active it is placed for good, so ask again then.
        wait_until(lambda: _active_window(self.desktop.display) == window, 15, "openbox to focus the xterm")
        state = self.command("locate")
        self.pad = tuple(state["pad"])
        self.field = tuple(state["field"])
        x, y, w, h = self.pad
        width, height = self.desktop.width, self.desktop.height
        assert w > 0 and h > 0 and 0 <= x and x + w <= width and 0 <= y and y + h <= height, \
            f"xterm's pad {self.pad} is not on the {width}x{height} screen"

    def selection_drag(self) -> tuple[tuple[int, int], tuple[int, int], str]:
        """From the middle of "bravo"'s b to the middle of "delta"'s final a, on the probe's sample line."""
        state = self._state()
        (ox, oy), (cw, ch) = state["origin"], state["cell"]
        text, row = state["sample"]["text"], state["sample"]["row"]
        first, last = text.index("bravo"), text.index("delta") + len("delta") - 1  # 0-based columns

        def centre(col: int) -> tuple[int, int]:
            return ox + 1 + col * cw + cw // 2, oy + 1 + (row - 1) * ch + ch // 2

        return centre(first), centre(last), text[first:last + 1]


APP = XtermApp
