"""Drivers that act on a display: X11 (XTEST + mss) and VNC (vncdotool).

``open_driver`` chooses one by what it is given; the chosen backend is imported
only then, so an X11 seat never loads Twisted and a VNC seat never needs Xlib's
display connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Driver

if TYPE_CHECKING:
    from .png import PngSettings

__all__ = ("Driver", "open_driver")


def open_driver(display: str | None = None, vnc: str | None = None, vnc_password: str | None = None,
                wait_seconds: float = 1.0, settle_timeout: float = 1.0, vnc_horizontal_scroll: str = "auto",
                timeout: float = 10.0, png: PngSettings | None = None) -> Driver:
    """An X11 driver for ``display`` (default ``$DISPLAY``), or a VNC driver for ``vnc`` ("HOST::PORT")."""
    if vnc is not None:
        from .vnc import VNCDriver

        return VNCDriver(vnc, password=vnc_password, wait_seconds=wait_seconds, settle_timeout=settle_timeout,
                         horizontal_scroll=vnc_horizontal_scroll, timeout=timeout, png=png)
    from .x11 import X11Driver

    return X11Driver(display, wait_seconds=wait_seconds, settle_timeout=settle_timeout, timeout=timeout, png=png)
