"""The PNG of every screen of the benchmark corpus decodes to exactly the grabbed pixels, at two sizes."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from bench.corpus import SCREENS, grab, showing
from cud.drivers.png import PngEncoder, PngSettings, parse_data_url
from cud.drivers.png_filters import SUB, UP
from cud.drivers.x11 import X11Driver
from tests.support.desktop import Desktop, start_desktop

#: The benchmark's smaller size, and an odd one: bands and rows that do not divide evenly.
SIZES = [(1280, 800), (1001, 667)]
VARIANTS = [PngSettings(), PngSettings(engine="isal", level=2), PngSettings(filters=(SUB, UP), classify=False)]


@pytest.fixture(scope="module", params=SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def desktop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desktop]:
    workdir: Path = tmp_path_factory.mktemp("corpus")
    with start_desktop("x11", workdir, *request.param) as desktop:
        yield desktop


@pytest.mark.parametrize("screen", SCREENS)
def test_corpus_screens_decode_to_the_grabbed_pixels(desktop: Desktop, screen: str) -> None:
    with showing(desktop, screen):
        raw, size = grab(desktop.display)
        driver = desktop.driver
        assert isinstance(driver, X11Driver)
        _, through_driver = parse_data_url(driver.screenshot()["image_url"])
        after, _ = grab(desktop.display)
    assert size == (desktop.width, desktop.height)
    expected = Image.frombytes("RGB", size, raw, "raw", "BGRX").tobytes()
    assert after == raw, "the screen changed while it was grabbed; the comparison below would be meaningless"
    for settings in VARIANTS:
        png = PngEncoder(settings).encode(raw, *size)
        image = Image.open(io.BytesIO(png))
        image.load()
        assert image.size == size and image.tobytes() == expected, settings
    image = Image.open(io.BytesIO(through_driver))
    image.load()
    assert image.tobytes() == expected
    pillow = io.BytesIO()
    Image.frombytes("RGB", size, raw, "raw", "BGRX").save(pillow, "PNG")
    ours = len(PngEncoder().encode(raw, *size))
    assert ours <= len(pillow.getbuffer()) + 8 * 1024, f"{screen}: {ours} bytes against Pillow's {len(pillow.getbuffer())}"
