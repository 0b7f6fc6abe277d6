"""The encoder's filter choice is the one libpng and Pillow make, written plainly here row by row.

Hypothesis draws bands whose rows are what screens are made of: a copy of the row above (flat
backgrounds, a widget's inside), rows of zero bytes, of mid-grey 0x80 (whose signed cost is the
edge case), runs and noise; ``adaptive`` must give every row the filter-type byte and residuals the
plain reference gives, for each set of filters the encoder asks for, sampled and on whole rows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.drivers.png import NOISE_REPEATS
from cud.drivers.png_filters import (
    AVERAGE,
    NONE,
    PAETH,
    PILLOW_FILTERS,
    SAMPLE_STRIDE,
    SUB,
    UP,
    adaptive,
    repeated_share,
)

#: The filter sets the encoder uses: Pillow's (the check), the cheap default, it with Paeth (noise), and all.
KINDS = [PILLOW_FILTERS, (SUB, UP, AVERAGE), (SUB, UP, PAETH), (UP,), (NONE, UP, SUB, AVERAGE, PAETH)]
#: The order ties are settled in: the first of these wins.
ORDER = (NONE, UP, SUB, AVERAGE, PAETH)


def _residuals(kind: int, cur: np.ndarray, prev: np.ndarray) -> np.ndarray:
    c, p = cur.astype(np.int64), prev.astype(np.int64)
    left = np.concatenate((np.zeros(3, np.int64), c[:-3]))
    upper_left = np.concatenate((np.zeros(3, np.int64), p[:-3]))
    if kind == NONE:
        predictor = np.zeros_like(c)
    elif kind == SUB:
        predictor = left
    elif kind == UP:
        predictor = p
    elif kind == AVERAGE:
        predictor = (left + p) // 2
    else:  # Paeth, as the PNG specification writes it
        estimate = left + p - upper_left
        pa, pb, pc = abs(estimate - left), abs(estimate - p), abs(estimate - upper_left)
        predictor = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, p, upper_left))
    return ((c - predictor) % 256).astype(np.uint8)


def reference(rgb: np.ndarray, kinds: tuple[int, ...], whole_rows: bool) -> np.ndarray:
    out = np.empty((rgb.shape[0] - 1, rgb.shape[1] + 1), np.uint8)
    for row in range(1, rgb.shape[0]):
        best: tuple[int, int, np.ndarray] | None = None
        for kind in (k for k in ORDER if k in kinds):
            residuals = _residuals(kind, rgb[row], rgb[row - 1])
            judged = (residuals if whole_rows else residuals[::SAMPLE_STRIDE]).astype(np.int64)
            cost = int(np.minimum(judged, 256 - judged).sum())  # |r| of r read as a signed byte; 0x80 costs 128
            if best is None or cost < best[0]:
                best = (cost, kind, residuals)
        assert best is not None
        out[row - 1, 0], out[row - 1, 1:] = best[1], best[2]
    return out


@st.composite
def bands(draw: st.DrawFn) -> np.ndarray:
    width = draw(st.integers(1, 40)) * 3
    height = draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rgb = np.zeros((height + 1, width), np.uint8)
    for row in range(height + 1):
        kind = draw(st.sampled_from(["above", "above", "zero", "grey", "run", "noise", "few"]))
        if kind == "above" and row:
            rgb[row] = rgb[row - 1]
        elif kind == "grey":
            rgb[row] = 0x80
        elif kind == "run":
            rgb[row] = draw(st.integers(0, 255))
        elif kind == "noise":
            rgb[row] = rng.integers(0, 256, width)
        elif kind == "few" and row:  # the row above with a few bytes changed: a glyph's edge
            rgb[row] = rgb[row - 1]
            rgb[row, rng.integers(0, width, 3)] = rng.integers(0, 256, 3)
    return rgb


@settings(max_examples=300, deadline=None)
@given(rgb=bands(), kinds=st.sampled_from(KINDS), whole_rows=st.booleans())
def test_every_rows_filter_is_the_plain_choice(rgb: np.ndarray, kinds: tuple[int, ...], whole_rows: bool) -> None:
    height, width = rgb.shape[0] - 1, rgb.shape[1]
    rows = np.full((height, width + 1), 0xAA, np.uint8)
    np.subtract(rgb[1:], rgb[:-1], out=rows[:, 1:])  # adaptive's precondition: Up's residuals in place
    scratch = (np.full((height, width), 0x55, np.uint8), np.full((height, width), 0x55, np.uint8))
    adaptive(rgb, rows, scratch, kinds, whole_rows=whole_rows)
    expected = reference(rgb, kinds, whole_rows)
    assert np.array_equal(rows, expected), (kinds, whole_rows, rows[:, 0], expected[:, 0])


@settings(max_examples=300, deadline=None)
@given(rgb=bands())
def test_repeated_bytes_are_counted_as_deflate_would_match_them(rgb: np.ndarray) -> None:
    # Written plainly: a byte counts when it and the two after it equal the three before them (a match one
    # pixel back), in the band's bytes read end to end as deflate reads them.
    data = rgb.reshape(-1).tolist()
    plain = sum(1 for i in range(3, len(data) - 2) if data[i:i + 3] == data[i - 3:i])
    assert repeated_share(rgb) == plain / len(data), (plain, len(data))


def test_noise_has_next_to_no_repeats_and_a_flat_margin_or_gradient_rows_have_many() -> None:
    rng = np.random.default_rng(3_992_669_976)
    noise = rng.integers(0, 256, (64, 1920 * 3 + 1), dtype=np.uint8)
    margin, gradient = noise.copy(), noise.copy()
    margin[:, -14 * 3:] = 0  # 14 flat columns beside 1906 of noise (the residuals of the CI seed's bands)
    gradient[10:13, 1:] = 1  # three rows of a gradient's equal residuals
    assert repeated_share(noise) < NOISE_REPEATS / 100
    assert repeated_share(margin) > NOISE_REPEATS * 10
    assert repeated_share(gradient) > NOISE_REPEATS * 10
