"""Answering x11vnc's link measurement, so it does not hold our input back (a mixin of the RFB protocol).

x11vnc rates each client's link once (rates.c,
``measure_send_rates``), right after a turn of its main loop that sent the client
10 KB or more (measured: not within half a second of connecting, so not on the
first frame). It marks the 16x16 pixels at (0, 0) modified and waits until it has
sent them and holds a new update request with nothing modified, then does that
three times more to time the round trip. A viewer, which asks again after every
update, ends it in four round trips; a client that does not ask leaves x11vnc
waiting 5 s and then 2 s per round, and all that time it turns our events into
XTest requests without flushing its X connection (seen: a click's press and
release reaching the X server 6 s late, in one millisecond). So on a server
without Fence, a fence that brought 10 KB or more is held while the driver
probes: an incremental request for the screen, then one for the pixel at (0, 0).
x11vnc reads one message at a time, so the pixel alone back means it is not
measuring; the 16x16 block first means it is, and the driver answers each update
with another incremental request until four blocks have come (see
``RFBProtocol._rating_update`` in ``vnc_rfb``). Each probe costs a round trip; x11vnc is done with the
driver after its one measurement, and servers with Fence (Xvnc) are never probed.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .vnc_reactor import reactor

__all__ = ("PING_SIDE", "LinkRatingAnswers")

# What starts the measurement (rates.c's min_cmp), the block it marks at (0, 0) for
# each of its rounds, and how many rounds.
_RATING_BYTES = 10_000
PING_SIDE = 16
_PINGS = 4
# Answering: a round comes a round trip plus 5 ms after our request, so a gap this
# long means x11vnc has stopped (or never started); the probe's own bound.
_RATING_QUIET_SECONDS = 0.25
_RATING_MAX_SECONDS = 2.0


class LinkRatingAnswers:
    """The measurement's state and answers; the RFB protocol class mixes it in and calls it from commitUpdate.

    It relies on the protocol's ``received`` byte count, ``server_fences``, the
    per-update flags ``_fence_painted`` and ``_pinged`` (the 16x16 block at (0, 0)
    came), ``framebufferUpdateRequest`` and ``resolve_fence``.
    """

    received: int
    server_fences: bool
    width: int
    height: int
    _fence_painted: bool

    def _init_rating(self) -> None:
        #: x11vnc's link measurement: None, "probe" or "answer"; fences held meanwhile.
        self.rating: str | None = None
        self.rated = False
        self._pings = 0
        self._pinged = False
        self._held: list[tuple[Future[Any], Any]] = []
        self._rating_timer: Any = None
        self._rating_ends = 0.0
        #: Bytes received, and as of the last fence (x11vnc measures after 10 KB).
        self.received = 0
        self._received_at_fence = 0

    if TYPE_CHECKING:  # the protocol's own; stubs here would shadow them
        def framebufferUpdateRequest(self, x: int = 0, y: int = 0, width: int | None = None,
                                     height: int | None = None, incremental: bool = False) -> None: ...

        def resolve_fence(self, future: Future[Any], value: Any) -> None: ...

    def _may_be_rating(self) -> bool:
        """Whether the updates of the fence just completed may have started x11vnc's measurement."""
        received, self._received_at_fence = self.received - self._received_at_fence, self.received
        return not self.server_fences and not self.rated and received >= _RATING_BYTES

    def _start_rating(self) -> None:
        self.rating, self._pings = "probe", 0
        self._rating_ends = time.monotonic() + _RATING_MAX_SECONDS
        self._probe()

    def _probe(self) -> None:
        # Incremental first: x11vnc reads one message at a time and answers it with
        # what is modified, so while it measures the block comes back before the pixel.
        self._received_at_fence = self.received
        self.framebufferUpdateRequest(incremental=True)
        self.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)
        self._arm_rating_timer(max(0.0, self._rating_ends - time.monotonic()))

    def _rating_update(self) -> None:
        """One update during the measurement, or the probe for it."""
        if self.rating == "probe":
            if not self._fence_painted:  # not the probe's answer yet
                return
            if not self._pinged:  # the pixel alone: not measuring, unless this update starts it
                if self._may_be_rating() and time.monotonic() < self._rating_ends:
                    self._probe()
                else:
                    self._end_rating(rated=False)
                return
            self.rating = "answer"
        self._pings += self._pinged
        if self._pings >= _PINGS or time.monotonic() > self._rating_ends:
            # The request that ends the last round, for one pixel away from (0, 0):
            # left pending, its answer cannot be taken for a later fence's.
            self.framebufferUpdateRequest(self.width - 1, self.height - 1, 1, 1, incremental=True)
            self._end_rating(rated=True)
            return
        # The whole screen, incremental: a round ends only with nothing modified, and a
        # non-incremental request would mark its area modified again.
        self.framebufferUpdateRequest(incremental=True)
        self._arm_rating_timer(_RATING_QUIET_SECONDS)

    def _rating_timeout(self) -> None:
        self._rating_timer = None
        self._end_rating(rated=self._pings > 0)

    def _end_rating(self, rated: bool) -> None:
        self._cancel_rating_timer()
        self.rating = None
        self.rated |= rated
        held, self._held = self._held, []
        for future, value in held:
            self.resolve_fence(future, value)

    def _arm_rating_timer(self, seconds: float) -> None:
        self._cancel_rating_timer()
        self._rating_timer = reactor.callLater(seconds, self._rating_timeout)

    def _cancel_rating_timer(self) -> None:
        if self._rating_timer is not None and self._rating_timer.active():
            self._rating_timer.cancel()
        self._rating_timer = None
