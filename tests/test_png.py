"""The PNG encoder every driver shares: exact pixels at any size, clear errors."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from cud.drivers.png import PngEncoder, parse_data_url, to_data_url


@pytest.mark.parametrize("size", [(1, 1), (2, 1), (1, 2), (3, 5), (640, 480), (1921, 1081)])
@pytest.mark.parametrize("rawmode", ["BGRX", "RGBX"])
def test_png_holds_exactly_the_frame(size: tuple[int, int], rawmode: str) -> None:
    width, height = size
    rng = np.random.default_rng(width * height)
    # Half noise, half flat rows: both filters get chosen somewhere.
    frame = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    frame[height // 2:] = 200
    raw = frame.tobytes()
    encoder = PngEncoder()
    png = encoder.encode(raw, width, height, rawmode)
    assert encoder.encode(raw, width, height, rawmode) == png  # buffers reused, same output
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.size == size and image.mode == "RGB"
    assert image.tobytes() == Image.frombytes("RGB", size, raw, "raw", rawmode).tobytes()


def test_data_url_is_base64_png() -> None:
    png = PngEncoder().encode(bytes(16), 2, 2)
    url = to_data_url(png)
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png


def test_bad_frames_are_named() -> None:
    with pytest.raises(ValueError, match="'YUV'"):
        PngEncoder().encode(bytes(16), 2, 2, "YUV")
    with pytest.raises(ValueError, match="15 bytes is not 2x2"):
        PngEncoder().encode(bytes(15), 2, 2)


def test_data_urls_parse_back_and_bad_ones_are_named() -> None:
    png = PngEncoder().encode(bytes(16), 2, 2)
    assert parse_data_url(to_data_url(png)) == ("image/png", png)
    with pytest.raises(ValueError, match="'http://example.invalid/x.png'"):
        parse_data_url("http://example.invalid/x.png")
    with pytest.raises(ValueError, match="not valid base64"):
        parse_data_url("data:image/png;base64,@@@")
