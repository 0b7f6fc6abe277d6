"""cud: a desktop-automation daemon for X11 and VNC sandboxes."""

__version__ = "0.2.0"
