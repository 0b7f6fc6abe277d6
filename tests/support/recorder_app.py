"""A Tk window that records every input event reaching it, for the tests.

Run as ``python recorder_app.py EVENTS_FILE TEXT_FILE WIDTHxHEIGHT+X+Y`` on the
display under test. Each event is one JSON line in EVENTS_FILE, flushed at once;
the content of its text area is rewritten to TEXT_FILE after every key, so a test
can compare what an application really received, not just the key events.
"""

from __future__ import annotations

import json
import os
import sys
import tkinter as tk

events_path, text_path, geometry = sys.argv[1], sys.argv[2], sys.argv[3]
out = open(events_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (open for the app's whole life)

root = tk.Tk()
root.overrideredirect(True)  # no decorations: window pixels are screen pixels
root.geometry(geometry)
# A steady cursor: a blinking one would keep changing the screen under the tests.
text = tk.Text(root, font=("DejaVu Sans Mono", 12), undo=False, background="#ffffff", insertofftime=0)
text.pack(fill="both", expand=True)


def emit(record: dict[str, object]) -> None:
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


def dump_text() -> None:
    with open(text_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text.get("1.0", "end-1c"))
    os.replace(text_path + ".tmp", text_path)


def on_key(kind: str):
    def handler(e: tk.Event) -> None:
        emit({"type": kind, "keysym": e.keysym, "keysym_num": e.keysym_num, "char": e.char, "state": e.state})
        if kind == "KeyPress":
            root.after_idle(dump_text)

    return handler


def on_button(kind: str):
    def handler(e: tk.Event) -> str:
        emit({"type": kind, "button": e.num, "x": e.x_root, "y": e.y_root, "state": e.state})
        # The text area must hold exactly what was typed: clicks may not move its cursor.
        return "break"

    return handler


def on_motion(e: tk.Event) -> str:
    emit({"type": "Motion", "x": e.x_root, "y": e.y_root, "state": e.state})
    return "break"


def on_wheel(e: tk.Event) -> str:
    emit({"type": "MouseWheel", "delta": e.delta, "x": e.x_root, "y": e.y_root, "state": e.state})
    return "break"


# Generic sequences only: a more specific binding would shadow these recorders.
for widget in (text,):
    widget.bind("<KeyPress>", on_key("KeyPress"), add=True)
    widget.bind("<KeyRelease>", on_key("KeyRelease"), add=True)
    widget.bind("<ButtonPress>", on_button("ButtonPress"), add=True)
    widget.bind("<ButtonRelease>", on_button("ButtonRelease"), add=True)
    widget.bind("<Motion>", on_motion, add=True)
    widget.bind("<MouseWheel>", on_wheel, add=True)


def ready() -> None:
    # Xvfb without a window manager keeps the X focus at PointerRoot: keys go to the
    # window under the pointer, so tests keep the pointer over this window.
    text.focus_force()
    root.update_idletasks()
    emit({"type": "ready", "x": root.winfo_rootx(), "y": root.winfo_rooty(),
          "width": root.winfo_width(), "height": root.winfo_height()})


root.after(50, ready)
root.mainloop()
