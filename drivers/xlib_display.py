"""Opening a python-xlib connection whose errors can be read: every X connection of cud opens here.

python-xlib 0.33 registers RandR's errors at codes 1 and 2, over the core BadRequest and
BadValue, as bare Exceptions its reader cannot parse: the first BadValue on such a connection
(a KillClient of a client that just left, a request about a window just destroyed) then kills
it with "'BadRRModeError' object has no attribute 'sequence_number'" instead of an X error
the caller handles. This failed a seat's reset; the same would hit any connection.

``Display()`` imports the module of each extension the server has (``__import__('Xlib.ext.randr')``, then
``getattr(Xlib.ext, 'randr')``). Seats open their displays on threads of their own, all at once when the
daemon starts: a thread that finds the module already in ``sys.modules`` while another is still importing
it can read the package before the attribute is set, and the daemon died with "module 'Xlib.ext' has no
attribute 'randr'". So every extension module is imported here, once, when this module is.
"""

from __future__ import annotations

import importlib

from Xlib import error as xerror
from Xlib import ext
from Xlib.display import Display

__all__ = ("open_display",)

for _name, _module in ext.__extensions__:  # type: ignore[attr-defined]  # python-xlib declares no types for it
    importlib.import_module(f"Xlib.ext.{_module}")


def open_display(name: str) -> Display:
    """``Display(name)``, with every error class the reader cannot parse put back to the core one."""
    conn = Display(name)
    errors = conn.display.error_classes
    for code, kind in list(errors.items()):
        if not (isinstance(kind, type) and issubclass(kind, xerror.XError)):
            errors[code] = xerror.xerror_class.get(code, xerror.XError)
    return conn
