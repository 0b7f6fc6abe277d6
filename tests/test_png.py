"""The PNG encoder every driver shares: exact pixels at any size, clear errors."""

from __future__ import annotations

import base64
import binascii
import io
import os
import re
import time
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cud.drivers.png import BAND_ROWS, PngEncoder, PngSettings, parse_data_url, split_data_url, to_data_url
from cud.drivers.png_filters import AVERAGE, PAETH, SUB, UP


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
    with pytest.raises(ValueError, match=re.escape("'http://example.invalid/x.png'")):
        parse_data_url("http://example.invalid/x.png")
    with pytest.raises(ValueError, match="not valid base64"):
        parse_data_url("data:image/png;base64,@@@")


@settings(deadline=None, max_examples=300)
@given(st.text(alphabet="AB+/z09=@ \n", max_size=12))
def test_split_data_url_takes_exactly_what_the_strict_decoder_takes(text: str) -> None:
    """The check without decoding (an adapter passes the driver's base64 on as is) agrees with
    ``b64decode(validate=True)``, which :func:`parse_data_url` used before."""
    try:
        base64.b64decode(text, validate=True)
        valid = True
    except (binascii.Error, ValueError):
        valid = False
    if valid:
        assert split_data_url("data:image/png;base64," + text) == ("image/png", text)
    else:
        with pytest.raises(ValueError, match="not valid base64"):
            split_data_url("data:image/png;base64," + text)


# -- the encoder's settings, its band classes and its reuse of unchanged bands --------------------------------

SETTINGS = [
    PngSettings(),
    PngSettings(engine="isal", level=1, filters=(SUB, UP), classify=False),
    PngSettings(engine="isal", level=3),
    PngSettings(level=9, filters=(SUB, UP, AVERAGE, PAETH), threads=1),
    PngSettings(reuse=False),
]


def _decoded(png: bytes) -> bytes:
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.mode == "RGB"
    return image.tobytes()


def _rgb(raw: bytes, width: int, height: int) -> bytes:
    return Image.frombytes("RGB", (width, height), raw, "raw", "BGRX").tobytes()


def _filter_types(png: bytes, width: int, height: int) -> np.ndarray:
    """The filter-type byte of every row, read back from the IDAT stream."""
    stream = png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8]
    return np.frombuffer(zlib.decompress(stream), np.uint8).reshape(height, width * 3 + 1)[:, 0]


def _classes_frame(width: int, height: int) -> np.ndarray:
    """Three bands of each kind: text-like (flat with sparse glyphs), noise, and half noise half flat."""
    rng = np.random.default_rng(5)
    frame = np.full((height, width, 4), 230, np.uint8)
    frame[::7, ::5, :3] = 20  # sparse dark "glyph" pixels
    frame[BAND_ROWS:2 * BAND_ROWS] = rng.integers(0, 256, (BAND_ROWS, width, 4), dtype=np.uint8)
    frame[2 * BAND_ROWS:, : width // 2] = rng.integers(0, 256, (height - 2 * BAND_ROWS, width // 2, 4), dtype=np.uint8)
    return frame


@pytest.mark.parametrize("settings", SETTINGS, ids=repr)
@pytest.mark.parametrize("size", [(1, 1), (5, 3), (333, 130), (1281, 799)])
def test_every_setting_holds_exactly_the_frame(settings: PngSettings, size: tuple[int, int]) -> None:
    width, height = size
    frame = _classes_frame(width, max(height, 3 * BAND_ROWS))[:height]
    raw = frame.tobytes()
    assert _decoded(PngEncoder(settings).encode(raw, width, height)) == _rgb(raw, width, height)


def test_bands_are_classed_by_their_content() -> None:
    width, height = 640, 3 * BAND_ROWS
    # Without the check, which may replace a band's part with a smaller one filtered otherwise.
    png = PngEncoder(PngSettings(pillow_floor=False)).encode(_classes_frame(width, height).tobytes(), width, height)
    types = _filter_types(png, width, height)
    assert set(types[:BAND_ROWS]) == {0}  # text-like: unfiltered, so repeated glyphs match
    assert PAETH in set(types[BAND_ROWS:2 * BAND_ROWS])  # noise: Paeth is offered there and wins rows
    assert 0 not in set(types[2 * BAND_ROWS:]) and PAETH not in set(types[2 * BAND_ROWS:])  # mixed: adaptive
    plain = PngEncoder(PngSettings(classify=False, pillow_floor=False)).encode(
        _classes_frame(width, height).tobytes(), width, height)
    assert 0 not in set(_filter_types(plain, width, height))


def test_unchanged_bands_are_reused_and_changed_ones_redone() -> None:
    width, height = 300, 5 * BAND_ROWS + 10
    rng = np.random.default_rng(9)
    first = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    second = first.copy()
    second[2 * BAND_ROWS + 3, 17] ^= 0x55  # one pixel, inside band 2
    third = second.copy()
    third[2 * BAND_ROWS - 1, 0] ^= 1  # the last row of band 1 is the row above band 2
    encoder = PngEncoder()
    seen = []
    for frame in (first, first, second, third, first):
        raw = frame.tobytes()
        png = encoder.encode(raw, width, height)
        assert _decoded(png) == _rgb(raw, width, height)
        seen.append(encoder.changed_bands)
    assert seen == [6, 0, 1, 2, 2]
    assert encoder.encode(first.tobytes(), width, height) is encoder.encode(first.tobytes(), width, height)
    assert encoder.data_url(first.tobytes(), width, height) is encoder.data_url(first.tobytes(), width, height)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_frozen_frame_is_kept_without_a_copy_and_a_reused_buffer_is_copied(frozen: bool) -> None:
    width, height = 200, 3 * BAND_ROWS
    rng = np.random.default_rng(4)
    first = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    second = first.copy()
    second[BAND_ROWS + 5, 9] ^= 0x10  # band 1 only
    encoder = PngEncoder()
    if frozen:  # fresh buffers, never changed after the call (as the drivers' grabs)
        frames = [bytearray(first.tobytes()), bytearray(second.tobytes())]
    else:  # one buffer the caller overwrites in place between frames
        buffer = bytearray(first.tobytes())
        frames = [buffer, buffer]
    encoder.encode(frames[0], width, height, frozen=frozen)
    assert (encoder._previous.base is not None) is frozen  # a view of the caller's buffer, or a copy
    frames[1][:] = second.tobytes()
    png = encoder.encode(frames[1], width, height, frozen=frozen)
    assert encoder.changed_bands == 1 and _decoded(png) == _rgb(second.tobytes(), width, height)


def test_a_new_size_starts_afresh() -> None:
    encoder = PngEncoder()
    for width, height in ((64, 64), (65, 64), (64, 64)):
        raw = bytes(range(256)) * (width * height * 4 // 256) + bytes(width * height * 4 % 256)
        assert _decoded(encoder.encode(raw, width, height)) == _rgb(raw, width, height)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"engine": "gzip"}, "'gzip'"), ({"level": 0}, "level 0"), ({"engine": "isal", "level": 4}, "level 4"),
    ({"filters": (SUB,)}, r"\(1,\)"), ({"filters": (UP, 7)}, r"\(2, 7\)"), ({"threads": -1}, "-1"),
])
def test_bad_settings_are_named(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        PngSettings(**kwargs)  # type: ignore[arg-type]


def test_a_forked_child_encodes_too() -> None:
    # The pools' threads do not survive a fork; the child must not wait on them forever.
    raw = bytes(range(256)) * 64
    PngEncoder().encode(raw, 64, 64)
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if _decoded(PngEncoder().encode(raw, 64, 64)) == _rgb(raw, 64, 64) else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child never finished encoding")
