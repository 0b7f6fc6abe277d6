"""The sandbox's demo application: one text field, and a list of what it received.

The field is painted #3366CC, a colour used nowhere else on the screen: the
bundled demo scenario (``cud/scripted/scenarios/demo.json``) aims its click
at exactly that colour, and a real model is told to use "the blue field".
Every line submitted with Enter is shown in the window and appended to
``--log`` as JSON (``{"event": "received", "text": ...}``), so ``demo.sh`` can
say what really reached the application. A first ``{"event": "ready"}`` line
is written once the window is on screen.

Standard library only (tkinter from python3-tk).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tkinter as tk
from pathlib import Path

__all__ = ()

#: The colour the demo scenario clicks on; keep it in sync with demo.json.
FIELD_COLOUR = "#3366CC"
TITLE = "cud demo"


class DemoApp:
    def __init__(self, root: tk.Tk, log: Path | None) -> None:
        self.root = root
        self.log = log
        root.title(TITLE)
        root.configure(background="#F2F2F2", padx=24, pady=24)
        tk.Label(
            root,
            text="Click the blue field, type a line and press Enter.",
            background="#F2F2F2",
            foreground="#202020",
            font=("DejaVu Sans", 14),
        ).pack(anchor="w")
        # No focus ring and no relief: every pixel of the field's box is the
        # target colour, so the scripted model's bounding box is the field.
        self.entry = tk.Entry(
            root,
            width=40,
            font=("DejaVu Sans", 20),
            background=FIELD_COLOUR,
            foreground="#FFFFFF",
            insertbackground="#FFFFFF",
            selectbackground="#FFFFFF",
            selectforeground="#000000",
            relief="flat",
            borderwidth=0,
            highlightthickness=0,
        )
        self.entry.pack(fill="x", pady=(12, 12), ipady=10)
        self.entry.bind("<Return>", self.on_enter)
        tk.Label(root, text="Received:", background="#F2F2F2", foreground="#202020").pack(anchor="w")
        self.received = tk.Listbox(root, height=8, font=("DejaVu Sans", 14), activestyle="none")
        self.received.pack(fill="both", expand=True)
        self.ready = False
        # <Map> of the toplevel itself (children's events pass through too).
        root.bind("<Map>", self.announce_ready, add="+")

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

    def announce_ready(self, event: tk.Event) -> None:
        if event.widget is self.root and not self.ready:
            self.ready = True
            # Let Tk draw the mapped window before anyone takes a screenshot.
            self.root.after(100, lambda: self.write({"event": "ready"}))

    def on_enter(self, _event: tk.Event) -> str:
        text = self.entry.get()
        self.received.insert("end", text)
        self.entry.delete(0, "end")
        self.write({"event": "received", "text": text})
        return "break"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="append JSON lines (ready, received) to this file")
    parser.add_argument("--geometry", default="900x420+80+80", help="Tk geometry (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        root = tk.Tk()
    except tk.TclError as exc:
        print(f"demo_app: cannot open the display {os.environ.get('DISPLAY')!r}: {exc}", file=sys.stderr)
        return 1
    root.geometry(args.geometry)
    DemoApp(root, args.log)
    root.mainloop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
