"""A webhook receiver on loopback: an aiohttp server on its own loop in a thread.

Each path answers as told: ``ok`` (200), ``fail`` (500) or ``hang`` (no answer until
:meth:`Receiver.release` lets that path, or every path, go). Every request is kept with its
headers and JSON body.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ("Hit", "Receiver")


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: Any


class Receiver:
    def __init__(self, behaviour: dict[str, str]) -> None:
        self.behaviour = behaviour
        self.hits: list[Hit] = []
        #: Requests to each ``hang`` path that have not been answered yet.
        self.hanging: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        #: Per ``hang`` path, set when it may answer; made on the receiver's loop, as it is used there.
        self._release: dict[str, asyncio.Event] = {}
        self._release_all = False
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="receiver", daemon=True)
        self.port = 0

    def start(self) -> Receiver:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self._lock:
            self.hits.append(Hit(request.path, dict(request.headers), json.loads(body)))
        what = self.behaviour[request.path]
        if what == "hang" and not self._release_all:
            with self._lock:
                self.hanging[request.path] = self.hanging.get(request.path, 0) + 1
            try:
                await self._released(request.path).wait()
            finally:
                with self._lock:
                    self.hanging[request.path] -= 1
        if what == "fail":
            return web.Response(status=500, text="broken on purpose")
        return web.json_response({"ok": True})

    def on(self, path: str) -> list[Hit]:
        with self._lock:
            return [hit for hit in self.hits if hit.path == path]

    def _released(self, path: str) -> asyncio.Event:
        return self._release.setdefault(path, asyncio.Event())

    def release(self, path: str | None = None) -> None:
        """Answer every hanging request to ``path`` (None: to every path), and those still to come."""
        def let_go() -> None:
            if path is None:
                self._release_all = True
                for event in self._release.values():
                    event.set()
            else:
                self._released(path).set()

        self._loop.call_soon_threadsafe(let_go)

    def stop(self) -> None:
        self.release()
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
