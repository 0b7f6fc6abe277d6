"""A seat's clipboard, read and set as its user with ``xclip`` (the Debian package of that name).

X has no clipboard store: the CLIPBOARD selection is a promise by its owner to
answer for it. So setting it starts an ``xclip`` of the session that owns the
selection and answers until someone else takes it (a process of the session: the
reset ends it). Reading asks the owner through ``xclip -o``. The text travels
through the child's stdin and stdout, never its argv.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from cud.daemon.session import xclients
from cud.errors import SessionError

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("CLIPBOARD_TIMEOUT", "MAX_CLIPBOARD_BYTES", "get", "set_text")

XCLIP = "/usr/bin/xclip"
#: Seconds a clipboard read or write may take (an owner that does not answer makes xclip wait).
CLIPBOARD_TIMEOUT = 5.0
#: The most text the clipboard carries through cud (the [session] max_clipboard_bytes default).
MAX_CLIPBOARD_BYTES = 1 << 20
#: What xclip says when the selection has no owner, or one that has no text.
_EMPTY = (b"target STRING not available", b"target UTF8_STRING not available")


def _display(session: SeatSession) -> str:
    if session.places.display is None:
        raise SessionError(f"seat {session.seat!r} has no X display of its own: no clipboard to reach",
                           seat=session.seat)
    return session.places.display


async def get(session: SeatSession, *, max_bytes: int = MAX_CLIPBOARD_BYTES) -> str:
    """The CLIPBOARD's text ('' when nobody owns it or it holds no text)."""
    _display(session)
    done = await session.run([XCLIP, "-o", "-selection", "clipboard", "-target", "UTF8_STRING"],
                             timeout=CLIPBOARD_TIMEOUT, max_output=max_bytes)
    if done.timed_out:
        raise SessionError(f"the clipboard of seat {session.seat!r} did not answer within {CLIPBOARD_TIMEOUT:g} s",
                           seat=session.seat)
    if done.exit_code != 0:
        if any(marker in done.stderr for marker in _EMPTY):
            return ""
        raise SessionError(f"reading the clipboard of seat {session.seat!r} failed: "
                           f"{done.stderr.decode(errors='replace').strip()[:200]}", seat=session.seat)
    if done.truncated:
        raise SessionError(f"the clipboard of seat {session.seat!r} holds over {max_bytes} bytes, the limit",
                           seat=session.seat, limit=max_bytes)
    return done.stdout.decode("utf-8", errors="replace")


async def set_text(session: SeatSession, text: str) -> None:
    """Own CLIPBOARD with ``text``, answered by an ``xclip`` of the session until another owner takes it."""
    name = _display(session)
    before = (await asyncio.to_thread(xclients.selection_owners, name))["CLIPBOARD"]
    # xclip reads the text, forks, and its child takes the selection after the parent has exited.
    done = await session.run([XCLIP, "-i", "-selection", "clipboard"], timeout=CLIPBOARD_TIMEOUT,
                             stdin=text.encode("utf-8"), max_output=4096)
    if done.exit_code != 0:
        raise SessionError(f"setting the clipboard of seat {session.seat!r} failed: "
                           f"{done.stderr.decode(errors='replace').strip()[:200] or done.exit_code}",
                           seat=session.seat)
    deadline = time.monotonic() + CLIPBOARD_TIMEOUT
    while True:
        owner = (await asyncio.to_thread(xclients.selection_owners, name))["CLIPBOARD"]
        if owner not in (0, before):
            return
        if time.monotonic() > deadline:
            raise SessionError(f"xclip did not take the clipboard of seat {session.seat!r} within "
                               f"{CLIPBOARD_TIMEOUT:g} s", seat=session.seat)
        await asyncio.sleep(0.02)
