"""One RFB connection, driven from the caller's thread, on one Twisted reactor thread.

vncdotool's threaded ``api`` proxy is not used: it has one result queue per proxy
(a timed-out call's late reply is taken by the next call), no timeout by default,
and a reactor that ``api.shutdown()`` stops for good. Its protocol class is used
instead: ``rfb.RFBClient`` does the handshake, VNC authentication and message
parsing; ``vnc_rfb`` adds the framebuffer and the fences, ``vnc_reactor`` the thread,
and this module the caller's side: one ``Connection`` whose every call is bounded.

Threads. Twisted's reactor runs in one daemon thread (``vnc_reactor``). All protocol
state lives on that thread (``vnc_rfb``). A caller hands it a closure and waits on a
``concurrent.futures.Future`` of its own, with a timeout; nothing is shared
between calls, so a late reply can only reach the future of the call that asked.

Fences. RFB input has no replies. To know the server has read our events (and to
bring the framebuffer up to date) a call ends with two FramebufferUpdateRequests:
an *incremental* one for the whole screen (only what changed comes back) and a
*non-incremental* one for the single pixel (0, 0), which the server must answer
promptly. The update that repaints (0, 0) completes the oldest pending fence.
(These are not the RFB *Fence* extension's messages: those are only answered, and
tell us which servers implement it; see ``Connection.server_fences``.)

x11vnc's link measurement: see ``cud.drivers.x11vnc_rating``.

Timeouts. A call that times out aborts its connection: whatever arrives later
belongs to no one, and the next call connects afresh (there is no way to tag RFB
replies, so a half-finished connection cannot be trusted to answer the next call).
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from cud.errors import DisplayUnavailable, DriverTimeout

from .vnc_reactor import ensure_reactor, reactor, resolve, submit
from .vnc_rfb import RAWMODE, Address, Event, RFBFactory, RFBProtocol

# RAWMODE, Address and Event are what a driver needs besides Connection: one import.
__all__ = ("RAWMODE", "Address", "Connection", "Event")

#: A fence not answered this long is asked for again (see ``Connection._fenced``).
_REFENCE_SECONDS = 0.5


class Connection:
    """One live RFB connection. Use from one thread; every method is bounded by ``timeout``."""

    def __init__(self, address: Address, password: str | None, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.alive = False
        ensure_reactor(timeout)
        target = self._resolve_host(address)
        ready: Future[Any] = Future()
        self._factory = RFBFactory(address, password, ready)
        self._factory.on_lost = self._mark_dead

        def connect(future: Future[Any]) -> None:
            if address.family == socket.AF_UNIX:
                self._connector = reactor.connectUNIX(address.host, self._factory, timeout=timeout)
            else:
                self._connector = reactor.connectTCP(target, address.port, self._factory, timeout=timeout)
            future.set_result(None)

        self._wait(submit(connect), "connecting")
        self.alive = True
        try:
            self._fenced(ready, "the handshake and first frame", full=True)
        except BaseException:
            self.alive = False
            self._abort()
            raise

    @staticmethod
    def _resolve_host(address: Address) -> str:
        # Resolved here, not by Twisted: its resolver runs on a thread pool whose
        # non-daemon threads keep the process from exiting.
        if address.family == socket.AF_UNIX:
            return address.host
        try:
            infos = socket.getaddrinfo(address.host, address.port, address.family, socket.SOCK_STREAM)
        except OSError as exc:
            raise DisplayUnavailable(f"cannot resolve VNC host {address.host!r}: {exc}", server=str(address)) from exc
        return str(infos[0][4][0])

    def _mark_dead(self) -> None:
        self.alive = False

    @property
    def server_fences(self) -> bool:
        """Whether the server implements RFB Fence (TigerVNC and TurboVNC do; x11vnc does not).

        Known by the time the connection is made: such a server sends its first
        Fence when it reads our SetEncodings, before it answers the first update request.
        """
        proto = self._factory.proto
        return proto is not None and proto.server_fences

    @property
    def size(self) -> tuple[int, int]:
        proto = self._factory.proto
        return proto.size if proto is not None else (0, 0)

    def _wait(self, future: Future[Any], what: str, timeout: float | None = None) -> Any:
        try:
            return future.result(self.timeout if timeout is None else timeout)
        except FutureTimeout:
            self.alive = False
            self._abort()
            raise DriverTimeout(
                f"VNC server {self.address} did not answer within {self.timeout:g} s ({what})",
                server=str(self.address), timeout=self.timeout) from None

    def _abort(self) -> None:
        def abort(future: Future[Any]) -> None:
            proto = self._factory.proto
            if proto is not None and proto.transport is not None:
                proto.transport.abortConnection()
            elif hasattr(self, "_connector"):
                self._connector.disconnect()
            future.set_result(None)

        if reactor.running:
            submit(abort)

    def send(self, events: list[Event], *, frame: bool = False) -> Any:
        """Send ``events`` in order, then fence: returns once the server has read them.

        Returns a copy of the framebuffer (H x W x 4, BGRX) as of the fence if
        ``frame``, else the framebuffer size.
        """
        self._check_alive()

        def run(future: Future[Any]) -> None:
            self._live_proto().send_and_fence(future, events, frame)

        return self._fenced(submit(run), "a framebuffer update")

    def post(self, events: list[Event]) -> None:
        """Write ``events`` without a fence; the next ``send`` fences them with its own."""
        self._check_alive()

        def run(future: Future[Any]) -> None:
            self._live_proto().send_events(events)
            future.set_result(None)

        self._wait(submit(run), "writing input events")

    def _closed(self) -> DisplayUnavailable:
        return DisplayUnavailable(f"connection to VNC server {self.address} is closed", server=str(self.address))

    def _check_alive(self) -> None:
        if not self.alive:
            raise self._closed()

    def _live_proto(self) -> RFBProtocol:
        """The protocol instance, if its transport is still connected (reactor thread only)."""
        proto = self._factory.proto
        if proto is None or not proto.transport.connected:
            raise self._closed()
        return proto

    def _fenced(self, future: Future[Any], what: str, *, full: bool = False) -> Any:
        """Wait for a fence, asking again now and then: a server may answer a request without (0, 0).

        Seen with Xvnc: a connect made while Chromium started waited its whole
        timeout, the server logging one update of 0 rectangles (most likely only
        the new cursor shape), and once a fence while Xvnc changed its size.
        ``full`` asks for the whole screen again, for the first frame of a connection.
        """
        deadline = time.monotonic() + self.timeout
        while deadline - time.monotonic() > _REFENCE_SECONDS:
            try:
                return future.result(_REFENCE_SECONDS)
            except FutureTimeout:
                submit(lambda f: self._refence(f, full))
        return self._wait(future, what, max(0.0, deadline - time.monotonic()))

    def _refence(self, future: Future[Any], full: bool) -> None:
        proto = self._factory.proto
        # Not while x11vnc measures: a non-incremental request would keep its round from ending.
        if proto is not None and proto.transport is not None and proto.transport.connected and proto.rating is None:
            if full:
                proto.framebufferUpdateRequest(incremental=False)
            else:
                proto.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)
        future.set_result(None)

    def close(self) -> None:
        """Close politely; abort if that takes longer than a second. Never raises."""
        if not reactor.running:
            return
        self.alive = False
        done: Future[Any] = Future()

        def close(future: Future[Any]) -> None:
            proto = self._factory.proto
            if proto is None or not proto.transport.connected:
                future.set_result(None)
                return
            self._factory.on_lost = lambda: resolve(done)
            proto.transport.loseConnection()
            future.set_result(None)

        try:
            submit(close).result(1.0)
            done.result(1.0)
        except (FutureTimeout, Exception):
            self._abort()
