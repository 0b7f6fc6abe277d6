"""Screens of different kinds for the screenshot benchmark, each shown on a desktop like the sandbox's.

A PNG's size and its encoder's speed depend on what is on the screen: flat
colour compresses to nothing, noise hardly at all, and text sits in between.
So the screenshot is measured on several screens, not one:

* ``scene``: the benchmarks' busy scene (a photo-like half and a text half);
* ``photo``: a noise-like photograph filling the screen (grain over blurred detail);
* ``web page``: a text-heavy article rendered by Debian's Chromium;
* ``windows``: openbox with several overlapping windows (terminals full of text, a Tk form);
* ``gradients``: vertical, horizontal, diagonal and 2-D colour gradients, a quarter each
  (synthesised pixels in a Tk window);
* ``css gradients``: a web page styled with CSS ``linear-gradient``/``radial-gradient``
  backgrounds, buttons and a title bar, rendered by Debian's Chromium;
* ``wallpaper``: a smooth wallpaper-like image (soft blobs of colour, faint grain)
  as the desktop's background with a terminal over it.

:func:`showing` puts one on a desktop (``tests.support.desktop``) and returns
once the screen has stopped changing; everything it started is stopped by pid.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import mss

from tests.support.desktop import Desktop

from .scene import show_busy_scene

__all__ = ("SCREENS", "grab", "showing")

SCREENS = ("scene", "photo", "web page", "windows", "gradients", "css gradients", "wallpaper")
CHROMIUM = os.environ.get("CUD_TEST_CHROMIUM", "/usr/bin/chromium")

_PHOTO = r'''
import sys, tkinter as tk
import numpy as np
from PIL import Image, ImageFilter, ImageTk
W, H = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(7)
# Detail at every scale, like a photograph of foliage, then sensor grain on top.
img = np.zeros((H, W, 3), np.float32)
for scale, weight in ((64, 90), (16, 50), (4, 30)):
    coarse = rng.normal(0, 1, (H // scale + 2, W // scale + 2, 3)).astype(np.float32)
    up = np.asarray(Image.fromarray(((coarse * 40) + 128).clip(0, 255).astype(np.uint8)).resize(
        ((W // scale + 2) * scale, (H // scale + 2) * scale), Image.BICUBIC), np.float32)[:H, :W]
    img += (up - 128) * weight / 40
img = img + np.array([110, 130, 90], np.float32) + rng.normal(0, 6, (H, W, 3))
photo = Image.fromarray(img.clip(0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6))
root = tk.Tk(); root.overrideredirect(True); root.geometry(f"{W}x{H}+0+0")
canvas = tk.Canvas(root, width=W, height=H, highlightthickness=0); canvas.pack()
image = ImageTk.PhotoImage(photo); canvas.create_image(0, 0, anchor="nw", image=image)
root.mainloop()
'''

_GRADIENTS = r'''
import sys, tkinter as tk
import numpy as np
from PIL import Image, ImageTk
W, H = int(sys.argv[1]), int(sys.argv[2])
y, x = np.mgrid[0:H // 2, 0:W // 2].astype(np.float32)
h, w = H // 2, W // 2
def blend(t, a, b):
    return (np.array(a, np.float32) + (np.array(b, np.float32) - a) * t[..., None]).astype(np.uint8)
top = np.hstack((blend(y / (h - 1), (20, 40, 120), (240, 120, 60)), blend(x / (w - 1), (250, 250, 250), (30, 90, 200))))
two_d = np.stack(((x / (w - 1) * 255), (y / (h - 1) * 255), ((x + y) / (w + h - 2) * 128 + 64)), -1).astype(np.uint8)
bottom = np.hstack((blend((x + y) / (w + h - 2), (90, 10, 160), (10, 200, 160)), two_d))
img = np.zeros((H, W, 3), np.uint8); img[:2 * h, :2 * w] = np.vstack((top, bottom))
root = tk.Tk(); root.overrideredirect(True); root.geometry(f"{W}x{H}+0+0")
canvas = tk.Canvas(root, width=W, height=H, highlightthickness=0); canvas.pack()
image = ImageTk.PhotoImage(Image.fromarray(img)); canvas.create_image(0, 0, anchor="nw", image=image)
root.mainloop()
'''

_WALLPAPER = r'''
import sys
import numpy as np
from PIL import Image
W, H, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(11)
y, x = np.mgrid[0:H, 0:W].astype(np.float32)
img = np.zeros((H, W, 3), np.float32) + np.array([30, 50, 90], np.float32) * (1 - y[..., None] / H)
for _ in range(7):  # soft blobs of colour, as an abstract desktop background has
    cx, cy, r = rng.uniform(0, W), rng.uniform(0, H), rng.uniform(W / 8, W / 2.5)
    weight = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))[..., None]
    img += weight * rng.uniform(20, 140, 3)
img += rng.normal(0, 1.2, img.shape)  # faint grain, as a JPEG-sourced wallpaper's
Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(out)
'''

_CSS_GRADIENTS = """<!doctype html><meta charset=utf-8><title>Dashboard</title>
<style>
body { margin: 0; font: 15px/1.5 "DejaVu Sans", sans-serif; color: #1d1d1f; min-height: 100vh;
       background: linear-gradient(160deg, #fdfbfb 0%, #ebedee 40%, #c9d6ff 100%); }
header { height: 64px; padding: 0 24px; display: flex; align-items: center; color: white; font-size: 22px;
         background: linear-gradient(90deg, #1e3c72, #2a5298 50%, #6a11cb); }
.hero { margin: 24px; height: 260px; border-radius: 16px; color: white; padding: 32px; font-size: 32px;
        background: radial-gradient(circle at 30% 40%, #ff9a9e 0%, #fad0c4 35%, #a18cd1 70%, #5b247a 100%); }
.cards { display: flex; gap: 20px; margin: 24px; }
.card { flex: 1; height: 220px; border-radius: 12px; padding: 16px;
        background: linear-gradient(180deg, #ffffff, #e3e9f7); box-shadow: 0 4px 14px rgba(0, 0, 0, .18); }
button { border: 0; border-radius: 8px; padding: 10px 22px; color: white; font-size: 15px; margin: 8px 4px;
         background: linear-gradient(180deg, #43cea2, #185a9d); }
.bar { height: 14px; border-radius: 7px; margin: 10px 0; background: linear-gradient(90deg, #f7971e, #ffd200); }
</style>
<header>Fleet dashboard</header>
<div class=hero>Every seat, every task, one view</div>
<div class=cards>""" + "".join(
    f"<div class=card><b>Seat {n}</b><p>Tasks queued: {n * 7}. Approvals waiting: {n % 3}.</p>"
    f"<div class=bar style='width:{30 + n * 15}%'></div><button>Open</button><button>Pause</button></div>"
    for n in range(1, 5)) + "</div>"

_FORM = r'''
import sys, tkinter as tk
from tkinter import ttk
x, y = sys.argv[1], sys.argv[2]
root = tk.Tk(); root.title("Settings"); root.geometry(f"560x520+{x}+{y}")
nb = ttk.Notebook(root); nb.pack(fill="both", expand=True, padx=8, pady=8)
page = ttk.Frame(nb); nb.add(page, text="General"); nb.add(ttk.Frame(nb), text="Network")
for row, label in enumerate(["Name", "E-mail", "Server", "Port", "Proxy", "Timeout"]):
    ttk.Label(page, text=label + ":").grid(row=row, column=0, sticky="e", padx=6, pady=4)
    entry = ttk.Entry(page, width=40); entry.insert(0, f"{label.lower()} value {row * 37}")
    entry.grid(row=row, column=1, sticky="w", pady=4)
box = tk.Listbox(page, height=10, width=50)
for n in range(40):
    box.insert("end", f"/var/lib/cud/tasks/{1000 + n}.json  {n * 1371 % 9000} bytes")
box.grid(row=7, column=0, columnspan=2, padx=6, pady=6)
ttk.Checkbutton(page, text="Remember me").grid(row=8, column=0, columnspan=2, sticky="w", padx=6)
bar = ttk.Frame(root); bar.pack(fill="x", padx=8, pady=8)
for text in ("Cancel", "Apply", "OK"):
    ttk.Button(bar, text=text).pack(side="right", padx=4)
root.mainloop()
'''


def _article(width: int) -> str:
    """A long article with headings, links, a table and a sidebar, as text-heavy as a documentation page."""
    words = ("the daemon keeps every submitted task in its queue until a seat is free and writes each "
             "step to the store before it acts so a crash never loses work while approvals wait for a "
             "person configuration values are checked once and a bad one names the key").split(" ")
    pick = random.Random(3)
    paragraphs = []
    for n in range(24):
        text = " ".join(pick.choice(words) for _ in range(90))
        paragraphs.append(f"<p>{text.capitalize()}. See <a href='#s{n}'>section {n}</a> and "
                          f"<code>cuctl show {n}</code>.</p>")
        if n % 6 == 0:
            paragraphs.append(f"<h2 id='s{n}'>Part {n // 6 + 1}: how seats share the queue</h2>")
        if n == 3:
            rows = "".join(f"<tr><td>{k}</td><td>task-{k * 17}</td><td>{['queued', 'running', 'done'][k % 3]}"
                           f"</td><td>{k * 1.7:.1f} s</td></tr>" for k in range(12))
            paragraphs.append(f"<table><tr><th>id</th><th>name</th><th>state</th><th>time</th></tr>{rows}</table>")
    side = "".join(f"<li><a href='#'>Chapter {k}: {words[k % len(words)]} {words[(k * 5) % len(words)]}</a></li>"
                   for k in range(40))
    return f"""<!doctype html><meta charset=utf-8><title>cud manual</title>
<style>
body {{ margin: 0; font: 15px/1.5 "DejaVu Sans", sans-serif; color: #202122; background: #fff; }}
header {{ background: #f6f6f6; border-bottom: 1px solid #a2a9b1; padding: 8px 24px; font-size: 22px; }}
nav {{ float: left; width: {width // 6}px; padding: 12px; background: #f8f9fa; font-size: 13px; }}
main {{ margin-left: {width // 6 + 40}px; padding: 12px 32px; }}
h1 {{ font-family: "DejaVu Serif", serif; font-weight: normal; border-bottom: 1px solid #a2a9b1; }}
a {{ color: #3366cc; }} code {{ background: #eaecf0; padding: 1px 4px; }}
table {{ border-collapse: collapse; margin: 8px 0; }} td, th {{ border: 1px solid #a2a9b1; padding: 2px 10px; }}
th {{ background: #eaecf0; }}
</style>
<header>cud &mdash; the manual <input placeholder="Search the manual" style="float:right;width:300px"></header>
<nav><b>Contents</b><ul>{side}</ul></nav>
<main><h1>Running computer-use agents on a desktop you can trust</h1>{''.join(paragraphs)}</main>"""


def grab(display: str) -> tuple[bytes, tuple[int, int]]:
    """The whole screen as BGRX bytes, with its size (a fresh connection: only for setup)."""
    with mss.MSS(display=display) as sct:
        shot = sct.grab(sct.monitors[0])
        return bytes(shot.raw), shot.size


def _wait_still(display: str, before: bytes, timeout: float = 60.0) -> None:
    """Until the screen differs from ``before`` and two grabs 0.5 s apart are identical."""
    deadline = time.monotonic() + timeout
    last = before
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now, _ = grab(display)
        if now == last and now != before:
            return
        last = now
    raise RuntimeError(f"the screen on {display} did not settle within {timeout:.0f} s")


_SHOW_PICTURE = r'''
import sys, tkinter as tk
from PIL import Image, ImageTk
W, H = int(sys.argv[1]), int(sys.argv[2])
root = tk.Tk(); root.overrideredirect(True); root.geometry(f"{W}x{H}+0+0"); root.lower()
canvas = tk.Canvas(root, width=W, height=H, highlightthickness=0); canvas.pack()
image = ImageTk.PhotoImage(Image.open(sys.argv[3])); canvas.create_image(0, 0, anchor="nw", image=image)
root.mainloop()
'''


def _chromium(desktop: Desktop, workdir: Path, page: Path) -> subprocess.Popen[bytes]:
    """Debian's Chromium showing ``page`` full-screen (kiosk) on ``desktop``, with a fresh profile."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=workdir)
    return desktop.spawn(
        [CHROMIUM, "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-gpu", "--no-sandbox", "--test-type",
         "--disable-dev-shm-usage", "--password-store=basic", "--force-device-scale-factor=1",
         f"--user-data-dir={profile}", f"--window-size={desktop.width},{desktop.height}", "--window-position=0,0",
         "--kiosk", page.as_uri()], "chromium.log", env={**desktop.env, "HOME": profile})


def _start(desktop: Desktop, name: str, workdir: Path) -> list[subprocess.Popen[bytes]]:
    w, h = desktop.width, desktop.height
    if name == "photo":
        return [desktop.spawn([sys.executable, "-c", _PHOTO, str(w), str(h)], "photo.log")]
    if name == "web page":
        page = workdir / "article.html"
        page.write_text(_article(w))
        return [_chromium(desktop, workdir, page)]
    if name == "gradients":
        return [desktop.spawn([sys.executable, "-c", _GRADIENTS, str(w), str(h)], "gradients.log")]
    if name == "css gradients":
        page = workdir / "gradients.html"
        page.write_text(_CSS_GRADIENTS)
        return [_chromium(desktop, workdir, page)]
    if name == "wallpaper":
        picture = workdir / "wallpaper.png"
        subprocess.run([sys.executable, "-c", _WALLPAPER, str(w), str(h), str(picture)], check=True, timeout=120)
        # Tk's root-window-sized, undecorated image is the background; openbox puts the terminal over it.
        return [desktop.spawn([sys.executable, "-c", _SHOW_PICTURE, str(w), str(h), str(picture)], "wallpaper.log"),
                desktop.spawn(["xterm", "-bg", "#202830", "-fg", "#d0d0d0", "-fa", "DejaVu Sans Mono", "-fs", "10",
                               "-geometry", f"90x24+{w // 6}+{h // 5}", "-e", "sh", "-c",
                               "ls -l /etc | head -60; exec sleep 100000"], "xterm.log")]
    if name == "windows":
        subprocess.run(["xsetroot", "-solid", "#3b6e8f"], env=desktop.env, check=True)
        procs = []
        for n, listing in enumerate(("/usr/bin", "/usr/lib/python3/dist-packages", "/etc")):
            colours = (["-bg", "black", "-fg", "#c0c0c0"], ["-bg", "#fdf6e3", "-fg", "#333"],
                       ["-bg", "#1e1e2e", "-fg", "#a6e3a1"])[n]
            procs.append(desktop.spawn(
                ["xterm", *colours, "-fa", "DejaVu Sans Mono", "-fs", "10", "-geometry",
                 f"110x36+{60 + n * w // 5}+{40 + n * h // 7}", "-e", "sh", "-c",
                 f"ls -l --color=always {listing} | head -300; exec sleep 100000"], f"xterm{n}.log"))
        procs.append(desktop.spawn([sys.executable, "-c", _FORM, str(w // 2), str(h // 3)], "form.log"))
        return procs
    raise ValueError(f"unknown screen {name!r}; one of {SCREENS}")


@contextlib.contextmanager
def showing(desktop: Desktop, name: str) -> Iterator[None]:
    """Show screen ``name`` on ``desktop`` (which has openbox) until the block ends."""
    before, _ = grab(desktop.display)
    with tempfile.TemporaryDirectory(prefix="cud-corpus-") as tmp:
        if name == "scene":
            scene = show_busy_scene(desktop.display, desktop.width, desktop.height)
            procs: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = [scene]
        else:
            procs = list(_start(desktop, name, Path(tmp)))
        try:
            _wait_still(desktop.display, before)
            yield
        finally:
            for proc in procs:
                # The scene runs in our session (it reports on stdout); the rest each in their own group.
                with contextlib.suppress(ProcessLookupError):
                    if proc.stdout is not None:
                        proc.terminate()
                        proc.stdout.close()
                    else:
                        os.killpg(proc.pid, 15)
                proc.wait(10)
            subprocess.run(["xsetroot", "-solid", "black"], env=desktop.env, check=False)
