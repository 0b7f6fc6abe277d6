"""Every X connection reads a BadValue as a BadValue (python-xlib 0.33 registers RandR's errors over it).

Found by a seat's reset: XKillClient of a client that had just left answered BadValue, and the
connection died with "'BadRRModeError' object has no attribute 'sequence_number'".
"""

from __future__ import annotations

from Xlib import error as xerror
from Xlib.protocol import request as xrequest

from cud.drivers.xlib_display import open_display
from tests.support.xserver import XServer


def test_a_bad_value_is_an_x_error_the_caller_can_handle(xvfb: XServer) -> None:
    conn = open_display(xvfb.display)
    try:
        seen: list[xerror.XError] = []
        conn.set_error_handler(lambda err, _request: seen.append(err))
        # KillClient of a resource no client owns: the server answers BadValue (code 2).
        xrequest.KillClient(display=conn.display, resource=0x7FFFFFF)
        conn.sync()
        assert [type(e) for e in seen] == [xerror.BadValue]
        assert conn.screen().width_in_pixels > 0  # the connection still works
    finally:
        conn.close()
