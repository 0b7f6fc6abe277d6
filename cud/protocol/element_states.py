"""The names of an accessibility element's states, as the daemon reports them and specs check them.

Both sides need them: the daemon's AT-SPI reader turns its state bits into these names
(``inspect``, ``tree``, what an action touches) and a spec's ``element`` checks are
checked against them on the client as well as in the daemon.
"""

from __future__ import annotations

__all__ = ["STATE_NAMES"]

#: An accessibility element's states (AtspiStateType, in bit order: at-spi2-core's atspi-constants.h),
#: as ``inspect``, ``tree`` and a spec's ``element`` checks name them.
STATE_NAMES = (
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable", "enabled",
    "expandable", "expanded", "focusable", "focused", "has-tooltip", "horizontal", "iconified", "modal",
    "multi-line", "multiselectable", "opaque", "pressed", "resizable", "selectable", "selected", "sensitive",
    "showing", "single-line", "stale", "transient", "vertical", "visible", "manages-descendants",
    "indeterminate", "required", "truncated", "animated", "invalid-entry", "supports-autocompletion",
    "selectable-text", "is-default", "visited", "checkable", "has-popup", "read-only",
)
