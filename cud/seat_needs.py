"""The seat a task needs (a name, a screen size, tags) and whether a seat meets it: one place for both sides.

A spec (``seat``, ``screen``, ``seat_tags``) and ``submit`` (the same fields) say what seat a task
needs; the daemon refuses at submit what none of its seats could ever meet, and its dispatch gives a
free seat only the tasks it meets (``Seats.dispatch`` through ``Store.next_queued``); a fleet asks
Ray for the same labels (cud.fleet.labels). All of them call :meth:`SeatNeeds.met_by`, so "this
seat will do" means one thing on a local daemon and across a fleet.

The tag rule is here too, once, for every tag cud knows: a spec's own ``tags``, a seat's
``[[seats]] tags``, a fleet node's ``[fleet] tags``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ("MAX_SCREEN_SIDE", "MAX_SEAT_TAGS", "SCREEN", "SCREEN_RULE", "SeatNeeds", "TAG", "TAG_RULE",
           "is_screen", "is_tag", "offer_words", "screen_of")

#: A tag: a label a person picks (``chromium``, ``big``, ``gpu:none``), fit for a Ray resource's name.
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
TAG_RULE = "a tag (a letter or digit, then letters, digits, '_', '.', ':', '-'; at most 64)"
#: A screen size as a seat advertises it (``cud_screen:1280x800``): no sign, no leading zero, no spaces.
SCREEN = re.compile(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})")
#: X11 screens are at most 32767 pixels a side.
MAX_SCREEN_SIDE = 32767
SCREEN_RULE = f"a screen size WIDTHxHEIGHT like '1280x800' (each 1 to {MAX_SCREEN_SIDE}, no leading zeros)"
#: The most tags a task may ask its seat for (and a seat or a node may carry): a few labels, not a list of facts.
MAX_SEAT_TAGS = 16


def is_tag(value: object) -> bool:
    return isinstance(value, str) and TAG.fullmatch(value) is not None


def is_screen(value: object) -> bool:
    if not isinstance(value, str) or (found := SCREEN.fullmatch(value)) is None:
        return False
    return all(int(side) <= MAX_SCREEN_SIDE for side in found.groups())


def screen_of(size: Sequence[int]) -> str:
    """A screen's (width, height) as the needs and the labels write it."""
    return f"{size[0]}x{size[1]}"


def offer_words(name: str, size: Sequence[int] | None, tags: Collection[str], more: str = "") -> str:
    """What a seat offers, as a refusal lists it: "a (screen 1024x768, tags chromium, lab)" (``more``: added
    inside the brackets, ", a session")."""
    screen = "unknown now" if size is None else screen_of(size)
    return f"{name} (screen {screen}, {'tags ' + ', '.join(tags) if tags else 'no tags'}{more})"


@dataclasses.dataclass(frozen=True)
class SeatNeeds:
    """What a task asks of its seat; every part optional (None / empty: any)."""

    seat: str | None = None
    screen: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> SeatNeeds:
        """From checked ``submit`` fields, a task's view or a spec's dict (``seat``, ``screen``, ``seat_tags``;
        a spec's seat ``"any"`` is none)."""
        seat = fields.get("seat")
        return cls(None if seat == "any" else seat, fields.get("screen"), tuple(fields.get("seat_tags") or ()))

    @property
    def any(self) -> bool:
        return self.seat is None and self.screen is None and not self.tags

    def met_by(self, name: str, size: Sequence[int] | None, tags: Collection[str]) -> bool:
        """Whether seat ``name`` with screen ``size`` and ``tags`` will do; an unknown size (None: the seat
        is unavailable now) may be the one asked for, so it counts as meeting ``screen``."""
        return ((self.seat is None or self.seat == name)
                and (self.screen is None or size is None or screen_of(size) == self.screen)
                and all(tag in tags for tag in self.tags))

    def words(self) -> str:
        """The needs as a person reads them: "seat 'left', screen 1280x800, tags chromium, big"."""
        parts = [f"seat {self.seat!r}"] if self.seat is not None else []
        if self.screen is not None:
            parts.append(f"screen {self.screen}")
        if self.tags:
            parts.append(("tag " if len(self.tags) == 1 else "tags ") + ", ".join(self.tags))
        return ", ".join(parts) or "any seat"
