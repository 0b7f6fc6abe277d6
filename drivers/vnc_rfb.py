"""The RFB protocol of a VNC connection, on the reactor thread only: handshake, framebuffer, fences.

vncdotool's ``rfb.RFBClient`` does the handshake, VNC authentication and
message parsing; this adds a numpy framebuffer, answers to the server's Fence
messages, and our own fences (see ``vnc_client``): a pending future completed
by the update that repaints (0, 0). Everything here runs on the reactor thread
(``vnc_reactor``); callers reach it only through ``vnc_client.Connection``.
"""

from __future__ import annotations

import collections
import socket
import struct
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from twisted.internet import protocol
from twisted.python.failure import Failure
from vncdotool import rfb
from vncdotool.const import AuthTypes, Encoding, MsgC2S, MsgS2C

from cud.errors import AuthenticationFailed, DisplayUnavailable

from .vnc_reactor import resolve
from .x11vnc_rating import PING_SIDE, LinkRatingAnswers

try:  # cryptography >= 43 keeps DES here and warns on the old path
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
except ImportError:  # pragma: no cover - older cryptography
    from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

__all__ = ("PIXEL_FORMAT", "RAWMODE", "Address", "Event", "RFBFactory", "RFBProtocol")

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
# tell them apart (see ``vnc_client.Connection.server_fences``).
_ENCODINGS = (Encoding.RAW, Encoding.COPY_RECTANGLE, Encoding.PSEUDO_CURSOR, Encoding.PSEUDO_DESKTOP_SIZE,
              Encoding.PSEUDO_LAST_RECT, Encoding.PSEUDO_FENCE)
# Fence flags (the RFB community extension): the three we honour, and "reply wanted".
_FENCE_BLOCK_BEFORE, _FENCE_BLOCK_AFTER, _FENCE_SYNC_NEXT, _FENCE_REQUEST = 1, 2, 4, 1 << 31
_MAX_SIDE = 16384
Event = tuple[Any, ...]  # ("key", keysym, down) | ("pointer", x, y, button_mask)


@dataclass(frozen=True)
class Address:
    family: socket.AddressFamily
    host: str
    port: int

    def __str__(self) -> str:
        return self.host if self.family == socket.AF_UNIX else f"{self.host}::{self.port}"


def _des_response(password: str, challenge: bytes) -> bytes:
    # VNC authentication: DES of the challenge keyed by the password's first 8 bytes,
    # each byte's bits reversed (RFC 6143 7.2.2). vncdotool's own helper goes through
    # a deprecated cryptography path that warns on every call.
    key = rfb.reverse_bits(password.encode("utf-8")[:8].ljust(8, b"\0"))
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


class RFBProtocol(rfb.RFBClient, LinkRatingAnswers):
    # Only what we can do without a prompt: vncdotool's Apple DH type asks on stdin.
    SUPPORTED_AUTHS = {AuthTypes.NONE, AuthTypes.VNC_AUTHENTICATION}
    factory: RFBFactory

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
            resolve(future, error=error)
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
                resolve(future, value)

    def resolve_fence(self, future: Future[Any], value: Any) -> None:
        resolve(future, value)

    # called through vnc_reactor.submit
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


def _update_rectangle(self: RFBProtocol, x: int, y: int, width: int, height: int, data: bytes) -> None:
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
RFBProtocol.updateRectangle = _update_rectangle


class RFBFactory(protocol.ClientFactory):
    protocol = RFBProtocol
    #: Never ask the server to disconnect other viewers (a person may be watching).
    shared = True

    def __init__(self, address: Address, password: str | None, ready: Future[Any]) -> None:
        self.address = address
        self.password = password
        self.ready = ready
        self.proto: RFBProtocol | None = None
        self.on_lost: Callable[[], None] = lambda: None

    def buildProtocol(self, addr: Any) -> RFBProtocol:
        proto = cast(RFBProtocol, super().buildProtocol(addr))  # an instance of self.protocol, never None here
        self.proto = proto
        return proto

    def fail(self, error: BaseException) -> None:
        resolve(self.ready, error=error)

    def lost(self, reason: Failure) -> None:
        self.fail(DisplayUnavailable(
            f"VNC server {self.address} closed the connection during the handshake: {reason.getErrorMessage()}",
            server=str(self.address)))
        self.on_lost()

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.fail(DisplayUnavailable(f"cannot connect to VNC server {self.address}: {reason.getErrorMessage()}",
                                     server=str(self.address)))
