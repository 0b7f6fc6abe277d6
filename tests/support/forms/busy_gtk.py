"""A GTK 3 window where a model does legitimate work that repeats itself: the stuck guard's tests' app.

Run with the system's Python (PyGObject), reporting through probe_common. From the top:
a menu bar (File, Edit, View, Help, each a few items); a row with an entry, a "Download"
button, a progress bar and its label, and a static label ("Nothing happens here"); then,
side by side, a list of 400 rows and a long document of 60 pages. The focus starts on the
Download button, so nothing blinks until a test clicks into a text.

The state adds to the probe's: ``regions`` (each widget's screen rectangle, and each menu
title's), ``progress`` (0..1), ``list_top`` and ``doc_top`` (scroll positions) and
``menu_open``, and ``resets`` and ``painted`` (resets carried out, and of those the ones whose
frame has been painted). Commands: ``reset`` (entry emptied, list and document at the top, no menu
open, the download stopped at 0, the focus back on Download).
A download runs from 0 to 100% in DOWNLOAD_SECONDS, in steps of 0.5%: the bar and its label
show what they never showed before while it runs, as a real download's do.
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

DOWNLOAD_SECONDS = 120
MENUS = {"File": ["New", "Open", "Save", "Quit"], "Edit": ["Undo", "Cut", "Copy", "Paste"],
         "View": ["Zoom in", "Zoom out", "Full screen"], "Help": ["Contents", "About"]}
WORDS = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp",
         "lumen", "marble", "nectar", "onyx", "pewter", "quartz", "russet", "sienna", "tundra"]

probe = Probe()
# No CSS transitions: a focus ring that fades for a moment after the reset's focus change would be in a
# task's first screenshot and gone from its second, a change no action made (the caret still blinks).
Gtk.Settings.get_default().set_property("gtk-enable-animations", False)
window = Gtk.Window(title="Busy work")
window.connect("destroy", Gtk.main_quit)
window.set_default_size(1000, 700)
outer = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
window.add(outer)

menubar = Gtk.MenuBar()
titles: dict[str, Gtk.MenuItem] = {}
for title, items in MENUS.items():
    top = Gtk.MenuItem(label=title)
    menu = Gtk.Menu()
    for item in items:
        menu.append(Gtk.MenuItem(label=item))
    top.set_submenu(menu)
    menubar.append(top)
    titles[title] = top
outer.pack_start(menubar, False, False, 0)

row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12, margin=8)
entry = Gtk.Entry()
entry.get_accessible().set_name("Name")
entry.set_size_request(400, 32)
download = Gtk.Button(label="Download")
bar = Gtk.ProgressBar()
bar.set_size_request(200, 20)
percent = Gtk.Label(label="0.0%")
percent.set_width_chars(7)
still = Gtk.Label(label="Nothing happens here")
still.set_size_request(220, 32)
for widget in (entry, download, bar, percent, still):
    row.pack_start(widget, False, False, 0)
outer.pack_start(row, False, False, 0)

panes = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=8, margin=8)
store = Gtk.ListStore(str)
for i in range(400):
    store.append([f"Row {i + 1}: {WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} {i * 37 % 1000}"])
view = Gtk.TreeView(model=store)
view.append_column(Gtk.TreeViewColumn("Items", Gtk.CellRendererText(), text=0))
list_scroll = Gtk.ScrolledWindow()
list_scroll.set_size_request(420, 520)
list_scroll.add(view)
doc = Gtk.TextView(editable=False, wrap_mode=Gtk.WrapMode.WORD)
doc.get_buffer().set_text("\n".join(
    f"Page {page + 1}, line {line + 1}: {WORDS[(page * 3 + line) % len(WORDS)]} {WORDS[(page + line * 5) % len(WORDS)]}"
    f" {page * 100 + line}" for page in range(60) for line in range(30)))
doc_scroll = Gtk.ScrolledWindow()
doc_scroll.set_size_request(500, 520)
doc_scroll.add(doc)
panes.pack_start(list_scroll, False, False, 0)
panes.pack_start(doc_scroll, True, True, 0)
outer.pack_start(panes, True, True, 0)

progress = {"value": 0.0, "timer": 0}
#: Resets carried out and painted: the window's frame after a reset is on the screen once ``painted`` counts it.
resets = {"done": 0, "painted": 0}


def advance() -> bool:
    progress["value"] = min(1.0, progress["value"] + 0.005)
    bar.set_fraction(progress["value"])
    percent.set_text(f"{progress['value'] * 100:.1f}%")
    if progress["value"] >= 1.0:
        progress["timer"] = 0
        return False
    return True


def start_download(_button: Gtk.Button) -> None:
    stop_download()
    progress["timer"] = GLib.timeout_add(int(DOWNLOAD_SECONDS * 1000 * 0.005), advance)


def stop_download() -> None:
    if progress["timer"]:
        GLib.source_remove(progress["timer"])
        progress["timer"] = 0
    progress["value"] = 0.0
    bar.set_fraction(0.0)
    percent.set_text("0.0%")


download.connect("clicked", start_download)


def root_rect(widget: Gtk.Widget) -> list[int]:
    x, y = widget.translate_coordinates(window, 0, 0)
    _, ox, oy = window.get_window().get_origin()
    allocation = widget.get_allocation()
    return [ox + x, oy + y, allocation.width, allocation.height]


def state() -> dict[str, Any]:
    regions = {"entry": root_rect(entry), "download": root_rect(download), "still": root_rect(still),
               "list": root_rect(list_scroll), "doc": root_rect(doc_scroll),
               **{f"menu:{title}": root_rect(item) for title, item in titles.items()}}
    return {"pad": regions["list"], "field": regions["entry"], "regions": regions,
            "value": entry.get_text(), "progress": progress["value"],
            "list_top": round(list_scroll.get_vadjustment().get_value()),
            "doc_top": round(doc_scroll.get_vadjustment().get_value()),
            "menu_open": any(item.get_submenu().get_visible() for item in titles.values()),
            "resets": resets["done"], "painted": resets["painted"]}


def after_paint(_clock: Gdk.FrameClock) -> None:
    resets["painted"] = resets["done"]


def run(command: str) -> None:
    if command == "reset":
        for item in titles.values():
            item.get_submenu().popdown()
        menubar.deactivate()
        entry.set_text("")
        for scroll in (list_scroll, doc_scroll):
            scroll.get_vadjustment().set_value(0)
        doc.get_buffer().place_cursor(doc.get_buffer().get_start_iter())
        stop_download()
        download.grab_focus()
        resets["done"] += 1
        window.queue_draw()  # a frame after the reset, even if it changed nothing: its paint is the sign
    else:
        print(f"busy probe: unknown command {command!r}", file=sys.stderr)


GLib.timeout_add(20, lambda: probe.tick(state, lambda: window.get_mapped() and window.is_active(), run) or True)
window.show_all()
window.get_frame_clock().connect("after-paint", after_paint)
window.move(0, 0)
download.grab_focus()
window.present()
Gdk.notify_startup_complete()
Gtk.main()
