"""One RFB connection, driven from the caller's thread, on one Twisted reactor thread.

vncdotool's threaded ``api`` proxy is not used: it has one result queue per proxy
(a timed-out call's late reply is taken by the next call), no timeout by default,
and a reactor that ``api.shutdown()`` stops for good. Its protocol class is used
instead: ``rfb.RFBClient`` does the handshake, VNC authentication and message
parsing; this module adds the framebuffer, the fences and the threading.

Threads. Twisted's reactor runs in one daemon thread, started once per process
(or borrowed if something else already runs it) and never restarted. All protocol
state lives on that thread. A caller hands it a closure and waits on a
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

import atexit
import collections
import socket
import struct
import threading
import time
from concurrent.futures import Future, InvalidStateError, TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from twisted.internet import protocol, reactor
from twisted.python.failure import Failure
from vncdotool import rfb
from vncdotool.const import AuthTypes, Encoding, MsgC2S, MsgS2C

from cud.errors import AuthenticationFailed, DisplayUnavailable, DriverTimeout

from .x11vnc_rating import PING_SIDE, LinkRatingAnswers

try:  # cryptography >= 43 keeps DES here and warns on the old path
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
except ImportError:  # pragma: no cover - older cryptography
    from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

__all__ = ()

#: Little-endian 32 bpp with red in bits 16-23: bytes in memory are B, G, R, X, the
#: layout mss gives the X11 driver, so both share one PNG path.
PIXEL_FORMAT = rfb.PixelFormat(32, 24, False, True, 255, 255, 255, 16, 8, 0)
RAWMODE = "BGRX"
# RAW and CopyRect decode with numpy at memory speed; vncdotool's Hextile/ZRLE
# decoders run per tile in Python and are slower than RAW's bytes over loopback.
# Cursor: the server sends the pointer shape apart instead of painting it into the
# framebuffer, so frames hold screen content only, as mss's do.
# Fence is asked for to learn whether the server has it: a server that does sends a
# Fence request as soon as it reads our SetEncodings (which we answer). TigerVNC's
# Xvnc and TurboVNC do, x11vnc (libvncserver) does not, and the VNC driver has to
# tell them apart (see ``Connection.server_fences``).
_ENCODINGS = (Encoding.RAW, Encoding.COPY_RECTANGLE, Encoding.PSEUDO_CURSOR, Encoding.PSEUDO_DESKTOP_SIZE,
              Encoding.PSEUDO_LAST_RECT, Encoding.PSEUDO_FENCE)
# Fence flags (the RFB community extension): the three we honour, and "reply wanted".
_FENCE_BLOCK_BEFORE, _FENCE_BLOCK_AFTER, _FENCE_SYNC_NEXT, _FENCE_REQUEST = 1, 2, 4, 1 << 31
_MAX_SIDE = 16384
_REFENCE_SECONDS = 0.5
Event = tuple[Any, ...]  # ("key", keysym, down) | ("pointer", x, y, button_mask)


@dataclass(frozen=True)
class Address:
    family: socket.AddressFamily
    host: str
    port: int

    def __str__(self) -> str:
        return self.host if self.family == socket.AF_UNIX else f"{self.host}::{self.port}"


# -- the reactor thread ---------------------------------------------------------------
_lock = threading.Lock()
_thread: threading.Thread | None = None
_started = threading.Event()


def _ensure_reactor(timeout: float) -> None:
    """Run the reactor on a daemon thread, once per process; reuse one already running."""
    global _thread
    with _lock:
        if _thread is None:
            if reactor.running:  # someone else's (vncdotool.api, a Twisted application)
                return
            if getattr(reactor, "_startedBefore", False):
                raise DisplayUnavailable(
                    "the Twisted reactor of this process has been stopped (vncdotool.api.shutdown()?) "
                    "and cannot be restarted")
            reactor.callWhenRunning(_started.set)
            _thread = threading.Thread(target=reactor.run, kwargs={"installSignalHandlers": False},
                                       name="cud-vnc-reactor", daemon=True)
            _thread.start()
            atexit.register(_stop_reactor)
    if not _started.wait(timeout):
        raise DriverTimeout(f"the Twisted reactor did not start within {timeout}s", timeout=timeout)
    if not reactor.running:
        raise DisplayUnavailable("the Twisted reactor of this process has been stopped and cannot be restarted")


def _stop_reactor() -> None:
    """At exit: close connections cleanly, but never wait long for it."""
    if _thread is not None and reactor.running:
        reactor.callFromThread(reactor.stop)
        _thread.join(1.0)


def _resolve(future: Future[Any], value: Any = None, error: BaseException | None = None) -> None:
    """Complete ``future`` unless it already is (a caller that gave up is simply not told)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


def _submit(fn: Callable[[Future[Any]], None]) -> Future[Any]:
    """Run ``fn(future)`` on the reactor thread; ``fn`` completes the future, now or later."""
    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            fn(future)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            _resolve(future, error=exc)

    reactor.callFromThread(run)
    return future


# -- the protocol (reactor thread only) ------------------------------------------------
def _des_response(password: str, challenge: bytes) -> bytes:
    # VNC authentication: DES of the challenge keyed by the password's first 8 bytes,
    # each byte's bits reversed (RFC 6143 7.2.2). vncdotool's own helper goes through
    # a deprecated cryptography path that warns on every call.
    key = rfb.reverse_bits(password.encode("utf-8")[:8].ljust(8, b"\0"))
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


class _RFB(rfb.RFBClient, LinkRatingAnswers):
    # Only what we can do without a prompt: vncdotool's Apple DH type asks on stdin.
    SUPPORTED_AUTHS = {AuthTypes.NONE, AuthTypes.VNC_AUTHENTICATION}
    factory: _Factory

    def __init__(self) -> None:
        super().__init__()
        self.fb = np.zeros((0, 0, 4), np.uint8)
        self.size = (0, 0)
        #: Pending fences, oldest first: (future, whether it wants a copy of the frame).
        self.fences: collections.deque[tuple[Future[Any], bool]] = collections.deque()
        self._fence_painted = False
        #: The server has sent a Fence message (it implements the Fence extension).
        self.server_fences = False
        self._init_rating()

    # connection and handshake
    def connectionMade(self) -> None:
        super().connectionMade()
        if hasattr(self.transport, "setTcpNoDelay"):  # not on AF_UNIX
            self.transport.setTcpNoDelay(True)

    def _fail(self, error: BaseException) -> None:
        self.factory.fail(error)
        self.transport.abortConnection()

    def _handleSecurityTypes(self, block: bytes) -> None:
        offered = set(block)
        if not offered & self.SUPPORTED_AUTHS:
            names = ", ".join(f"{AuthTypes.lookup(t)!r}" for t in sorted(offered))
            self._fail(AuthenticationFailed(
                f"VNC server {self.factory.address} offers only security types we do not support: {names} "
                "(supported: None, VncAuth)", server=str(self.factory.address), offered=sorted(offered)))
            return
        super()._handleSecurityTypes(block)

    def _handleAuth(self, block: bytes) -> None:  # RFB 3.3: the server chooses
        (auth,) = struct.unpack("!I", block)
        if auth not in (AuthTypes.INVALID, AuthTypes.NONE, AuthTypes.VNC_AUTHENTICATION):
            self._fail(AuthenticationFailed(
                f"VNC server {self.factory.address} insists on security type {AuthTypes.lookup(auth)!r}, "
                "which we do not support", server=str(self.factory.address), offered=[auth]))
            return
        super()._handleAuth(block)

    def vncRequestPassword(self) -> None:
        if self.factory.password is None:
            self._fail(AuthenticationFailed(
                f"VNC server {self.factory.address} requires a password and none was given",
                server=str(self.factory.address)))
            return
        self.transport.write(_des_response(self.factory.password, self._challenge))

    def vncAuthFailed(self, reason: Any) -> None:
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        self.factory.fail(AuthenticationFailed(
            f"VNC server {self.factory.address} refused the password: {reason}",
            server=str(self.factory.address), reason=str(reason)))

    def vncProtocolError(self, reason: str) -> None:
        self.factory.fail(DisplayUnavailable(
            f"VNC server {self.factory.address} sent something we cannot handle: {reason}",
            server=str(self.factory.address)))

    def vncConnectionMade(self) -> None:
        self.setPixelFormat(PIXEL_FORMAT)
        self.setEncodings(_ENCODINGS)
        self._resize(self.width, self.height)
        # The one full update of a connection; it also completes the connect.
        self.fences.append((self.factory.ready, False))
        self.framebufferUpdateRequest(incremental=False)

    def dataReceived(self, data: bytes) -> None:
        self.received += len(data)
        super().dataReceived(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.factory.lost(reason)
        error = DisplayUnavailable(
            f"connection to VNC server {self.factory.address} lost: {reason.getErrorMessage()}",
            server=str(self.factory.address))
        self._cancel_rating_timer()
        held, self._held = self._held, []
        for future, _ in [*held, *self.fences]:
            _resolve(future, error=error)
        self.fences.clear()

    def _handleConnection(self, block: bytes) -> None:
        if block[0] == MsgS2C.SERVER_FENCE:  # vncdotool cannot parse it
            self.server_fences = True
            self.expect(self._handleFence, 8)  # 3 padding, flags, payload length
            return
        super()._handleConnection(block)

    def _handleFence(self, block: bytes) -> None:
        flags, length = struct.unpack("!xxxIB", block)
        if length:
            self.expect(self._handleFencePayload, length, flags)
        else:
            self._handleFencePayload(b"", flags)

    def _handleFencePayload(self, payload: bytes, flags: int) -> None:
        if flags & _FENCE_REQUEST:
            # Answer at once with the same payload: everything before it has been
            # read (BlockBefore), nothing after it yet (BlockAfter, SyncNext). Xvnc
            # times these round trips for its congestion control, so an unanswered
            # one could hold its updates back.
            flags &= _FENCE_BLOCK_BEFORE | _FENCE_BLOCK_AFTER | _FENCE_SYNC_NEXT
            self.transport.write(struct.pack("!BxxxIB", MsgC2S.CLIENT_FENCE, flags, len(payload)) + payload)
        self.expect(self._handleConnection, 1)

    # framebuffer
    def _resize(self, width: int, height: int) -> None:
        if not (0 < width <= _MAX_SIDE and 0 < height <= _MAX_SIDE):
            raise ValueError(f"VNC server announced a {width}x{height} framebuffer")
        old = self.fb
        self.fb = np.zeros((height, width, 4), np.uint8)
        h, w = min(height, old.shape[0]), min(width, old.shape[1])
        self.fb[:h, :w] = old[:h, :w]
        self.width, self.height = width, height
        self.size = (width, height)

    def beginUpdate(self) -> None:
        self._fence_painted = False
        self._pinged = False

    def copyRectangle(self, srcx: int, srcy: int, x: int, y: int, width: int, height: int) -> None:
        if not width or not height:
            return
        source = self.fb[srcy:srcy + height, srcx:srcx + width].copy()
        target = self.fb[y:y + height, x:x + width]
        target[...] = source[:target.shape[0], :target.shape[1]]
        self._fence_painted |= x == 0 and y == 0

    def updateCursor(self, *args: Any) -> None:
        """The pointer's shape: not part of a screenshot."""

    def updateDesktopSize(self, width: int, height: int) -> None:
        self._resize(width, height)
        self.framebufferUpdateRequest(incremental=False)

    def commitUpdate(self, rectangles: list[rfb.Rect] | None = None) -> None:
        if self.rating is not None:
            self._rating_update()
        if self._fence_painted and self.fences:
            future, wants_frame = self.fences.popleft()
            value = self.fb.copy() if wants_frame else self.size
            if self.rating is None and self._may_be_rating():
                self._start_rating()
            if self.rating is not None:
                self._held.append((future, value))
            else:
                _resolve(future, value)

    def resolve_fence(self, future: Future[Any], value: Any) -> None:
        _resolve(future, value)

    # called through _submit
    def send_events(self, events: list[Event]) -> None:
        for event in events:
            if event[0] == "key":
                self.keyEvent(event[1], down=event[2])
            else:
                self.pointerEvent(event[1], event[2], event[3])

    def send_and_fence(self, future: Future[Any], events: list[Event], wants_frame: bool) -> None:
        self.send_events(events)
        self.fences.append((future, wants_frame))
        self.framebufferUpdateRequest(incremental=True)
        self.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)


def _update_rectangle(self: _RFB, x: int, y: int, width: int, height: int, data: bytes) -> None:
    """RAW pixels for a rectangle (and, through vncdotool's fallback, filled ones)."""
    if not width or not height:
        return
    pixels = np.frombuffer(data, np.uint8).reshape(height, width, 4)
    # Clip: a server may paint a moment past a size it just shrank.
    target = self.fb[y:y + height, x:x + width]
    target[...] = pixels[:target.shape[0], :target.shape[1]]
    self._fence_painted |= x == 0 and y == 0
    self._pinged |= (x, y, width, height) == (0, 0, min(PING_SIDE, self.width), min(PING_SIDE, self.height))


# Set after the class exists: vncdotool warns at class creation that this hook's
# signature will change (its issue #385); pyproject pins the vncdotool versions
# whose signature this matches.
_RFB.updateRectangle = _update_rectangle  # type: ignore[method-assign]


class _Factory(protocol.ClientFactory):
    protocol = _RFB
    #: Never ask the server to disconnect other viewers (a person may be watching).
    shared = True

    def __init__(self, address: Address, password: str | None, ready: Future[Any]) -> None:
        self.address = address
        self.password = password
        self.ready = ready
        self.proto: _RFB | None = None
        self.on_lost: Callable[[], None] = lambda: None

    def buildProtocol(self, addr: Any) -> _RFB:
        self.proto = super().buildProtocol(addr)
        return self.proto

    def fail(self, error: BaseException) -> None:
        _resolve(self.ready, error=error)

    def lost(self, reason: Failure) -> None:
        self.fail(DisplayUnavailable(
            f"VNC server {self.address} closed the connection during the handshake: {reason.getErrorMessage()}",
            server=str(self.address)))
        self.on_lost()

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.fail(DisplayUnavailable(f"cannot connect to VNC server {self.address}: {reason.getErrorMessage()}",
                                     server=str(self.address)))


# -- the caller's side ---------------------------------------------------------------
class Connection:
    """One live RFB connection. Use from one thread; every method is bounded by ``timeout``."""

    def __init__(self, address: Address, password: str | None, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.alive = False
        _ensure_reactor(timeout)
        target = self._resolve_host(address)
        ready: Future[Any] = Future()
        self._factory = _Factory(address, password, ready)
        self._factory.on_lost = self._mark_dead

        def connect(future: Future[Any]) -> None:
            if address.family == socket.AF_UNIX:
                self._connector = reactor.connectUNIX(address.host, self._factory, timeout=timeout)
            else:
                self._connector = reactor.connectTCP(target, address.port, self._factory, timeout=timeout)
            future.set_result(None)

        self._wait(_submit(connect), "connecting")
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
            _submit(abort)

    def send(self, events: list[Event], *, frame: bool = False) -> Any:
        """Send ``events`` in order, then fence: returns once the server has read them.

        Returns a copy of the framebuffer (H x W x 4, BGRX) as of the fence if
        ``frame``, else the framebuffer size.
        """
        self._check_alive()

        def run(future: Future[Any]) -> None:
            self._live_proto().send_and_fence(future, events, frame)

        return self._fenced(_submit(run), "a framebuffer update")

    def post(self, events: list[Event]) -> None:
        """Write ``events`` without a fence; the next ``send`` fences them with its own."""
        self._check_alive()

        def run(future: Future[Any]) -> None:
            self._live_proto().send_events(events)
            future.set_result(None)

        self._wait(_submit(run), "writing input events")

    def _closed(self) -> DisplayUnavailable:
        return DisplayUnavailable(f"connection to VNC server {self.address} is closed", server=str(self.address))

    def _check_alive(self) -> None:
        if not self.alive:
            raise self._closed()

    def _live_proto(self) -> _RFB:
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
                _submit(lambda f: self._refence(f, full))
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
            self._factory.on_lost = lambda: _resolve(done)
            proto.transport.loseConnection()
            future.set_result(None)

        try:
            _submit(close).result(1.0)
            done.result(1.0)
        except (FutureTimeout, Exception):
            self._abort()
