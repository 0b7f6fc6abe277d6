"""Property: on generated screens of every kind of content, the PNG holds exactly the pixels and is never
larger than Pillow's default PNG by more than docs/screenshots.md allows: 8 KiB at most, and on a smaller
screen only what each listed cause can cost (issue 21; relative since issue 27)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from cud.drivers.png import BAND_ROWS, PngEncoder
from PIL import Image

from bench.generated import bgrx, screen
from tests.support.seeds import run_seed

#: The promise: never more than this over Pillow's bytes, whatever the screen.
PROMISE = 8 * 1024
#: What each band's join may cost: its sync flush and a new block's code tables, about 100 bytes.
JOIN_BYTES = 128
SMALL, FULL_HD = 220, 4
#: New screens every run; CUD_TEST_PNG_SEED=<seed> replays a run's (a failure names it).
SEED = run_seed("CUD_TEST_PNG_SEED")


def allowed_over_pillow(pillow: int, width: int, height: int) -> int:
    """Bytes a frame may be over Pillow's: the causes docs/screenshots.md lists, each at its bound, within the
    promise. The joins between bands; the unchecked small text parts (at most 1/1024 of the filtered bytes);
    and noise coded with Huffman codes alone, a measurement: 1% (1,020 generated screens up to 700x500 came
    within 0.15% beyond the first two, and used at most half of this). So an encoder that pads, or loses a few
    percent, fails on a small screen too, where 8 KiB alone would let it be twice Pillow's size."""
    bands = -(-height // BAND_ROWS)
    filtered = height * (width * 3 + 1)
    return min(PROMISE, bands * JOIN_BYTES + filtered // 1024 + pillow // 100)


def _pillow_bytes(rgb: np.ndarray) -> int:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "PNG")
    return len(out.getbuffer())


def _check(seed: int, width: int, height: int, replay: str = "") -> None:
    what = f"seed {seed} ({width}x{height}{'; ' + replay if replay else ''})"
    rgb = screen(seed, width, height)
    png = PngEncoder().encode(bgrx(rgb), width, height)
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.size == (width, height) and image.tobytes() == rgb.tobytes(), f"{what}: pixels differ"
    pillow = _pillow_bytes(rgb)
    allowed = allowed_over_pillow(pillow, width, height)
    assert len(png) <= pillow + allowed, (
        f"{what}: {len(png)} bytes against Pillow's {pillow} ({len(png) / pillow:.3f}x, {len(png) - pillow} over; "
        f"{allowed} allowed)")


@pytest.mark.parametrize("chunk", range(4))
def test_generated_screens_are_exact_and_never_larger_than_pillow(chunk: int) -> None:
    sizes = np.random.default_rng(SEED.value + chunk)
    for n in range(chunk, SMALL, 4):
        width, height = int(sizes.integers(1, 700)), int(sizes.integers(1, 500))
        _check(SEED.value + n, width, height, f"{SEED}")


def test_a_grainy_photo_like_screen_is_not_taken_for_noise() -> None:
    # The bench's generated seed 77037: bands of 6 bits a byte that Huffman codes alone left 11% over Pillow's.
    _check(77_037, 1280, 800)


def test_noise_beside_a_flat_margin_is_not_taken_for_noise() -> None:
    # The bench's generated seed 77008: its top band, noise with flat margins, got Huffman codes alone and came
    # out 18 KiB over Pillow's way (level 6 matches the margins), the whole screen 12 KiB over Pillow's.
    _check(77_008, 1920, 1080)


def test_mid_grey_rows_are_costed_as_pillow_costs_them() -> None:
    # Seed 600627: rows of 0x80 bytes, which an int8 abs costs at -128 each, went unfiltered where Pillow
    # takes Paeth, and came out 1857 bytes against Pillow's 929 (within 8 KiB, twice Pillow's size).
    _check(600_627, 361, 59)


@pytest.mark.parametrize("n", range(FULL_HD))
def test_full_hd_generated_screens_are_exact_and_never_larger_than_pillow(n: int) -> None:
    _check(SEED.value + 10_000 + n, 1920, 1080, f"{SEED}")
