"""The sandbox's demo application: one text field, and a list of what it received.

The field is painted #3366CC, a colour used nowhere else on the screen: the
bundled demo scenario (``cud/scripted/scenarios/demo.json``) aims its click
at exactly that colour, and a real model is told to use "the blue field".
Every line submitted with Enter is shown in the window and appended to
``--log`` as JSON (``{"event": "received", "text": ...}``), so ``demo.sh`` can
say what really reached the application. A first ``{"event": "ready"}`` line
is written once the window is on screen.

GTK 3, so that the application is on the accessibility bus (GTK's bridge,
libatk-adaptor, is on by default) and what an action touches has a name: the
field is the entry "Line to send" (docs/targets.md). Tk has no accessibility
bridge on X11. Run it with Debian's Python (python3-gi, gir1.2-gtk-3.0):
``/usr/bin/python3 sandbox/demo_app.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import GLib

# Before GTK starts: the name the accessibility bus and WM_CLASS give the application.
GLib.set_prgname("cud-demo")
from gi.repository import Gdk, Gtk

__all__ = ()

#: The colour the demo scenario clicks on; keep it in sync with demo.json.
FIELD_COLOUR = "#3366CC"
TITLE = "cud demo"
#: The field's accessible name: what approvals and `cuctl inspect` call it.
FIELD_NAME = "Line to send"

# No focus ring, border, shadow or gradient: every pixel of the field's box is
# the target colour, so the scripted model's bounding box is the field.
CSS = f"""
window {{ background: #F2F2F2; }}
label {{ color: #202020; font: 14px "DejaVu Sans"; }}
entry, entry:focus {{
    background: {FIELD_COLOUR}; background-image: none; color: #FFFFFF; caret-color: #FFFFFF;
    border: none; border-radius: 0; box-shadow: none; outline: none; font: 20px "DejaVu Sans";
    padding: 10px 4px; min-height: 0;
}}
entry selection {{ background: #FFFFFF; color: #000000; }}
list, list row {{ background: #FFFFFF; color: #202020; font: 14px "DejaVu Sans"; }}
"""


class DemoApp:
    def __init__(self, log: Path | None) -> None:
        self.log = log
        provider = Gtk.CssProvider()
        provider.load_from_data(CSS.encode())
        Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), provider,
                                                 Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
        self.window = Gtk.Window(title=TITLE)
        self.window.connect("destroy", Gtk.main_quit)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12, margin=24)
        self.window.add(box)
        box.pack_start(Gtk.Label(label="Click the blue field, type a line and press Enter.", xalign=0),
                       False, False, 0)
        self.entry = Gtk.Entry()
        self.entry.get_accessible().set_name(FIELD_NAME)
        self.entry.connect("activate", self.on_enter)
        box.pack_start(self.entry, False, False, 0)
        box.pack_start(Gtk.Label(label="Received:", xalign=0), False, False, 0)
        self.received = Gtk.ListBox(selection_mode=Gtk.SelectionMode.NONE)
        self.received.get_accessible().set_name("Received")
        scroller = Gtk.ScrolledWindow()
        scroller.add(self.received)
        box.pack_start(scroller, True, True, 0)
        self.ready = False
        self.window.connect("map-event", self.announce_ready)

    def write(self, record: dict[str, str]) -> None:
        if self.log is None:
            return
        # One write per line with O_APPEND: a reader never sees half a record.
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def announce_ready(self, *_args: object) -> bool:
        if not self.ready:
            self.ready = True
            # Let GTK draw the mapped window before anyone takes a screenshot.
            GLib.timeout_add(100, self.write_ready)
        return False

    def write_ready(self) -> bool:
        self.write({"event": "ready"})
        return False  # once

    def on_enter(self, _entry: Gtk.Entry) -> None:
        text = self.entry.get_text()
        row = Gtk.Label(label=text, xalign=0)
        self.received.add(row)
        row.show()
        self.entry.set_text("")
        self.write({"event": "received", "text": text})


def _geometry(text: str) -> tuple[int, int, int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)\+(\d+)\+(\d+)", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"geometry must look like 900x420+80+80, got {text!r}")
    width, height, x, y = map(int, match.groups())
    return width, height, x, y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="append JSON lines (ready, received) to this file")
    parser.add_argument("--geometry", type=_geometry, default="900x420+80+80",
                        help="WIDTHxHEIGHT+X+Y (default: %(default)s)")
    args = parser.parse_args(argv)
    if Gdk.Screen.get_default() is None:  # PyGObject opened $DISPLAY on import, or could not
        print(f"demo_app: cannot open the display {os.environ.get('DISPLAY')!r}", file=sys.stderr)
        return 1
    app = DemoApp(args.log)
    width, height, x, y = args.geometry
    app.window.set_default_size(width, height)
    app.window.move(x, y)
    app.window.show_all()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
