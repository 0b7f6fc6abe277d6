"""A full-screen Tk window that, at a button press, paints a run of colours a few ms apart (the settle tests' scene).

``python animator.py READY_FILE GEOMETRY FRAMES PERIOD_MS``: black until pressed, then FRAMES shades of grey,
one every PERIOD_MS, ending on pure red (#ff0000), which no shade before it is. It writes READY_FILE once mapped.
A screenshot taken once the screen settles must show the red: any shade means it was taken mid-run.
"""

from __future__ import annotations

import sys
import tkinter as tk

FINAL = "#ff0000"


def main() -> None:
    ready, geometry, frames, period = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    root = tk.Tk()
    root.overrideredirect(True)
    root.geometry(geometry)
    root.configure(background="#000000", cursor="none")

    def paint(frame: int) -> None:
        shade = 1 + frame * 250 // frames  # never 0 (black) nor the red
        root.configure(background=FINAL if frame == frames else f"#{shade:02x}{shade:02x}{shade:02x}")
        if frame < frames:
            root.after(period, paint, frame + 1)

    root.bind("<ButtonPress>", lambda _event: paint(0))

    def mapped(_event: object) -> None:
        with open(ready, "w") as fh:
            fh.write("ready\n")

    root.bind("<Map>", mapped)
    root.mainloop()


if __name__ == "__main__":
    main()
