"""PNG row filters in numpy, and the choice among them (how ``cud.drivers.png`` shrinks a band).

Every function works on a band: ``rgb`` holds the band's RGB rows preceded by
the row above it (zeros above the image), and ``rows`` receives, per row, the
filter-type byte and the filtered bytes. All arithmetic is uint8 and branch-free:
numpy's int16 would double the memory traffic, and ``np.where`` on noise costs
four times the arithmetic in mispredicted branches.
"""

from __future__ import annotations

import numpy as np

__all__ = ("AVERAGE", "NONE", "PAETH", "PILLOW_FILTERS", "SUB", "UP", "adaptive", "repeated_share",
           "residual_stats", "unfiltered", "up_share")

NONE, SUB, UP, AVERAGE, PAETH = 0, 1, 2, 3, 4
#: Judge residuals on every 8th byte: a quarter of the cost, the same choice on all but a few rows.
SAMPLE_STRIDE = 8
#: The filters Pillow's PNG encoder tries per row, in its order (Average only when optimising).
PILLOW_FILTERS = (NONE, UP, SUB, PAETH)
#: Rows of a band whose byte histogram estimates its entropy: every 4th.
_ENTROPY_ROW_STRIDE = 4


def up_share(rgb: np.ndarray, rows: np.ndarray) -> float:
    """Write ``Up`` residuals into ``rows`` and return the share of non-zero bytes in a sample of them."""
    up = rows[:, 1:]
    np.subtract(rgb[1:], rgb[:-1], out=up)
    sample = up[:, ::SAMPLE_STRIDE]
    return np.count_nonzero(sample) / max(sample.size, 1)


def residual_stats(rows: np.ndarray) -> tuple[float, float]:
    """(bits per byte of the order-0 entropy, share of zeros) of a sample of ``rows``' filtered bytes
    (filter-type bytes left out).

    The bits are what Huffman codes alone would cost per byte: about that on noise, but
    far more than string matching costs where the residuals repeat (a gradient's are all
    equal, and Huffman codes cannot go under one bit a byte). The zeros tell a band that
    is noise only in part: noise has 1/256 of them, a flat margin beside it all zeros,
    which matching codes nearly for free and Huffman codes at a bit a byte or more.
    """
    sample = rows[::_ENTROPY_ROW_STRIDE, 1:]
    counts = np.bincount(sample.reshape(-1), minlength=256)
    total = counts.sum()
    zeros = counts[0] / total
    counts = counts[counts > 0]
    p = counts / total
    return float(-(p * np.log2(p)).sum()), float(zeros)


def repeated_share(rows: np.ndarray) -> float:
    """The share of ``rows``' bytes (all of them, not a sample) that start three bytes repeating the three before.

    Each is where deflate finds a match at distance 3, one pixel back: a run of one colour (a flat
    margin beside noise), a gradient's row of equal residuals. Noise has one in 2**24; Huffman codes
    alone pay every such byte in full, which string matching codes nearly for free. Every row is
    looked at, so that a few rows of a gradient in a band of noise are not missed.
    """
    flat = rows.reshape(-1)
    if flat.size < 6:
        return 0.0
    same = flat[3:] == flat[:-3]
    return np.count_nonzero(same[:-2] & same[1:-1] & same[2:]) / flat.size


def unfiltered(rgb: np.ndarray, rows: np.ndarray) -> None:
    """Every row with filter None: on text and flat UI, deflate then matches repeated glyphs exactly."""
    rows[:, 0] = NONE
    rows[:, 1:] = rgb[1:]


def adaptive(rgb: np.ndarray, rows: np.ndarray, scratch: tuple[np.ndarray, np.ndarray], kinds: tuple[int, ...],
             whole_rows: bool = False) -> None:
    """Per row, the cheapest of the filter ``kinds`` (``Up`` must be among them and already in ``rows``).

    Cheapest as libpng and Pillow judge it: the smallest sum of residuals read as
    signed bytes, on a sample of each row (``whole_rows``: on all of it, as Pillow does).
    """
    cur, prev, up = rgb[1:], rgb[:-1], rows[:, 1:]
    # A row equal to the one above costs nothing under Up, the least there is, and ties go to the earlier filter:
    # only None, before Up, can take it (when its sample is all zero bytes). The other filters are worked out for
    # the remaining rows alone: on screens most rows of a changed band are flat background or a widget's inside.
    moving = up.any(axis=1)
    if moving.all():
        rows[:, 0] = _cheapest(cur, prev, up, scratch, kinds, whole_rows)
        return
    rows[:, 0] = UP
    if NONE in kinds:
        zero = ~moving & ~(cur if whole_rows else cur[:, ::SAMPLE_STRIDE]).any(axis=1)
        up[zero] = cur[zero]
        rows[zero, 0] = NONE
    index = np.flatnonzero(moving)
    if index.size:
        picked = up[index]
        rows[index, 0] = _cheapest(cur[index], prev[index], picked, scratch, kinds, whole_rows)
        up[index] = picked


def _cheapest(cur: np.ndarray, prev: np.ndarray, up: np.ndarray, scratch: tuple[np.ndarray, np.ndarray],
              kinds: tuple[int, ...], whole_rows: bool) -> np.ndarray:
    """:func:`adaptive` on rows ``cur`` under ``prev`` whose Up residuals ``up`` holds: the filter-type byte of
    each row, and ``up`` overwritten with the chosen filter's residuals."""
    sub, average = scratch[0][:len(cur)], scratch[1][:len(cur)]
    # Ties go to the first: None, then Up, as Pillow tries them (an unchanged row stays Up).
    computed = [(NONE, cur)] if NONE in kinds else []
    computed.append((UP, up))
    if SUB in kinds:
        sub[:, :3] = cur[:, :3]
        np.subtract(cur[:, 3:], cur[:, :-3], out=sub[:, 3:])
        computed.append((SUB, sub))
    if AVERAGE in kinds:
        # floor((left + above) / 2) without overflow: (l & a) + ((l ^ a) >> 1).
        average[:, :3] = prev[:, :3] >> 1
        np.bitwise_xor(cur[:, :-3], prev[:, 3:], out=average[:, 3:])
        np.right_shift(average[:, 3:], 1, out=average[:, 3:])
        average[:, 3:] += cur[:, :-3] & prev[:, 3:]
        np.subtract(cur, average, out=average)
        computed.append((AVERAGE, average))
    samples = [f if whole_rows else f[:, ::SAMPLE_STRIDE] for _, f in computed]
    candidates: list[tuple[int, np.ndarray | None]] = list(computed)  # None: Paeth, computed for the rows it wins
    if PAETH in kinds and whole_rows:
        full = paeth(cur, prev)
        candidates.append((PAETH, full))
        samples.append(full)
    elif PAETH in kinds:
        # Paeth costs ten times the others: judged on the sample alone, computed whole only for rows it wins.
        candidates.append((PAETH, None))
        samples.append(_paeth_sample(cur, prev))
    # |r| of each residual read as a signed byte, as Pillow costs it: int8 abs leaves -128 as -128 (0x80), which
    # read back unsigned is its 128. Summed as -128, a row of mid-grey (0x80) bytes would cost less than nothing
    # and go unfiltered where Pillow picks a filter (seed 600627: twice Pillow's bytes).
    costs = np.stack([np.abs(sample.view(np.int8)).view(np.uint8).sum(axis=1, dtype=np.int32) for sample in samples])
    choice = costs.argmin(axis=0)
    for index, (kind, residuals) in enumerate(candidates):
        if kind == UP:
            continue
        picked = choice == index
        if picked.any():
            up[picked] = paeth(cur[picked], prev[picked]) if residuals is None else residuals[picked]
    chosen: np.ndarray = np.array([kind for kind, _ in candidates], np.uint8)[choice]
    return chosen


def _paeth_sample(cur: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Paeth residuals of every SAMPLE_STRIDE-th byte of each row (those ``cur[:, ::SAMPLE_STRIDE]`` holds)."""
    here, above = cur[:, ::SAMPLE_STRIDE], prev[:, ::SAMPLE_STRIDE]
    n = here.shape[1]
    zero = np.zeros((cur.shape[0], 1), np.uint8)
    # Byte i's left neighbour is byte i - 3: for i = 8k that is 5 + 8(k - 1); the first has none.
    left = np.hstack((zero, cur[:, SAMPLE_STRIDE - 3::SAMPLE_STRIDE][:, :n - 1]))
    upper_left = np.hstack((zero, prev[:, SAMPLE_STRIDE - 3::SAMPLE_STRIDE][:, :n - 1]))
    return _paeth_residuals(np.ascontiguousarray(here), np.ascontiguousarray(above), left, upper_left)


def _absdiff(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(x, y) - np.minimum(x, y)


def _mask(condition: np.ndarray) -> np.ndarray:
    """A bool array as 0x00/0xFF bytes, in place."""
    as_bytes = condition.view(np.uint8)
    return np.negative(as_bytes, out=as_bytes)


def _select(mask: np.ndarray, yes: np.ndarray, no: np.ndarray) -> np.ndarray:
    return (yes & mask) | (no & ~mask)


def paeth(cur: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """PNG Paeth residuals of ``cur`` under ``prev`` (a new array).

    With a = left, b = above, c = upper left: pa = |b - c|, pb = |a - c| and
    pc = |(b - c) + (a - c)|. When b - c and a - c have the same sign, pc >= both,
    so standing in max(pa, pb) for it picks the same predictor; otherwise pc = |pa - pb|.
    """
    zero = np.zeros((cur.shape[0], 3), np.uint8)
    return _paeth_residuals(cur, prev, np.hstack((zero, cur[:, :-3])), np.hstack((zero, prev[:, :-3])))


def _paeth_residuals(cur: np.ndarray, prev: np.ndarray, left: np.ndarray, upper_left: np.ndarray) -> np.ndarray:
    pa, pb = _absdiff(prev, upper_left), _absdiff(left, upper_left)
    same_sign = _mask(np.equal(prev >= upper_left, left >= upper_left))
    pc = _select(same_sign, np.maximum(pa, pb), _absdiff(pa, pb))
    use_left = _mask((pa <= pb) & (pa <= pc))
    predictor = _select(use_left, left, _select(_mask(pb <= pc), prev, upper_left))
    return np.subtract(cur, predictor, out=predictor)
