"""A GTK 3 window that reports what GTK itself saw, through the files of ``reporting.py``.

Run by ``gtk.py`` with the system's Python (PyGObject). The pad is a large
EventBox inside a Gtk.ScrolledWindow, so clicks, motion and the wheel all land on
one widget and the wheel then scrolls the window as GTK does; the field is a
multi-line Gtk.TextView; below it a read-only TextView holds the text the drag
test selects in, and below that a drag source and a drop target that use GTK's own
drag-and-drop (``drag_source_set``: GTK decides when a press and motion is a drag;
XDND, as between programs): the drop reports where GTK says it landed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

os.environ["GDK_SCALE"] = "1"  # screen pixels are GTK pixels: coordinates are reported unscaled

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, GLib, Gtk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_common import LatestSelection, Probe, dom_key, mods

PAD_SIZE = (480, 300)
CONTENT_SIZE = (1600, 1200)  # larger than the pad both ways, so it scrolls all four ways from the middle
DRAG_TEXT = "alpha bravo charlie delta"
DRAG_WORD = "bravo"

probe = Probe()


def event_mods(state: Gdk.ModifierType) -> list[str]:
    return mods(shift=bool(state & Gdk.ModifierType.SHIFT_MASK), ctrl=bool(state & Gdk.ModifierType.CONTROL_MASK),
                alt=bool(state & Gdk.ModifierType.MOD1_MASK),
                super_=bool(state & (Gdk.ModifierType.SUPER_MASK | Gdk.ModifierType.MOD4_MASK)))


def on_button(_widget: Gtk.Widget, event: Gdk.EventButton) -> bool:
    kinds = {Gdk.EventType.BUTTON_PRESS: "down", Gdk.EventType._2BUTTON_PRESS: "dblclick",
             Gdk.EventType.BUTTON_RELEASE: "up"}
    kind = kinds.get(event.type)  # a triple click's 3BUTTON_PRESS is not in the vocabulary
    if kind is not None:
        probe.emit({"type": kind, "button": event.button, "x": round(event.x_root), "y": round(event.y_root),
                    "mods": event_mods(event.state)})
    return False


def on_motion(_widget: Gtk.Widget, event: Gdk.EventMotion) -> bool:
    probe.emit({"type": "move", "x": round(event.x_root), "y": round(event.y_root)})
    return False


def sign(v: float) -> int:
    return (v > 0) - (v < 0)


def on_scroll(_widget: Gtk.Widget, event: Gdk.EventScroll) -> bool:
    steps = {Gdk.ScrollDirection.UP: (0, -1), Gdk.ScrollDirection.DOWN: (0, 1),
             Gdk.ScrollDirection.LEFT: (-1, 0), Gdk.ScrollDirection.RIGHT: (1, 0)}
    if event.direction == Gdk.ScrollDirection.SMOOTH:
        _, dx, dy = event.get_scroll_deltas()
        dx, dy = sign(dx), sign(dy)
    else:
        dx, dy = steps[event.direction]
    probe.emit({"type": "wheel", "dx": dx, "dy": dy, "mods": event_mods(event.state)})
    return False  # on to the ScrolledWindow, which scrolls


def on_key(_widget: Gtk.Widget, event: Gdk.EventKey) -> bool:
    char = chr(Gdk.keyval_to_unicode(event.keyval) or 0)
    probe.emit({"type": "key", "key": dom_key(event.keyval, char), "mods": event_mods(event.state),
                "keysym": event.keyval, "keycode": event.hardware_keycode})  # the last two for the logs
    return False  # on to the focused widget, so the TextView still gets the typed text


window = Gtk.Window(title="cud gtk probe")
window.connect("destroy", Gtk.main_quit)
window.connect("key-press-event", on_key)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8, margin=8)
window.add(box)

scrolled = Gtk.ScrolledWindow()
scrolled.set_size_request(*PAD_SIZE)
content = Gtk.EventBox()
content.set_size_request(*CONTENT_SIZE)
content.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK
                   | Gdk.EventMask.POINTER_MOTION_MASK | Gdk.EventMask.SCROLL_MASK
                   | Gdk.EventMask.SMOOTH_SCROLL_MASK)
content.connect("button-press-event", on_button)
content.connect("button-release-event", on_button)
content.connect("motion-notify-event", on_motion)
content.connect("scroll-event", on_scroll)
scrolled.add(content)  # wrapped in a Gtk.Viewport
viewport = scrolled.get_child()
box.pack_start(scrolled, False, False, 0)

field = Gtk.TextView(wrap_mode=Gtk.WrapMode.WORD_CHAR)
field.set_size_request(PAD_SIZE[0], 100)
box.pack_start(field, False, False, 0)

drag_view = Gtk.TextView(editable=False, cursor_visible=False)
drag_view.get_buffer().set_text(DRAG_TEXT)
css = Gtk.CssProvider()
css.load_from_data(b"#drag { font: 16pt monospace; }")  # wide letters: room to aim inside one
drag_view.set_name("drag")
drag_view.get_style_context().add_provider(css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
box.pack_start(drag_view, False, False, 0)

DND_TARGETS = [Gtk.TargetEntry.new("text/plain", 0, 0)]
dnd_box = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=40)
dnd_source = Gtk.EventBox()
dnd_source.set_size_request(140, 90)
dnd_source.add(Gtk.Label(label="drag me"))
dnd_source.drag_source_set(Gdk.ModifierType.BUTTON1_MASK, DND_TARGETS, Gdk.DragAction.COPY)
dnd_source.connect("drag-data-get", lambda _w, _ctx, data, _info, _time: data.set_text("cud", -1))
dnd_target = Gtk.EventBox()
dnd_target.set_size_request(240, 90)
dnd_target.add(Gtk.Label(label="drop here"))
dnd_target.drag_dest_set(Gtk.DestDefaults.ALL, DND_TARGETS, Gdk.DragAction.COPY)
dnd_box.pack_start(dnd_source, False, False, 0)
dnd_box.pack_start(dnd_target, False, False, 0)
box.pack_start(dnd_box, False, False, 0)


def root_origin(widget: Gtk.Widget) -> tuple[int, int]:
    """The widget's top-left on the screen: inside the toplevel, plus where openbox put the toplevel."""
    x, y = widget.translate_coordinates(window, 0, 0)
    _, ox, oy = window.get_window().get_origin()
    return ox + x, oy + y


def root_rect(widget: Gtk.Widget) -> list[int]:
    x, y = root_origin(widget)
    return [x, y, widget.get_allocated_width(), widget.get_allocated_height()]


def on_drop(widget: Gtk.Widget, _context: Gdk.DragContext, x: int, y: int, data: Gtk.SelectionData,
            _info: int, _time: int) -> None:
    ox, oy = root_origin(widget)  # x, y are in the target widget's coordinates
    probe.emit({"type": "drop", "x": ox + x, "y": oy + y, "data": data.get_text()})


dnd_target.connect("drag-data-received", on_drop)


def drag_points() -> list[Any]:
    """From just inside the first letter of DRAG_WORD to just inside its last: selects exactly it."""
    buffer = drag_view.get_buffer()
    start = DRAG_TEXT.index(DRAG_WORD)
    ox, oy = root_origin(drag_view)
    points = []
    # The left half of the first letter puts the cursor before it; the right half of the last, after it.
    for offset, at_right in ((start, False), (start + len(DRAG_WORD) - 1, True)):
        rect = drag_view.get_iter_location(buffer.get_iter_at_offset(offset))
        x, y = drag_view.buffer_to_window_coords(Gtk.TextWindowType.WIDGET, rect.x, rect.y)
        x += rect.width - 2 if at_right else 2
        points.append([ox + x, oy + y + rect.height // 2])
    return [*points, DRAG_WORD]


def selected(view: Gtk.TextView) -> str:
    bounds = view.get_buffer().get_selection_bounds()
    return view.get_buffer().get_text(*bounds, True) if bounds else ""


latest_selection = LatestSelection()


def state() -> dict[str, Any]:
    buffer = field.get_buffer()
    hadj, vadj = scrolled.get_hadjustment(), scrolled.get_vadjustment()
    return {"pad": root_rect(viewport), "field": root_rect(field), "drag": drag_points(),
            "dnd": [root_rect(dnd_source), root_rect(dnd_target)],
            "value": buffer.get_text(buffer.get_start_iter(), buffer.get_end_iter(), True),
            "selection": latest_selection(field=selected(field), drag=selected(drag_view)),
            "selections": {"field": selected(field), "drag": selected(drag_view)},  # for the logs
            "scroll": [round(hadj.get_value()), round(vadj.get_value())]}


def focused() -> bool:
    return window.get_mapped() and window.is_active()


def run(command: str) -> None:
    if command == "clear":
        field.get_buffer().set_text("")
    elif command == "reset_scroll":
        for adj in (scrolled.get_hadjustment(), scrolled.get_vadjustment()):
            adj.set_value((adj.get_upper() - adj.get_page_size()) / 2)
    else:
        print(f"gtk probe: unknown command {command!r}", file=sys.stderr)


def tick() -> bool:
    probe.tick(state, focused, run)
    return True


window.show_all()
field.grab_focus()
window.present()
GLib.timeout_add(20, tick)
Gtk.main()
