"""The console's life: listen on 127.0.0.1, print the URL, serve until SIGINT/SIGTERM, stop cleanly.

Shaped like uvicorn's server: a :class:`Config`, then ``startup`` (bind the
socket, so ``--port 0`` knows its port before the URL is printed), ``serve``
until a signal, ``shutdown`` (stop following tasks, close connections after a
short grace). The signal handlers only set an event; a second signal skips the
grace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import socket
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

from aiohttp import web

from cud.console import api
from cud.console.link import Link
from cud.console.security import Gate
from cud.console.watch import Watch
from cud.cuctl.dial import Dialer
from cud.errors import CudError

__all__ = ("Config", "Console", "run")

#: The page's files, shipped as package data; nothing else is ever served as a file.
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
#: Seconds open requests (a task's event stream) get to finish at shutdown.
GRACE = 1.0


@dataclasses.dataclass(frozen=True)
class Config:
    daemon: Path | Dialer  # the socket, or how to reach it (over ssh, say)
    port: int = 0


def _page_files() -> dict[str, bytes]:
    folder = resources.files("cud.console") / "static"
    return {name: (folder / name).read_bytes() for name in ("index.html", *STATIC)}


def make_app(gate: Gate, link: Link) -> web.Application:
    files = _page_files()
    app = web.Application(middlewares=[gate.middleware, api.errors])
    app[api.LINK] = link
    app[api.WATCH] = Watch(link)
    app[api.IMAGES] = api.Images(link)
    app[api.VIDEOS] = {}
    app.on_response_prepare.append(gate.headers)

    async def index(request: web.Request) -> web.Response:
        return web.Response(body=files["index.html"], content_type="text/html", charset="utf-8")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=files[name], content_type=STATIC[name], charset="utf-8")

    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_routes(api.routes)
    return app


class Console:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.stop = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def startup(self) -> str:
        """Listen, and return the first URL (with its one-time token)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.config.port))  # loopback only, never a wildcard address
        except OSError as exc:
            sock.close()
            raise CudError(f"cannot listen on 127.0.0.1:{self.config.port}: {exc.strerror or exc}",
                           port=self.config.port) from None
        gate = Gate(sock.getsockname()[1])
        self.app = make_app(gate, Link(self.config.daemon))
        # handler_cancellation: a page that goes away ends its event stream (and its follow) at once.
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, shutdown_timeout=GRACE).start()
        return gate.url

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._signalled)
        try:
            await self.stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def _signalled(self) -> None:
        if self.stop.is_set():  # the second signal: no grace
            raise SystemExit(130)
        self.stop.set()

    async def shutdown(self) -> None:
        if self._runner is None:
            return
        await self.app[api.WATCH].close()
        await self._runner.cleanup()
        await self.app[api.LINK].close()


async def _main(config: Config, out: TextIO) -> int:
    console = Console(config)
    url = await console.startup()
    try:
        print(url, file=out, flush=True)  # the first line of stdout, for a person or a script
        await console.serve()
    finally:
        await console.shutdown()
    return 0


def run(config: Config, out: TextIO = sys.stdout) -> int:
    return asyncio.run(_main(config, out))
