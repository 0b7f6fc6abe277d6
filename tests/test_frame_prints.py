"""One look at each frame: a screenshot's fingerprint is hashed again only where the PNG encoder found the frame
changed (cud.drivers.frames.ScreenPrints), and is always the fingerprint of the whole frame.

Generated runs of frames (odd sizes, changes of a few pixels to whole rows, anywhere, screenshots and peeks in any
order, a forgotten encoder): after each screenshot, the fingerprint equals a fresh Fingerprinter's of that frame.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.drivers.frames import Fingerprinter, ScreenPrints
from cud.drivers.png import PngEncoder, PngSettings

#: One step of a run: change pixels (rows top..top+rows, columns left..left+cols) then a screenshot or a peek, or
#: forget (the driver's rest()).
steps = st.lists(st.tuples(st.sampled_from(["shot", "shot", "shot", "peek", "forget", "unchanged"]),
                           st.integers(0, 10_000), st.integers(1, 90), st.integers(0, 10_000), st.integers(1, 300)),
                 min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(width=st.integers(1, 300), height=st.integers(1, 260), run=steps, seed=st.integers(0, 2**32 - 1),
       reuse=st.booleans())
def test_each_screenshots_fingerprint_is_its_whole_frames(width: int, height: int, run: list[tuple[str, int, int, int,
                                                                                                    int]],
                                                         seed: int, reuse: bool) -> None:
    rng = np.random.default_rng(seed)
    encoder = PngEncoder(PngSettings(reuse=reuse, threads=1))
    prints, fresh = ScreenPrints(), Fingerprinter()
    frame = rng.integers(0, 2**32, (height, width), np.uint32)
    for kind, top, rows, left, cols in run:
        if kind == "forget":
            encoder.forget()
            continue
        if kind != "unchanged":
            frame = frame.copy()  # frames given to the encoder are frozen, as a grab's are
            top, left = top % height, left % width
            frame[top:top + rows, left:left + cols] = rng.integers(0, 2**32, frame[top:top + rows, left:left + cols].shape,
                                                                   np.uint32)
        else:
            frame = frame.copy()
        encoder.encode(frame.reshape(-1).view(np.uint8), width, height, frozen=True)
        if kind == "peek":
            continue
        prints.shot(encoder.serial, encoder.stale_rows)
        got = prints.of(frame.reshape(-1).view(np.uint8), width, height)
        assert (got == fresh(frame.reshape(-1).view(np.uint8), width, height)).all()
        assert (prints.of(frame.reshape(-1).view(np.uint8), width, height) == got).all()  # asked twice: the same


def test_a_screenshot_after_the_last_hashes_only_the_rows_that_changed() -> None:
    """Not a timing: the rows the encoder names are all that is hashed again, checked by a frame whose other rows
    were changed behind the encoder's back (a fingerprint that looked there would see it)."""
    width, height = 128, 256
    encoder, prints = PngEncoder(PngSettings(threads=1)), ScreenPrints()
    first = np.zeros((height, width), np.uint32)
    encoder.encode(first.reshape(-1).view(np.uint8), width, height, frozen=True)
    prints.shot(encoder.serial, encoder.stale_rows)
    before = prints.of(first.reshape(-1).view(np.uint8), width, height)
    second = first.copy()
    second[200, 5] = 7  # the fourth band (rows 192-255)
    encoder.encode(second.reshape(-1).view(np.uint8), width, height, frozen=True)
    assert encoder.stale_rows == [(192, 256)]
    prints.shot(encoder.serial, encoder.stale_rows)
    behind = second.copy()
    behind[0, 0] = 9  # not in the rows named: a fingerprint that hashes only those rows cannot see it
    after = prints.of(behind.reshape(-1).view(np.uint8), width, height)
    changed = set((after != before).nonzero()[0].tolist())
    assert changed == {6 * (width // 32) + 5 // 32}, changed  # tile row 6 (rows 192-223), column 0
