"""Drivers that act on a display: X11 (XTEST + mss) and VNC."""
