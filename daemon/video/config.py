"""``[video]``: how each task on an X11 seat is recorded (see docs/video.md).

Every value is checked here, once; a bad one raises ConfigError naming the key
and the value. The defaults were chosen by ``make bench`` (bench/video_bench.py):
at 2 frames a second and full size (text as readable as in the screenshots),
libx264's ``veryfast`` preset tuned for still images took 0.035 of a core at
1280x800 where ``ultrafast`` took 0.027, for files 2.4 times smaller (1.75 against
4.2 MB a minute): the disk, kept for a thousand tasks, is the scarcer resource. At
4 fps, 8 recording seats lost 33% of their steps/s on 2 cores; at 2 fps 9%.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cud.daemon.config_values import bad, int_in_range
from cud.daemon.config_values import table as checked_table
from cud.errors import ConfigError

__all__ = ("CODECS", "PRESETS", "VIDEO_KEYS", "VideoConfig", "load_video")

#: codec name in the config -> (ffmpeg encoder, container extension, crf range).
CODECS: dict[str, tuple[str, str, tuple[int, int]]] = {
    "h264": ("libx264", "mp4", (0, 51)),
    "vp8": ("libvpx", "webm", (4, 63)),
    "vp9": ("libvpx-vp9", "webm", (0, 63)),
}
#: libx264's presets, fastest first (the vpx codecs always run in real-time mode).
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium")
_TUNES = ("stillimage", "zerolatency", "film", "animation", "none")
#: The keys of the ``[video]`` table.
VIDEO_KEYS = frozenset({"enabled", "fps", "scale", "size", "codec", "crf", "preset", "tune", "keyframe_seconds"})
#: Below 1 frame a second a dialog that flashes is missed; above 15 the cost buys nothing a
#: reviewer of a desktop task needs (the bench's CPU share grows with fps).
FPS_RANGE = (1, 15)


@dataclasses.dataclass(frozen=True)
class VideoConfig:
    enabled: bool = False
    fps: int = 2
    #: Fraction of the display's size the video is scaled to (1.0: as is), or None if ``size`` is given.
    scale: float | None = 1.0
    #: Width and height of the video (None: ``scale`` of the display's size).
    size: tuple[int, int] | None = None
    codec: str = "h264"
    crf: int = 30
    preset: str = "veryfast"
    tune: str = "stillimage"
    #: Seconds between keyframes: a seek lands at most this far from a keyframe, and so the
    #: decoder's work to show a step's moment is bounded by it.
    keyframe_seconds: int = 10

    @property
    def extension(self) -> str:
        return CODECS[self.codec][1]

    @property
    def encoder(self) -> str:
        return CODECS[self.codec][0]

    def frame_size(self, display: tuple[int, int]) -> tuple[int, int]:
        """The video's width and height for a display of ``display`` pixels (even: yuv420p needs it)."""
        if self.size is not None:
            width, height = self.size
        else:
            factor = self.scale if self.scale is not None else 1.0
            width, height = round(display[0] * factor), round(display[1] * factor)
        return max(2, width - width % 2), max(2, height - height % 2)


def _size(value: object) -> tuple[int, int]:
    text = value if isinstance(value, str) else ""
    width, x, height = text.lower().partition("x")
    if not x or not width.isdigit() or not height.isdigit() or not (16 <= int(width) <= 7680
                                                                     and 16 <= int(height) <= 4320):
        raise bad("video.size", value, "WIDTHxHEIGHT like '1280x800', each from 16 to 7680x4320")
    return int(width), int(height)


def _scale(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 1.0:
        raise bad("video.scale", value, "a fraction of the display's size from 0.1 to 1.0")
    return float(value)


def _h264_choice(key: str, value: object, codec: str, allowed: tuple[str, ...]) -> str:
    """An x264 option (``preset``, ``tune``): only for h264, one of ``allowed``."""
    if codec != "h264":
        raise ConfigError(f"config key 'video.{key}' is for codec 'h264' only, not {codec!r}",
                          key=f"video.{key}", value=repr(value))
    if value not in allowed:
        raise bad(f"video.{key}", value, "one of " + ", ".join(allowed))
    return str(value)


def load_video(value: object) -> VideoConfig:
    """The ``[video]`` table, checked."""
    table = checked_table("video", value, VIDEO_KEYS)
    values: dict[str, Any] = {}
    if "enabled" in table:
        if not isinstance(table["enabled"], bool):
            raise bad("video.enabled", table["enabled"], "true or false")
        values["enabled"] = table["enabled"]
    if "fps" in table:
        values["fps"] = int_in_range("video.fps", table["fps"], *FPS_RANGE)
    if "size" in table and "scale" in table:
        raise ConfigError("config keys 'video.size' and 'video.scale' exclude each other; give one", key="video.size")
    if "size" in table:
        values["size"], values["scale"] = _size(table["size"]), None
    if "scale" in table:
        values["scale"] = _scale(table["scale"])
    codec = table.get("codec", VideoConfig.codec)
    if codec not in CODECS:
        raise bad("video.codec", codec, "one of " + ", ".join(repr(c) for c in CODECS))
    values["codec"] = codec
    if "crf" in table:
        low, high = CODECS[codec][2]
        values["crf"] = int_in_range("video.crf", table["crf"], low, high)
    elif codec != "h264":
        values["crf"] = 36  # vpx's scale differs from x264's; 36 keeps text as readable as x264's 30
    for key, allowed in (("preset", PRESETS), ("tune", _TUNES)):
        if key in table:
            values[key] = _h264_choice(key, table[key], codec, allowed)
    if "keyframe_seconds" in table:
        values["keyframe_seconds"] = int_in_range("video.keyframe_seconds", table["keyframe_seconds"], 1, 60)
    return VideoConfig(**values)
