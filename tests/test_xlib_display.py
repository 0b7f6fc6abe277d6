"""Every X connection reads a BadValue as a BadValue (python-xlib 0.33 registers RandR's errors over it).

Found by a seat's reset: XKillClient of a client that had just left answered BadValue, and the
connection died with "'BadRRModeError' object has no attribute 'sequence_number'".
"""

from __future__ import annotations

import subprocess
import sys

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


def test_seats_opening_their_displays_at_once_never_import_an_extension_half_way(xvfb: XServer) -> None:
    """A fresh interpreter, as the daemon starts: once cud's module is imported, every extension module
    python-xlib would import inside ``Display()`` is already complete; then 16 threads open the display at once."""
    program = (
        "import sys, threading\n"
        "import cud.drivers.xlib_display as x\n"
        "from Xlib import ext\n"
        "missing = [m for _, m in ext.__extensions__ if not hasattr(ext, m)]\n"
        "assert not missing, missing\n"
        "errors = []\n"
        "def one():\n"
        "    try:\n"
        "        x.open_display(sys.argv[1]).close()\n"
        "    except Exception as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=one) for _ in range(16)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "assert not errors, errors\n")
    done = subprocess.run([sys.executable, "-c", program, xvfb.display], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
