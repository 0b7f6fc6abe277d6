"""Qwen2-VL's ``smart_resize``: the image size Qwen2.5-VL and the models built on it (UI-TARS-1.5,
OpenCUA) see, and so the pixels they answer in.

The processor of these models resizes every image so that both sides are multiples of 28 (its
14-pixel patches, merged 2x2) and the pixel count is within ``[min_pixels, max_pixels]``, aspect
kept as closely as that allows. The model's coordinates are pixels of *that* image, not of the
screenshot it was sent. cud therefore sends the screenshot already at that size (the processor
then leaves it as it is) and maps the model's pixels back with a :class:`ScreenScale` of it.

``smart_resize`` is a port of the one in Qwen's ``qwen-vl-utils`` (vision_process.py), which
UI-TARS copies into its parser (github:bytedance/UI-TARS codes/ui_tars/action_parser.py) and
OpenCUA into its agent; tests compare it with ``ui_tars.action_parser.smart_resize``.
"""

from __future__ import annotations

import math

from cud.model_api.scaling import ScreenScale

__all__ = ("FACTOR", "MAX_RATIO", "QWEN_MAX_PIXELS", "QWEN_MIN_PIXELS", "image", "smart_resize", "smart_space")

#: Both sides of the resized image are multiples of this (patch 14, merged 2x2).
FACTOR = 28
#: The processor refuses an image whose long side is more than this many times its short side.
MAX_RATIO = 200
#: Qwen2.5-VL's processor limits (its preprocessor_config.json; qwen-vl-utils' MIN_PIXELS / MAX_PIXELS), which
#: OpenCUA-7B/-32B keep (its model/README.md's smart_resize arguments).
QWEN_MIN_PIXELS = 3136
QWEN_MAX_PIXELS = 12845056


def smart_resize(height: int, width: int, *, min_pixels: int, max_pixels: int,
                 factor: int = FACTOR) -> tuple[int, int]:
    """The ``(height, width)`` the processor resizes a ``height`` x ``width`` image to (the reference's
    argument order and arithmetic, float rounding included, so the sizes agree to the pixel)."""
    if height <= 0 or width <= 0:
        raise ValueError(f"an image of {width}x{height} has no pixels")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"a {width}x{height} image is more than {MAX_RATIO} times as long as it is wide; "
                         "the model's processor refuses it")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def smart_space(width: int, height: int, *, min_pixels: int, max_pixels: int) -> ScreenScale:
    """A native ``width`` x ``height`` screen as a model with this processor sees it."""
    model_height, model_width = smart_resize(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    return ScreenScale(width, height, model_width, model_height)


def image(png: bytes, space: ScreenScale) -> bytes:
    """The screenshot ``png`` as every format so far sends it: at the smart-resized size of ``space``, which the
    processor then leaves as it is."""
    return space.image(png)
