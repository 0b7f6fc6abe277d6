"""A small Tk form for the approval-binding tests: an entry whose caret blinks, and a button.

Run as ``python tk_form.py`` on the display under test. It prints JSON lines on
stdout: ``{"ready": {"entry": [x, y, w, h], "button": [x, y, w, h]}}`` once mapped
and focused, then ``{"clicked": "LABEL"}`` whenever the button is pressed. Lines
on stdin change it with nobody acting: ``relabel`` (Cancel becomes Delete),
``move`` (the button jumps 200 px right), ``type TEXT`` (the entry's text).
Tk's default caret blinks (600 ms on, 300 ms off) while the entry has focus.
"""

from __future__ import annotations

import json
import sys
import threading
import tkinter as tk

root = tk.Tk()
root.overrideredirect(True)
root.geometry("700x300+40+40")
root.configure(background="#ffffff")
entry = tk.Entry(root, font=("DejaVu Sans", 16), width=30)
entry.place(x=20, y=20)
button = tk.Button(root, text="Cancel", font=("DejaVu Sans", 16),
                   command=lambda: say({"clicked": button.cget("text")}))
button.place(x=20, y=150)


def say(message: dict[str, object]) -> None:
    print(json.dumps(message), flush=True)


def box(widget: tk.Widget) -> list[int]:
    return [widget.winfo_rootx(), widget.winfo_rooty(), widget.winfo_width(), widget.winfo_height()]


def command(line: str) -> None:
    verb, _, rest = line.strip().partition(" ")
    if verb == "relabel":
        button.configure(text="Delete")
    elif verb == "move":
        button.place(x=220, y=150)
    elif verb == "type":
        entry.delete(0, "end")
        entry.insert(0, rest)
    root.update_idletasks()
    say({"done": verb, "button": box(button)})


def read_stdin() -> None:
    for line in sys.stdin:
        root.after(0, command, line)
    root.after(0, root.destroy)


def ready() -> None:
    entry.focus_force()
    say({"ready": {"entry": box(entry), "button": box(button)}})


threading.Thread(target=read_stdin, daemon=True).start()
root.after(300, ready)
root.mainloop()
