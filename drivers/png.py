"""Frame -> PNG -> data URL: small on the wire, fast enough to sit in every step.

Bytes matter most: every screenshot is uploaded to the model (once in stored
mode, up to ``keep_screenshots`` times when the history is replayed), over
uplinks far slower than this encoder. What the
encoder does, and why (figures from ``make bench``'s corpus of screens;
docs/screenshots.md has the guarantee and the measured table, docs/benchmarks.md the frontier):

* The frame is cut into bands of :data:`BAND_ROWS` rows, filtered and deflated
  one per task on a pool of one thread per core (numpy and zlib-ng release the GIL).
  A deflate stream may be the concatenation of independently compressed parts when
  all but the last end byte-aligned and non-final (``Z_SYNC_FLUSH``); the Adler-32
  of the whole is combined from the bands' own.
* Bands are classed by how many of their ``Up`` residuals are non-zero. Text and
  flat UI (few) go unfiltered first: deflate then matches repeated glyphs byte for
  byte, which any filter that reads the row above breaks. Where most are non-zero
  and the residuals carry at least NOISE_BITS bits a byte (wide-alphabet noise,
  grainy photographs) with next to no zeros and next to no bytes repeating the pixel
  before (no flat margin beside the noise, no gradient rows among it), Paeth
  joins the filters (Average leaves them) and deflate gets Huffman codes only: string matching finds
  nothing there. A gradient has every residual non-zero too, but all alike: near
  zero bits a byte, so it is not taken for noise.
* The check (``pillow_floor``) is what keeps every other band from losing to Pillow: the
  band is filtered as Pillow filters (per row the cheapest of None, Up, Sub, Paeth)
  and deflated by zlib (Pillow's own) at level 6 with Pillow's memLevel and
  strategy. Text keeps its unfiltered part
  when that is smaller; other bands take the check's part as theirs. Parts under
  1/1024 of their band's bytes are not checked (docs/screenshots.md says what
  this guarantees and where it rests on measurement). ``pillow_floor=False`` gives the
  cheap classes alone: the rest then get Sub, Up, Average and zlib-ng level 3.
* A band whose pixels, and the row above that its filters read, are those of the
  last frame keeps its compressed part; an identical frame keeps the whole PNG.
  Between steps most of the screen is unchanged, after a ``wait`` often all of it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from isal import isal_zlib
from zlib_ng import zlib_ng

from .png_filters import (
    AVERAGE,
    PAETH,
    PILLOW_FILTERS,
    SUB,
    UP,
    adaptive,
    repeated_share,
    residual_stats,
    unfiltered,
    up_share,
)

__all__ = ("BAND_ROWS", "PngEncoder", "PngSettings", "parse_data_url", "split_data_url", "to_data_url")

#: Rows a band holds: small enough that a click's change touches one or two, large
#: enough that restarting the deflate dictionary costs under 0.5% of the bytes.
BAND_ROWS = 64
#: Bands are told apart by the share of non-zero bytes in a sample of their ``Up``
#: residuals: text and windows measure 0.40 at most, a half-photo scene 0.44-0.52,
#: photographs 0.78-0.89. Below SYNTHETIC_SHARE rows go unfiltered; above NOISE_SHARE
#: the band may be noise.
SYNTHETIC_SHARE = 0.42
NOISE_SHARE = 0.7
#: Of those, a band is noise (Huffman codes only) when its residuals carry at least this many bits a byte:
#: a gradient's, all alike, carry under one; noise of 8 levels three, where zlib's 3-byte matches still
#: save a tenth; a grainy photo-like field six, where they saved 11% (the bench's generated seed 77037).
NOISE_BITS = 7.0
#: ... and when under this share of them are zero. Noise has 1/256; of the generated screens' bands over
#: 7 bits, those where level 6 beat Huffman codes alone by 3-12% (noise beside a flat margin: seed 77008's
#: top band, 5.2% or 18 KiB, which put the screen 12 KiB over Pillow's) had 5-21%.
NOISE_ZEROS = 0.02
#: ... and when under this share of their bytes repeat the pixel before (:func:`repeated_share`): what Huffman
#: codes alone lose to level 6 is about those bytes, so an unchecked noise band loses at most ~1/4096 of itself,
#: 1.5 KiB on a 1920x1080 screen of noise. A margin of 14 flat columns beside 1920 of noise has 0.7% zeros and
#: lost 0.5% of every band, 11 KiB over Pillow's on the screen (generated seed 3992669976).
NOISE_REPEATS = 1 / 4096
#: A band's part is checked against the Pillow-like one when it is over 1/2**PILLOW_FLOOR_SHIFT of its filtered
#: bytes: below that, all the bands of a frame together could lose at most 1/1024 of the frame's size.
PILLOW_FLOOR_SHIFT = 10
_ENGINES = {"zlib-ng": (zlib_ng, range(1, 10)), "isal": (isal_zlib, range(4))}
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IEND = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
_ADLER_BASE = 65521
_DATA_URL_PREFIX = b"data:image/png;base64,"
#: Where R, G and B sit in each 4-byte pixel of the raw formats drivers deliver.
_CHANNELS = {"BGRX": (2, 1, 0), "BGRA": (2, 1, 0), "RGBX": (0, 1, 2), "RGBA": (0, 1, 2)}


@dataclass(frozen=True)
class PngSettings:
    """How hard the encoder works; the defaults are the point on the measured frontier (docs/benchmarks.md) cud uses."""

    engine: str = "zlib-ng"  # string matching for bands that are not noise: "zlib-ng" or "isal"
    level: int = 3
    #: Filters ordinary bands choose among per row; noise bands add Paeth and leave Average out.
    filters: tuple[int, ...] = (SUB, UP, AVERAGE)
    #: Tell text/UI bands (left unfiltered) and noise bands (Huffman codes only) from the rest.
    classify: bool = True
    threads: int = 0  # 0: one per core
    #: Reuse a band's compressed part while its pixels are unchanged.
    reuse: bool = True
    #: Check each band's part against the band filtered and deflated as Pillow would, keeping the smaller.
    pillow_floor: bool = True

    def __post_init__(self) -> None:
        if self.engine not in _ENGINES:
            raise ValueError(f"unknown deflate engine {self.engine!r}; one of {sorted(_ENGINES)}")
        levels = _ENGINES[self.engine][1]
        if self.level not in levels:
            raise ValueError(f"{self.engine} level {self.level!r} is not between {levels[0]} and {levels[-1]}")
        if UP not in self.filters or not set(self.filters) <= {SUB, UP, AVERAGE, PAETH}:
            raise ValueError(f"filters {self.filters!r} must include Up (2) and be among Sub, Up, Average, Paeth")
        if self.threads < 0:
            raise ValueError(f"threads {self.threads!r} is negative")


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(tag)))


def _adler_combine(first: int, second: int, second_len: int) -> int:
    """Adler-32 of A+B from those of A and B (zlib's adler32_combine, which Python does not expose)."""
    a1, b1 = first & 0xFFFF, first >> 16
    a2, b2 = second & 0xFFFF, second >> 16
    a = (a1 + a2 - 1) % _ADLER_BASE
    b = (b1 + b2 + second_len * (a1 - 1)) % _ADLER_BASE
    return (b << 16) | a


#: Each thread's buffers for filtering a band, by thread: see ``_work_buffers``.
_WORK: dict[int, dict[tuple[int, int], Any]] = {}


def _work_buffers(n: int, stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """This thread's buffers for filtering a band of ``n`` rows: needed only while it is encoded.

    Kept per thread of the encoders' pool, not per band of every display: each seat of a daemon would
    otherwise hold ~12 MiB of them at 1280x800 (the seats bench). ``PngEncoder.forget`` lets them go:
    between tasks a seat's driver process keeps none.
    """
    cache = _WORK.setdefault(threading.get_ident(), {})
    buffers = cache.get((n, stride))
    if buffers is None:
        #: RGB rows preceded by the row above; filter-type byte + filtered row, twice (the cheap choice and
        #: the check's); the filters' scratch.
        buffers = cache[(n, stride)] = (np.empty((n + 1, stride), np.uint8), np.empty((n, stride + 1), np.uint8),
                                        np.empty((n, stride + 1), np.uint8),
                                        (np.empty((n, stride), np.uint8), np.empty((n, stride), np.uint8)))
    return buffers


class _Band:
    """One band of a display's frames: what it produced for the last frame."""

    def __init__(self, first: int, end: int, width: int) -> None:
        self.first, self.end, self.width = first, end, width
        #: Bytes of the band's filtered rows (filter-type byte + RGB row each), for the Adler-32 combine.
        self.size = (end - first) * (width * 3 + 1)
        self.part = b""
        self.adler = 1

    def encode(self, pixels: np.ndarray, previous: np.ndarray | None, channels: tuple[int, int, int],
               settings: PngSettings, last: bool) -> bool:
        """Filter and deflate the band's rows of ``pixels`` (H x W x 4); False if they (and the row above
        its filters read) are those of ``previous``, the frame its part was made from."""
        rows_read = slice(max(self.first - 1, 0), self.end)
        raw = pixels[rows_read]
        if previous is not None and np.array_equal(_words(previous[rows_read]), _words(raw)):
            return False
        rgb, rows, spare, scratch = _work_buffers(self.end - self.first, self.width * 3)
        planes = rgb.reshape(rgb.shape[0], self.width, 3)
        skip = 1 if self.first == 0 else 0
        if skip:
            rgb[0] = 0  # the first band has no row above: Up and Paeth see zeros there
        for out, src in enumerate(channels):
            planes[skip:, :, out] = raw[:, :, src]
        flush = zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH
        share = up_share(rgb, rows)
        if not settings.classify:
            adaptive(rgb, rows, scratch, settings.filters)
            self._finish(_deflate(settings.engine, settings.level, rows, flush), rows)
            return True
        if share > NOISE_SHARE:
            # Not Average: its residuals leave quantised noise's lattice (x - (a + b) // 2 of multiples of 4 takes
            # 128 values, not 64), a bit a byte more under Huffman codes alone: a 64-level band came out 12% over
            # Pillow's (generated seed 1563314899). Sub, Up and Paeth keep it.
            adaptive(rgb, rows, scratch, (*(f for f in settings.filters if f != AVERAGE), PAETH))
            bits, zeros = residual_stats(rows)
            if bits >= NOISE_BITS and zeros < NOISE_ZEROS and repeated_share(rows) < NOISE_REPEATS:
                # Wide-alphabet noise: Huffman codes alone come within 0.1% of level 6's bytes, unchecked.
                # memLevel 9: blocks twice as long as 8's, so half the code tables (0.3% of noise's bytes).
                deflate = zlib_ng.compressobj(6, zlib_ng.DEFLATED, -15, 9, zlib_ng.Z_HUFFMAN_ONLY)
                self._finish(deflate.compress(rows) + deflate.flush(flush), rows)
                return True
        part, chosen = b"", rows
        if share < SYNTHETIC_SHARE:
            unfiltered(rgb, rows)
            part = _deflate(settings.engine, settings.level, rows, flush)
            if not settings.pillow_floor or len(part) <= rows.size >> PILLOW_FLOOR_SHIFT:
                self._finish(part, rows)
                return True
            np.subtract(rgb[1:], rgb[:-1], out=spare[:, 1:])
            checked = spare
        elif settings.pillow_floor:
            checked = rows  # its Up residuals are there already; nothing cheaper is tried first
            if share > NOISE_SHARE:
                np.subtract(rgb[1:], rgb[:-1], out=rows[:, 1:])
        else:
            adaptive(rgb, rows, scratch, settings.filters)
            self._finish(_deflate(settings.engine, settings.level, rows, flush), rows)
            return True
        # The check: the band filtered as Pillow filters it, deflated at level 6 with Pillow's parameters;
        # the smaller part is kept, so the band never costs more than that (docs/screenshots.md).
        adaptive(rgb, checked, scratch, PILLOW_FILTERS, whole_rows=True)
        # With zlib, Pillow's own: zlib-ng hashes 4 bytes and misses the 3-byte matches that quantised noise is
        # made of, and came out 3.6-7% over zlib's level 6 on photographs and smooth wallpapers.
        candidate = _deflate("zlib", 6, checked, flush, pillow=True)
        if not part or len(candidate) < len(part):
            part, chosen = candidate, checked
        self._finish(part, chosen)
        return True

    def _finish(self, part: bytes, rows: np.ndarray) -> None:
        self.part = part
        self.adler = zlib_ng.adler32(rows)


def _deflate(engine: str, level: int, rows: np.ndarray, flush: int, pillow: bool = False) -> bytes:
    """Raw deflate of ``rows`` (the zlib frame is ours); ``pillow``: with Pillow's memLevel 9 and Z_FILTERED."""
    module = zlib if engine == "zlib" else _ENGINES[engine][0]
    deflate = (module.compressobj(level, module.DEFLATED, -15, 9, module.Z_FILTERED) if pillow
               else module.compressobj(level, module.DEFLATED, -15))
    out: bytes = deflate.compress(rows) + deflate.flush(flush)  # isal and zlib-ng are untyped: Any
    return out


def _words(pixels: np.ndarray) -> np.ndarray:
    """Contiguous pixels as the widest unsigned words that fit: comparing them is 4-8x fewer steps than bytes."""
    flat = pixels.reshape(-1)
    return flat.view(np.uint64 if flat.size % 8 == 0 else np.uint32)


class PngEncoder:
    """Encodes frames of one display; keeps work buffers and the last frame's parts between calls."""

    def __init__(self, settings: PngSettings | None = None) -> None:
        self.settings = settings or PngSettings()
        #: Bands re-encoded for the last frame (0: the whole PNG was reused).
        self.changed_bands = 0
        #: The number of the last frame encoded (each :meth:`encode` counts one, whether it ends well or not).
        self.serial = 0
        #: The row ranges ``(first, end)`` of the last frame that may differ from the frame encoded before it
        #: (numbered ``serial - 1``); None when that frame is unknown (the first, after :meth:`forget`, or
        #: ``reuse`` off). Outside them the two frames are the same pixels: a fingerprint need not look again.
        self.stale_rows: list[tuple[int, int]] | None = None
        self.forget()

    def forget(self) -> None:
        """Drop the last frame and everything made from it (the next frame is encoded whole), and the pool's
        filter buffers (a band being encoded keeps its own until it is done)."""
        _WORK.clear()
        self._key: tuple[int, int, str] = (0, 0, "")
        self._bands: list[_Band] = []
        #: The frame the bands' parts were made from (H x W x 4), to tell unchanged bands by.
        self._previous: np.ndarray | None = None
        self._png = b""
        self._url = ("", b"")  # (data URL, the PNG it holds)

    def data_url(self, raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int, rawmode: str = "BGRX", *,
                 frozen: bool = False) -> str:
        """:meth:`encode` as a data URL; the last URL again when the PNG is the one it holds."""
        png = self.encode(raw, width, height, rawmode, frozen=frozen)
        if self._url[1] is not png:
            self._url = (to_data_url(png), png)
        return self._url[0]

    def encode(self, raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int, rawmode: str = "BGRX", *,
               frozen: bool = False) -> bytes:
        """PNG (8-bit RGB) of a ``width`` x ``height`` frame of 4-byte ``rawmode`` pixels.

        ``frozen``: the caller never changes ``raw`` after this call (a driver's fresh
        grab), so the encoder keeps it to compare the next frame with instead of a copy:
        a frame's worth of memory per display, and a copy per frame, saved.
        """
        channels = _CHANNELS.get(rawmode)
        if channels is None:
            raise ValueError(f"unsupported raw pixel format {rawmode!r}; one of {sorted(_CHANNELS)}")
        if len(raw) != width * height * 4:
            raise ValueError(f"frame of {len(raw)} bytes is not {width}x{height} pixels of 4 bytes")
        if self._key != (width, height, rawmode):
            self._key = (width, height, rawmode)
            self._bands = [_Band(first, min(first + BAND_ROWS, height), width)
                           for first in range(0, height, BAND_ROWS)]
            self._png = b""
            self._previous = None
        pixels = np.frombuffer(raw, np.uint8).reshape(height, width, 4)
        bands, settings = self._bands, self.settings
        previous = self._previous if settings.reuse else None
        self._previous = None  # until every band is done: a band that failed midway has no known frame
        threads = settings.threads or os.cpu_count() or 1
        self.serial += 1
        self.stale_rows = None
        if threads == 1:  # on this thread: a pool of one would only add a hand-over per band
            changed = [band.encode(pixels, previous, channels, settings, band is bands[-1]) for band in bands]
        else:
            pool = _pool(threads)
            jobs = [pool.submit(band.encode, pixels, previous, channels, settings, band is bands[-1]) for band in bands]
            changed = [job.result() for job in jobs]
        self.changed_bands = sum(changed)
        if previous is not None:
            self.stale_rows = [(band.first, band.end) for band, again in zip(bands, changed, strict=True) if again]
        if settings.reuse:
            self._previous = pixels if frozen else pixels.copy()
        if self.changed_bands == 0 and self._png:
            return self._png
        adler = bands[0].adler
        for band in bands[1:]:
            adler = _adler_combine(adler, band.adler, band.size)
        stream = b"".join((b"\x78\x01", *(band.part for band in bands), struct.pack(">I", adler)))
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        self._png = b"".join((_SIGNATURE, _chunk(b"IHDR", header), _chunk(b"IDAT", stream), _IEND))
        return self._png


_POOLS: dict[int, ThreadPoolExecutor] = {}
# A forked child has none of the parent's threads: its pools would take work and never run it.
os.register_at_fork(after_in_child=_POOLS.clear)


def _pool(threads: int) -> ThreadPoolExecutor:
    """Pools shared by every display's encoder: one thread per core is the default, and more would take turns."""
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cud-png")
    return pool


def to_data_url(png: bytes) -> str:
    return (_DATA_URL_PREFIX + base64.b64encode(png)).decode("ascii")


_DATA_URL = re.compile(r"data:(image/[A-Za-z0-9.+-]+);base64,", re.ASCII)


#: Standard base64, padded, as :func:`to_data_url` writes it (what ``b64decode(validate=True)`` takes).
#: One character class, so the match is one fast scan; the length is checked apart.
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}", re.ASCII)


def split_data_url(url: str) -> tuple[str, str]:
    """(media type, base64 text) of a ``data:image/...;base64,`` URL, checked but not decoded (a caller
    that sends the image on as base64 keeps the driver's text); ValueError says what is wrong."""
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        raise ValueError(f"not a base64 image data URL: {str(url)[:40]!r}")
    text = url[match.end():]
    if len(text) % 4 or _BASE64.fullmatch(text) is None:
        # Not the driver's plain form: what the strict decoder takes still goes (it allows more padding).
        try:
            base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"image data URL is not valid base64 ({len(text)} characters after the comma)") from None
    return match.group(1), text


def parse_data_url(url: str) -> tuple[str, bytes]:
    """(media type, bytes) of a ``data:image/...;base64,`` URL; ValueError says what is wrong."""
    media, text = split_data_url(url)
    return media, base64.b64decode(text)
