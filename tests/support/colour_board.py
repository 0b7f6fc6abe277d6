"""A full-screen Tk window that shows the next colour of a list at each click (the video tests' scene).

``python colour_board.py READY_FILE GEOMETRY '#rrggbb' ...``: it paints the first
colour, writes READY_FILE once mapped, and moves one colour on at every button
press, so each step of a scripted task leaves a screen unlike the one before.
"""

from __future__ import annotations

import sys
import tkinter as tk


def main() -> None:
    ready, geometry, *colours = sys.argv[1:]
    root = tk.Tk()
    root.overrideredirect(True)
    root.geometry(geometry)
    state = {"index": 0}
    root.configure(background=colours[0], cursor="none")

    def next_colour(_event: object) -> None:
        state["index"] = min(state["index"] + 1, len(colours) - 1)
        root.configure(background=colours[state["index"]])

    root.bind("<ButtonPress>", next_colour)

    def mapped(_event: object) -> None:
        with open(ready, "w") as fh:
            fh.write("ready\n")

    root.bind("<Map>", mapped)
    root.mainloop()


if __name__ == "__main__":
    main()
