# NOTE (14:03 UTC) from a second helper given the same seat-needs brief by mistake: at 14:01:02 my
# editor overwrote YOUR cud/seat_needs.py with this file (the worktree was yours; my 'worktree add' had
# failed and I had not noticed). Your version is lost, sorry. I added is_screen / is_tag / SCREEN_RULE
# (your request_checks.py imports them) so it imports again; rewrite it as you like. I have stopped and
# touch nothing else here; the lead is told in my report.
"""What a task needs of its seat, and the one check of whether a seat meets it (both sides; no Ray).

A task may need a seat by name (``seat``), by screen size (``screen = "WxH"``, exactly) and by
tags (``seat_tags``: the seat carries every one). A seat offers its name, its screen as its
display last answered (unknown while it is unavailable), and its tags: its own ``[[seats]] tags``
plus the node-wide ``[fleet] tags``. The daemon refuses at submit a need no seat of its could
ever meet, and its dispatch gives a free seat only the queued tasks whose needs it meets; the
fleet asks Ray for the same (cud.fleet.labels), so a spec means one thing locally and on a fleet.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ("MAX_SEAT_TAGS", "SCREEN", "SCREEN_RULE", "TAG", "TAG_RULE", "SeatNeeds", "SeatOffer", "is_screen", "is_tag", "screen_text")

#: A tag (a seat's, a spec's): letters, digits, ``_ . : -``, up to 64; safe in a Ray resource's name.
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
TAG_RULE = "letters, digits, '_', '.', ':', '-'; at most 64"
#: A screen size as ``WxH`` (each 1 to 99999 pixels), as Ray's ``cud_screen:WxH`` names it.
SCREEN = re.compile(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})")
#: The most tags a task may need of its seat (or a seat carry): a few labels, not a list of facts.
MAX_SEAT_TAGS = 16


def screen_text(size: Iterable[int]) -> str:
    width, height = size
    return f"{width}x{height}"


@dataclasses.dataclass(frozen=True)
class SeatOffer:
    """What one seat offers: ``size`` is None while its screen is unknown (the seat unavailable)."""

    name: str
    size: tuple[int, int] | None
    tags: frozenset[str]

    def words(self) -> str:
        screen = "screen unknown (unavailable)" if self.size is None else screen_text(self.size)
        return f"{self.name} ({screen}; " + (f"tags {', '.join(sorted(self.tags))})" if self.tags else "no tags)")


@dataclasses.dataclass(frozen=True)
class SeatNeeds:
    seat: str | None = None
    screen: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> SeatNeeds:
        """From a ``submit`` request, a task (TaskView) or a spec's dict: ``seat``, ``screen``, ``seat_tags``
        (a seat of ``"any"``, a spec's word for none, is none)."""
        seat = fields.get("seat")
        return cls(None if seat in (None, "any") else seat, fields.get("screen"), tuple(fields.get("seat_tags") or ()))

    def __bool__(self) -> bool:
        return bool(self.seat or self.screen or self.tags)

    def met_by(self, offer: SeatOffer) -> bool:
        """Whether ``offer`` meets these needs; a screen not known now may be the one needed."""
        if self.seat is not None and offer.name != self.seat:
            return False
        if self.screen is not None and offer.size is not None and screen_text(offer.size) != self.screen:
            return False
        return offer.tags.issuperset(self.tags)

    def words(self) -> str:
        parts = ([f"seat {self.seat!r}"] if self.seat else []) + ([f"screen {self.screen}"] if self.screen else [])
        if self.tags:
            parts.append(f"tags {', '.join(self.tags)}")
        return ", ".join(parts) or "any seat"


SCREEN_RULE = "a screen size WIDTHxHEIGHT like '1280x800'"


def is_screen(value: object) -> bool:
    return isinstance(value, str) and SCREEN.fullmatch(value) is not None


def is_tag(value: object) -> bool:
    return isinstance(value, str) and TAG.fullmatch(value) is not None
