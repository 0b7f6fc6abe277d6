"""Generated screens: random stacks of the kinds of content a desktop shows, for the encoder's property test and bench.

Each screen is a stack of horizontal bands of random heights; each band holds one
kind of content over a random horizontal span (the rest is a flat background):
flat UI (panels and buttons), text-like glyph rows, vertical, horizontal,
diagonal and 2-D gradients, quantised noise and photo-like fields. Everything is
drawn from one seeded numpy generator, so a seed names a screen exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ("KINDS", "bgrx", "screen")

KINDS = ("flat", "text", "vertical", "horizontal", "diagonal", "2-d", "noise", "photo")


def _gradient(rng: np.random.Generator, h: int, w: int, kind: str) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    start, end = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    if kind == "vertical":
        t = y / max(h - 1, 1)
    elif kind == "horizontal":
        t = x / max(w - 1, 1)
    elif kind == "diagonal":
        t = (x + y) / max(w + h - 2, 1)
    else:  # 2-d: each channel along its own direction, as a CSS radial/conic mix would give
        t = np.stack([x / max(w - 1, 1), y / max(h - 1, 1), (x + y) / max(w + h - 2, 1)], -1)
        return (start + (end - start) * t).astype(np.uint8)
    return (start + (end - start) * t[..., None]).astype(np.uint8)


def _text(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    paper, ink = rng.integers(200, 256, 3), rng.integers(0, 90, 3)
    out = np.empty((h, w, 3), np.uint8)
    out[:] = paper
    glyphs = rng.random((40, 9, 6)) < 0.35  # a small font: 40 glyphs of 6x9
    line = int(rng.integers(12, 20))
    for top in range(2, h - 9, line):
        codes = rng.integers(0, 40, w // 7)
        spaces = rng.random(codes.size) < 0.15
        for n, code in enumerate(codes):
            if not spaces[n]:
                out[top:top + 9, n * 7:n * 7 + 6][glyphs[code]] = ink
    return out


def _flat(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    out = np.empty((h, w, 3), np.uint8)
    out[:] = rng.integers(0, 256, 3)
    for _ in range(int(rng.integers(0, 6))):  # panels, buttons, a border
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        out[y0:y0 + int(rng.integers(1, 40)), x0:x0 + int(rng.integers(1, 200))] = rng.integers(0, 256, 3)
    return out


def _photo(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    scale = int(rng.integers(4, 32))
    coarse = rng.normal(128, 45, (h // scale + 2, w // scale + 2, 3))
    up = np.repeat(np.repeat(coarse, scale, 0), scale, 1)[:h, :w]
    # A box blur over the blocks, then grain: smooth detail like a photograph's, never two pixels alike.
    for axis in (0, 1):
        up = (up + np.roll(up, scale // 2, axis) + np.roll(up, -(scale // 2), axis)) / 3
    return (up + rng.normal(0, float(rng.uniform(1, 8)), up.shape)).clip(0, 255).astype(np.uint8)


def _noise(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    levels = int(rng.choice([2, 4, 8, 16, 64, 256]))
    return (rng.integers(0, levels, (h, w, 3)) * (256 // levels)).astype(np.uint8)


def _band(rng: np.random.Generator, h: int, w: int, kind: str) -> np.ndarray:
    if kind == "flat":
        return _flat(rng, h, w)
    if kind == "text":
        return _text(rng, h, w)
    if kind == "noise":
        return _noise(rng, h, w)
    if kind == "photo":
        return _photo(rng, h, w)
    return _gradient(rng, h, w, kind)


def screen(seed: int, width: int, height: int, kinds: tuple[str, ...] = KINDS) -> np.ndarray:
    """The screen of ``seed``: ``height`` x ``width`` x 3 RGB, bands of ``kinds`` at random heights and spans."""
    rng = np.random.default_rng(seed)
    out = np.empty((height, width, 3), np.uint8)
    out[:] = rng.integers(0, 256, 3)
    top = 0
    while top < height:
        h = min(int(rng.integers(1, max(2, height // 2))), height - top)
        left = int(rng.integers(0, width // 3 + 1)) if rng.random() < 0.5 else 0
        right = width - (int(rng.integers(0, width // 3 + 1)) if rng.random() < 0.5 else 0)
        if right > left:
            out[top:top + h, left:right] = _band(rng, h, right - left, str(rng.choice(kinds)))
        top += h
    return out


def bgrx(rgb: np.ndarray) -> bytes:
    """An RGB screen as the 4-byte BGRX pixels the drivers grab."""
    out = np.zeros((*rgb.shape[:2], 4), np.uint8)
    out[..., :3] = rgb[..., ::-1]
    return out.tobytes()
