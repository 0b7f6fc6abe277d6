"""A GTK 3 dialog: buttons "Delete account", "Cancel", an entry "Search" and a label it never shows, reporting
through probe_common.

Run with the system's Python (PyGObject). Events: ``{"type": "clicked", "widget": LABEL}``
when a button is activated; ``{"type": "text", "widget": "Search", "value": TEXT}``
when the entry's text changes. Command ``relabel``: the first button becomes "Send money".
"""

from __future__ import annotations

import os
import sys
from typing import Any

os.environ["GDK_SCALE"] = "1"

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, GLib, Gtk

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
from probe_common import Probe

probe = Probe()
window = Gtk.Window(title="Account settings")
window.connect("destroy", Gtk.main_quit)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12, margin=16)
window.add(box)
buttons = [Gtk.Button(label="Delete account"), Gtk.Button(label="Cancel")]
for button in buttons:
    button.set_size_request(240, 48)
    button.connect("clicked", lambda b: probe.emit({"type": "clicked", "widget": b.get_label()}))
    box.pack_start(button, False, False, 0)
entry = Gtk.Entry()
entry.get_accessible().set_name("Search")
entry.set_size_request(240, 36)
entry.connect("changed", lambda e: probe.emit({"type": "text", "widget": "Search", "value": e.get_text()}))
box.pack_start(entry, False, False, 0)
# The tests' fence (App.fence): motion reported from a plain area below the controls.
pad = Gtk.EventBox()
pad.set_size_request(240, 40)
pad.add_events(Gdk.EventMask.POINTER_MOTION_MASK)


def on_motion(_widget: Gtk.Widget, event: Gdk.EventMotion) -> bool:
    probe.emit({"type": "move", "x": round(event.x_root), "y": round(event.y_root)})
    return False


pad.connect("motion-notify-event", on_motion)
box.pack_start(pad, False, False, 0)
# Never shown, and so nowhere on the screen: AT-SPI still lists it, with GTK's "no extents"
# (G_MININT, G_MININT, 1x1), as it does GTK's idle scroll bars.
unshown = Gtk.Label(label="Never shown")
unshown.set_no_show_all(True)
box.pack_start(unshown, False, False, 0)


def rect(widget: Gtk.Widget) -> list[int]:
    x, y = widget.translate_coordinates(window, 0, 0)
    _, ox, oy = window.get_window().get_origin()
    return [ox + x, oy + y, widget.get_allocated_width(), widget.get_allocated_height()]


def state() -> dict[str, Any]:
    return {"pad": rect(pad), "field": rect(entry), "buttons": {b.get_label(): rect(b) for b in buttons},
            "value": entry.get_text(), "pid": os.getpid()}


def run(command: str) -> None:
    if command == "relabel":
        buttons[0].set_label("Send money")


GLib.timeout_add(20, lambda: probe.tick(state, lambda: window.get_mapped() and window.is_active(), run) or True)
window.show_all()
buttons[1].grab_focus()
window.present()
Gtk.main()
