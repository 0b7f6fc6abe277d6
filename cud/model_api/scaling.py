"""The screenshots Anthropic's Messages API takes, and its model's coordinates back on the screen.

Anthropic's vision docs: an image whose long edge is over 1568 px, or that is over about 1.15
megapixels, is scaled down by the API before the model sees it, and its computer-use docs tell the
client to scale it down itself and map the model's coordinates back (the model answers in the
pixels it saw, of the ``display_width_px`` x ``display_height_px`` screen the tool declares). So
the daemon sends the screen fitted within both limits, aspect kept, and declares that size.

A model pixel ``x`` stands for native pixels ``[x*W/w, (x+1)*W/w)``; it maps to the native pixel
under its centre, ``floor((x + 1/2) * W / w)``, in integers. Every model pixel lands on the screen,
and a native pixel's round trip moves it by less than ``W / w`` (the scale factor), never more.

Both the daemon (the anthropic adapter) and the scripted Messages server use this one fit.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import math

from PIL import Image

from cud.errors import OutOfBounds

__all__ = ("MAX_LONG_EDGE", "MAX_PIXELS", "ScreenScale", "crop_fit", "png_base64")

#: Anthropic's vision limits for an image the API does not resize.
MAX_LONG_EDGE = 1568
MAX_PIXELS = 1_150_000


@dataclasses.dataclass(frozen=True)
class ScreenScale:
    """A native ``width`` x ``height`` screen, as the model sees it: ``model_width`` x ``model_height``."""

    width: int
    height: int
    model_width: int
    model_height: int

    @classmethod
    def fit(cls, width: int, height: int) -> ScreenScale:
        """The largest size within the API's limits with the screen's aspect (the screen itself if it fits)."""
        if width <= 0 or height <= 0:
            raise ValueError(f"a screen of {width}x{height} has no pixels")
        factor = min(1.0, MAX_LONG_EDGE / max(width, height), math.sqrt(MAX_PIXELS / (width * height)))
        model_width, model_height = max(1, math.floor(width * factor)), max(1, math.floor(height * factor))
        return cls(width, height, model_width, model_height)

    @property
    def scaled(self) -> bool:
        return (self.model_width, self.model_height) != (self.width, self.height)

    def to_screen(self, x: object, y: object, what: str) -> tuple[int, int]:
        """The native pixel the model's ``(x, y)`` means; OutOfBounds naming ``what`` and the
        coordinate if it is not a pixel of the model's screen (checked before anything moves)."""
        if not (isinstance(x, int) and isinstance(y, int)) or isinstance(x, bool) or isinstance(y, bool):
            raise OutOfBounds(f"{what} ({x!r}, {y!r}) is not a pair of whole pixels", x=repr(x), y=repr(y))
        if not (0 <= x < self.model_width and 0 <= y < self.model_height):
            raise OutOfBounds(
                f"{what} ({x}, {y}) is outside the model's {self.model_width}x{self.model_height} screen "
                f"(x 0..{self.model_width - 1}, y 0..{self.model_height - 1}); nothing was run",
                x=x, y=y, width=self.model_width, height=self.model_height)
        return (2 * x + 1) * self.width // (2 * self.model_width), (2 * y + 1) * self.height // (2 * self.model_height)

    def to_model(self, x: int, y: int) -> tuple[int, int]:
        """The model's pixel over native ``(x, y)`` (a pointer position told to the model)."""
        return (2 * x + 1) * self.model_width // (2 * self.width), (2 * y + 1) * self.model_height // (2 * self.height)

    def image(self, png: bytes) -> bytes:
        """The screenshot ``png`` at the model's size (the PNG itself when no scaling is needed)."""
        if not self.scaled:
            return png
        with Image.open(io.BytesIO(png)) as image:
            small = image.convert("RGB").resize((self.model_width, self.model_height), Image.Resampling.LANCZOS)
        return _png(small)


def png_base64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


def crop_fit(png: bytes, box: tuple[int, int, int, int]) -> bytes:
    """The native region ``box`` (left, top, right, bottom; exclusive) of ``png``, fitted within the limits."""
    with Image.open(io.BytesIO(png)) as image:
        region = image.convert("RGB").crop(box)
    fit = ScreenScale.fit(region.width, region.height)
    if fit.scaled:
        region = region.resize((fit.model_width, fit.model_height), Image.Resampling.LANCZOS)
    return _png(region)


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=6)
    return out.getvalue()
