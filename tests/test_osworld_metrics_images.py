"""cud's compare_images gives OSWorld's own scores, to the bit, on generated images.

OSWorld's compare_images calls scikit-image's SSIM; cud's port computes it with NumPy alone
(cud/osworld/metrics/images.py). Hypothesis draws an image and a changed copy (one pixel, a
region, a colour shift, another size, the same picture) and both functions must give equal floats.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cud.osworld.metrics.images import compare_images, structural_similarity
from tests.support.osworld_reference import reference


@st.composite
def images(draw: st.DrawFn) -> Image.Image:
    width, height = draw(st.integers(7, 48)), draw(st.integers(7, 48))
    mode = draw(st.sampled_from(["L", "RGB", "RGBA"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    if draw(st.booleans()):  # smooth: a gradient with little noise, as screenshots are
        ramp = np.linspace(0, 200, width)[None, :, None] + np.linspace(0, 50, height)[:, None, None]
        pixels = np.clip(ramp + rng.integers(0, 6, (height, width, channels)), 0, 255)
    else:
        pixels = rng.integers(0, 256, (height, width, channels))
    pixels = pixels.astype(np.uint8)
    return Image.fromarray(pixels[:, :, 0] if mode == "L" else pixels, mode)


@st.composite
def changed(draw: st.DrawFn, image: Image.Image) -> Image.Image:
    new = image.copy()
    kind = draw(st.sampled_from(["same", "pixel", "region", "shift", "size"]))
    width, height = new.size
    if kind == "pixel":
        x, y = draw(st.integers(0, width - 1)), draw(st.integers(0, height - 1))
        new.putpixel((x, y), 255 - (new.convert("L").getpixel((x, y)) or 0) if new.mode == "L" else (1, 2, 3))
    elif kind == "region":
        new.paste(0 if new.mode == "L" else (0, 0, 0), (0, 0, width // 2, height // 3))
    elif kind == "shift":
        new = Image.eval(new, lambda v: min(255, v + 3))
    elif kind == "size":
        new = new.resize((draw(st.integers(7, 60)), draw(st.integers(7, 60))))
    return new


base_results = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 0.9, 0.99]), st.floats(0, 0.98))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), image=images())
def test_compare_images_scores_as_osworld(data: st.DataObject, image: Image.Image) -> None:
    other = data.draw(changed(image))
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp, "a.png"), Path(tmp, "b.png")
        image.save(first)
        other.save(second)
        for base in [None, *data.draw(st.lists(base_results, min_size=1, max_size=3))]:
            opts = {} if base is None else {"reference_base_result": base}
            ours = compare_images(str(first), str(second), **opts)
            theirs = reference("compare_images")(str(first), str(second), **opts)
            assert ours == theirs, (opts, image.size, other.size)


def test_identical_images_score_1_and_absent_ones_0(tmp_path: Path) -> None:
    image = Image.fromarray(np.arange(100, dtype=np.uint8).reshape(10, 10))
    image.save(tmp_path / "a.png")
    assert compare_images(str(tmp_path / "a.png"), str(tmp_path / "a.png")) == 1.0
    assert compare_images(None, str(tmp_path / "a.png")) == 0 == reference("compare_images")(None, str(tmp_path / "a.png"))


def test_images_smaller_than_the_window_are_refused_as_by_osworld(tmp_path: Path) -> None:
    Image.new("L", (6, 20)).save(tmp_path / "small.png")
    Image.new("L", (30, 20)).save(tmp_path / "big.png")
    paths = (str(tmp_path / "small.png"), str(tmp_path / "big.png"))
    with pytest.raises(ValueError, match="win_size exceeds image extent"):
        reference("compare_images")(*paths)
    with pytest.raises(ValueError, match="win_size exceeds image extent"):
        compare_images(*paths)


def test_structural_similarity_refuses_unlike_images() -> None:
    with pytest.raises(ValueError, match="same dimensions"):
        structural_similarity(np.zeros((8, 8), np.uint8), np.zeros((9, 8), np.uint8))
