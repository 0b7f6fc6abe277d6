"""OSWorld's ``compare_images``: the mean structural similarity (SSIM) of two images in grey.

Ported from OSWorld's desktop_env/evaluators/metrics/vlc.py (desktop-env 1.0.2, Apache-2.0),
which calls scikit-image's ``structural_similarity`` with its defaults. That brings scikit-image
and SciPy (about 150 MB) for one 7x7 box filter, so the filter is written here with NumPy:
``_uniform_filter`` does what ``scipy.ndimage.uniform_filter(a, size=7)`` does (mode "reflect",
a running sum along each axis in turn, divided by the window), in the same order of floating-point
operations, so the scores are the same to the last bit (tests/test_osworld_metrics_images.py
checks it against scikit-image itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

__all__ = ("compare_images", "structural_similarity")

_WIN_SIZE = 7  # scikit-image's default window without gaussian weights
_K1 = 0.01
_K2 = 0.03

FloatArray = npt.NDArray[np.float64]


def _uniform_filter_1d(a: FloatArray, axis: int) -> FloatArray:
    """SciPy's ``uniform_filter1d(a, 7, axis, mode="reflect")``, bit for bit.

    SciPy sums the first window, then adds the entering and subtracts the leaving value in turn,
    and divides each running sum by the size; ``np.cumsum`` adds in the same sequence.
    """
    line = np.moveaxis(a, axis, -1)
    before = _WIN_SIZE // 2
    after = _WIN_SIZE - before - 1
    length = line.shape[-1]
    # "reflect" repeats the edge value: d c b a | a b c d | d c b a
    ext = np.concatenate([line[..., :before][..., ::-1], line, line[..., length - after:][..., ::-1]], axis=-1)
    first = np.zeros(line.shape[:-1])
    for k in range(_WIN_SIZE):
        first = first + ext[..., k]
    steps = ext[..., _WIN_SIZE:_WIN_SIZE + length - 1] - ext[..., :length - 1]
    sums = np.cumsum(np.concatenate([first[..., None], steps], axis=-1), axis=-1)
    return np.moveaxis(sums / _WIN_SIZE, -1, axis)


def _uniform_filter(a: FloatArray) -> FloatArray:
    out = a
    for axis in range(a.ndim):
        out = _uniform_filter_1d(out, axis)
    return out


def structural_similarity(im1: npt.NDArray[np.uint8], im2: npt.NDArray[np.uint8]) -> float:
    """scikit-image's ``structural_similarity(im1, im2)`` for two 8-bit grey images of one shape."""
    if im1.shape != im2.shape:
        raise ValueError(f"Input images must have the same dimensions: {im1.shape} and {im2.shape}")
    if np.any((np.asarray(im1.shape) - _WIN_SIZE) < 0):
        raise ValueError(f"win_size exceeds image extent: the images are {im1.shape}, the window {_WIN_SIZE}")
    if im1.dtype != np.uint8 or im2.dtype != np.uint8:
        raise ValueError(f"8-bit images only, not {im1.dtype} and {im2.dtype}")
    data_range = 255  # scikit-image's dtype_range for uint8
    x = im1.astype(np.float64)
    y = im2.astype(np.float64)
    points = _WIN_SIZE ** x.ndim
    cov_norm = points / (points - 1)  # scikit-image's default: the sample covariance
    ux = _uniform_filter(x)
    uy = _uniform_filter(y)
    uxx = _uniform_filter(x * x)
    uyy = _uniform_filter(y * y)
    uxy = _uniform_filter(x * y)
    vx = cov_norm * (uxx - ux * ux)
    vy = cov_norm * (uyy - uy * uy)
    vxy = cov_norm * (uxy - ux * uy)
    c1 = (_K1 * data_range) ** 2
    c2 = (_K2 * data_range) ** 2
    a1, a2, b1, b2 = (2 * ux * uy + c1, 2 * vxy + c2, ux**2 + uy**2 + c1, vx + vy + c2)
    s = (a1 * a2) / (b1 * b2)
    pad = (_WIN_SIZE - 1) // 2
    cropped = s[tuple(slice(pad, n - pad) for n in s.shape)]
    return float(cropped.mean(dtype=np.float64))


def compare_images(image1_path: str | None, image2_path: str | None, **options: Any) -> float:
    """The SSIM of the two images in grey, both resized to the smaller; with
    ``reference_base_result`` b, rescaled to (ssim - b) / (1 - b), and 0 unless ssim >= b + 0.01.
    """
    if not image1_path or not image2_path:
        return 0
    base_score = options.get("reference_base_result", None)
    with Image.open(image1_path) as opened1, Image.open(image2_path) as opened2:
        image1 = opened1.convert("L")
        image2 = opened2.convert("L")
    # OSWorld's min() of two (width, height) tuples: the lexicographically smaller, not per axis
    new_size = min(image1.size, image2.size)
    image1 = image1.resize(new_size, Image.Resampling.LANCZOS)
    image2 = image2.resize(new_size, Image.Resampling.LANCZOS)
    similarity_index = structural_similarity(np.array(image1), np.array(image2))
    epsilon = 0.01
    if base_score is not None:
        if similarity_index >= base_score + epsilon:
            return (similarity_index - base_score) / (1 - base_score)
        return 0
    return similarity_index
