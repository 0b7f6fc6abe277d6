"""A busy screen for benchmarks: a photo-like half and a text-like half.

Screenshot costs depend on content (flat colour compresses to nothing), so every
benchmark measures on this scene instead of an empty desktop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.support.xserver import stop_process

__all__ = ("show_busy_scene", "show_entry")

_SCENE = r'''
import random, sys, tkinter as tk
from PIL import Image, ImageFilter, ImageTk
W, H = int(sys.argv[1]), int(sys.argv[2])
random.seed(1)
half = (W // 2, H)
photo = Image.effect_mandelbrot(half, (-2.0, -1.2, 0.8, 1.2), 100).convert("RGB")
photo = Image.blend(photo, Image.effect_noise(half, 40).convert("RGB"), 0.3).filter(ImageFilter.GaussianBlur(1))
photo = Image.blend(photo, Image.linear_gradient("L").resize(half).convert("RGB"), 0.3)
root = tk.Tk(); root.overrideredirect(True); root.geometry(f"{W}x{H}+0+0")
canvas = tk.Canvas(root, width=W, height=H, highlightthickness=0, bg="white"); canvas.pack()
image = ImageTk.PhotoImage(photo); canvas.create_image(0, 0, anchor="nw", image=image)
words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
for row in range(H // 17):
    canvas.create_text(W // 2 + 10, 10 + row * 17, anchor="nw", font=("DejaVu Sans", 10),
                       text=" ".join(random.choice(words) for _ in range(12)),
                       fill=random.choice(["black", "#333333", "#1a4fa0"]))
root.after(200, lambda: print("ready", flush=True))
root.mainloop()
'''

# A one-line entry over the busy scene: each step types a letter into it, so every
# screenshot differs a little, as a real task's do (a pointer move alone changes no
# pixel: X screenshots leave the cursor out).
_ENTRY = r'''
import sys, tkinter as tk
root = tk.Tk(); root.overrideredirect(True); root.geometry(sys.argv[1])
entry = tk.Entry(root, font=("DejaVu Sans", 14)); entry.pack(fill="both", expand=True)
root.after(200, lambda: (entry.focus_force(), print("ready", flush=True)))
root.mainloop()
'''


def show_busy_scene(display: str, width: int, height: int) -> subprocess.Popen[str]:
    """Start the scene on ``display``; returns once it is drawn. Stop it with ``terminate()``."""
    proc = subprocess.Popen([sys.executable, "-c", _SCENE, str(width), str(height)],
                            env={**os.environ, "DISPLAY": display}, stdout=subprocess.PIPE, text=True)
    _ready(proc, "the busy scene")
    time.sleep(0.3)  # let the last expose reach the framebuffer
    return proc


def show_entry(display: str, geometry: str) -> subprocess.Popen[str]:
    """Start a focused one-line entry at ``geometry`` (``WxH+X+Y``) on ``display``; returns once it is up."""
    proc = subprocess.Popen([sys.executable, "-c", _ENTRY, geometry],
                            env={**os.environ, "DISPLAY": display}, stdout=subprocess.PIPE, text=True)
    _ready(proc, "the entry window")
    return proc


def _ready(proc: subprocess.Popen[str], what: str) -> None:
    """Wait for the window's "ready"; one that does not say it is stopped (by pid) before the error."""
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        stop_process(proc)  # type: ignore[arg-type]
        raise RuntimeError(f"{what} did not start")
