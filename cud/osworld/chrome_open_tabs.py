"""OSWorld's ``chrome_open_tabs`` as a program the seat's user runs: ``python3 -c SOURCE URL…``.

Ported from OSWorld's desktop_env (Apache-2.0), controllers/setup.py: ``_chrome_open_tabs_setup`` and
``_connect_chrome_over_cdp``. OSWorld's host connects Playwright over the browser's remote debugging
(CDP) and, for each URL, opens a page in the browser's first context, goes to the URL (waiting for its
``load`` event, at most 60 s, a timeout only logged) and, after the first, closes the page the browser
started with. This program does the same through the browser's own DevTools HTTP endpoint on loopback
(``PUT /json/new?URL``, ``/json/close/ID``), and waits for the load through the page's DevTools socket
(``document.readyState`` is ``complete``): the standard library only, so the system's ``python3`` runs it.

The browser is the one the converted ``launch`` started with ``--remote-debugging-port=0``: Chromium
picks a free port and writes it as the first line of ``DevToolsActivePort`` in its profile directory
(the first argument), which only the seat's user reads, so two seats never share a port. Like
OSWorld's 15 attempts 5 s apart, it waits up to :data:`CONNECT_SECONDS` for the endpoint, then exits 1.

Every URL is an argument, never program text.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import time
import urllib.parse
import urllib.request
from typing import Any, BinaryIO

#: _connect_chrome_over_cdp's default: 15 attempts, 5 s apart.
CONNECT_SECONDS = 75
#: _chrome_open_tabs_setup's ``page.goto(url, timeout=60000)``.
LOAD_SECONDS = 60


def endpoint(profile: str) -> str:
    """``http://127.0.0.1:PORT``, PORT from the profile's DevToolsActivePort; OSError or ValueError until there."""
    with open(os.path.join(profile, "DevToolsActivePort"), encoding="ascii") as f:
        port = int(f.readline())
    if not 0 < port < 65536:
        raise ValueError(f"DevToolsActivePort names the port {port}")
    return f"http://127.0.0.1:{port}"


def call(base: str, path: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(base + path, method=method), timeout=10) as answer:
        return json.loads(answer.read())


def connect(profile: str) -> str:
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            base = endpoint(profile)
            call(base, "/json/version")
            return base
        except (OSError, ValueError) as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"chrome_open_tabs: no DevTools endpoint in {profile!r}: {exc}") from None
            time.sleep(0.5)


def send(sock: socket.socket, text: str) -> None:
    """One masked text frame (RFC 6455: a client masks what it sends)."""
    data = text.encode("utf-8")
    mask = os.urandom(4)
    size = len(data)
    head = bytes([0x81, 0x80 | size]) if size < 126 else bytes([0x81, 0x80 | 126]) + size.to_bytes(2, "big")
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def receive(stream: BinaryIO) -> bytes:
    """The next text frame's data (DevTools sends each message whole, unmasked)."""
    while True:
        head = stream.read(2)
        if len(head) < 2 or head[0] & 0x0F == 0x8:
            raise OSError("the DevTools socket closed")
        size = head[1] & 0x7F
        if size == 126:
            size = int.from_bytes(stream.read(2), "big")
        elif size == 127:
            size = int.from_bytes(stream.read(8), "big")
        data = stream.read(size)
        if head[0] & 0x0F == 0x1:
            return data


def upgrade(sock: socket.socket, socket_url: str) -> BinaryIO:
    """The reader of a page's DevTools socket, ``sock`` connected to it, after its upgrade to a websocket."""
    parts = urllib.parse.urlsplit(socket_url)
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    sock.sendall(f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                 .encode("ascii"))
    stream = sock.makefile("rb")
    if b" 101 " not in stream.readline():
        raise OSError(f"{socket_url!r} refused the upgrade")
    while stream.readline() not in (b"\r\n", b""):
        pass
    return stream


def connected(socket_url: str, seconds: float) -> socket.socket:
    parts = urllib.parse.urlsplit(socket_url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=seconds)


def evaluate(sock: socket.socket, stream: BinaryIO, asked: int, expression: str) -> Any:
    """``Runtime.evaluate`` of ``expression`` in the page, as request ``asked``: its value (a promise's, once
    settled), None when it threw."""
    send(sock, json.dumps({"id": asked, "method": "Runtime.evaluate", "params": {
        "expression": expression, "returnByValue": True, "awaitPromise": True}}))
    while (answer := json.loads(receive(stream))).get("id") != asked:
        pass
    return answer.get("result", {}).get("result", {}).get("value")


def wait_loaded(socket_url: str, seconds: float) -> bool:
    """Whether the page's document, past its first about:blank, reached readyState ``complete`` in time."""
    deadline = time.monotonic() + seconds
    with connected(socket_url, seconds) as sock:
        stream = upgrade(sock, socket_url)
        asked = 0
        while time.monotonic() < deadline:
            asked += 1
            state = evaluate(sock, stream, asked, "[document.readyState, location.href]")
            if isinstance(state, list) and state[0] == "complete" and state[1] != "about:blank":
                return True
            time.sleep(0.2)
    return False


def main(argv: list[str]) -> int:
    profile, urls = argv[0], argv[1:]
    base = connect(profile)
    # Playwright's context.pages[0], the page the browser started with: DevTools lists the most recent first.
    started = [t["id"] for t in call(base, "/json/list") if t.get("type") == "page"][-1:]
    for i, url in enumerate(urls):
        target = call(base, "/json/new?" + urllib.parse.quote(url, safe=""), "PUT")
        try:
            loaded = wait_loaded(target["webSocketDebuggerUrl"], LOAD_SECONDS)
        except (OSError, ValueError, KeyError) as exc:
            loaded = False
            print(f"chrome_open_tabs: {url!r}: {exc}", file=sys.stderr)
        if not loaded:  # OSWorld logs "Opening URL exceeds time limit" and goes on
            print(f"chrome_open_tabs: opening {url!r} exceeds the time limit", file=sys.stderr)
        if i == 0:
            for page in started:
                urllib.request.urlopen(base + "/json/close/" + urllib.parse.quote(page, safe=""), timeout=10).close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
