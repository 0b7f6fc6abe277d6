"""Finding what a scenario aims at in the screenshot the client sent.

The scripted model "sees" only exact colours: a target ``{"color": "#RRGGBB"}``
resolves to the centre of the bounding box of every pixel of that colour. Test
and demo apps paint the thing to hit in a colour used nowhere else, so the
answer is exact and the same on every run.
"""

from __future__ import annotations

import io
import re

from PIL import Image, ImageChops

from cud.drivers.png import parse_data_url

__all__ = ()

_COLOUR = re.compile(r"#[0-9A-Fa-f]{6}")


def parse_colour(text: str) -> tuple[int, int, int] | None:
    """``"#3366CC"`` -> (0x33, 0x66, 0xCC); None for anything else."""
    if not isinstance(text, str) or not _COLOUR.fullmatch(text):
        return None
    return int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)


def decode_screenshot(image_url: str) -> Image.Image:
    """Decode a ``data:image/...;base64,`` URL; ValueError says what is wrong with it."""
    _, raw = parse_data_url(image_url)
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
    except Exception as exc:  # Pillow raises many kinds for corrupt input
        raise ValueError(f"screenshot is not a decodable image: {exc}") from None
    if image.width <= 0 or image.height <= 0:
        raise ValueError(f"screenshot has zero size ({image.width}x{image.height})")
    return image.convert("RGB")


def find_colour(image: Image.Image, rgb: tuple[int, int, int]) -> tuple[int, int] | None:
    """Centre of the bounding box of the pixels of exactly ``rgb``, or None."""
    # One lookup table per band keeps the work in C: a full-HD frame takes
    # milliseconds, where a Python loop over the pixels would take a second.
    masks = [
        band.point([255 if value == wanted else 0 for value in range(256)])
        for band, wanted in zip(image.split(), rgb, strict=True)
    ]
    mask = ImageChops.multiply(ImageChops.multiply(masks[0], masks[1]), masks[2])
    box = mask.getbbox()
    if box is None:
        return None
    left, top, right, bottom = box  # right and bottom are exclusive
    return (left + right - 1) // 2, (top + bottom - 1) // 2
