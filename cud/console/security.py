"""Who may talk to the console: the loopback pattern, as one aiohttp middleware and one header hook.

The console listens on 127.0.0.1 only, yet any page in the user's browser, and
any local process, can send it requests. So, for every request:

1. ``Host`` must be exactly ``127.0.0.1:PORT``. A page on a name an attacker
   controls that resolves to 127.0.0.1 (DNS rebinding) sends its own name, and
   is refused before anything else is looked at.
2. The one-time token printed by ``cuctl console`` is traded, once, for a
   session cookie (HttpOnly: no script reads it; SameSite=Strict: no other
   site's page makes the browser send it), then the browser is sent on to the
   token-less URL so the token leaves the address bar. Without that cookie
   every request is 401, static files included.
3. A state-changing request (anything but GET/HEAD) must carry
   ``Origin: http://127.0.0.1:PORT`` and a JSON body type, which a form on
   another page cannot send without the browser asking first.

Every response gets a Content-Security-Policy with no external source, so even
a mistake in the page could not load or send anything elsewhere.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from cud.errors import ConsoleRefused, CudError

__all__ = ("CSP", "Gate")

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
_SAFE_METHODS = frozenset({"GET", "HEAD"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def refusal(request: web.Request, status: int, error: CudError, source: str = "console") -> web.Response:
    """An error the page can show (``source``: who refused, the console or the daemon): JSON under
    /api/ (the error's own wire dict, and the source), plain text elsewhere (a person reads it)."""
    if request.path.startswith("/api/"):
        body = json.dumps({"error": {**error.to_dict(), "source": source}})
        return web.Response(status=status, text=body, content_type="application/json")
    return web.Response(status=status, text=error.message + "\n", content_type="text/plain")


def _see_other() -> web.Response:
    return web.Response(status=303, headers={hdrs.LOCATION: "/"})


class Gate:
    """The token, the sessions and the checks of one console listening on ``127.0.0.1:port``."""

    def __init__(self, port: int) -> None:
        self.host = f"127.0.0.1:{port}"
        self.origin = f"http://{self.host}"
        # The port in the name: two consoles of one user (cookies ignore ports) keep apart.
        self.cookie = f"cud_console_{port}"
        self._token: str | None = secrets.token_urlsafe(32)
        self._sessions: set[str] = set()
        self.url = f"{self.origin}/?token={self._token}"

    def _session(self, request: web.Request) -> bool:
        value = request.cookies.get(self.cookie, "")
        return any(hmac.compare_digest(value, s) for s in self._sessions)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get(hdrs.HOST)
        if host != self.host:
            return refusal(request, 403, ConsoleRefused(f"Host {host!r} is not this console's address {self.host!r}"))
        if "token" in request.query:
            return self._exchange(request)
        if not self._session(request):
            return refusal(request, 401, ConsoleRefused("no console session: open the URL `cuctl console` printed "
                                                        "(its token works once; restart the console for a new one)"))
        if request.method not in _SAFE_METHODS:
            origin = request.headers.get(hdrs.ORIGIN)
            if origin != self.origin:
                return refusal(request, 403, ConsoleRefused(f"Origin {origin!r} is not this console's {self.origin!r}"))
            if request.content_type != "application/json":
                return refusal(request, 415, ConsoleRefused(f"a {request.method} needs a JSON body (Content-Type "
                                                            f"application/json), got {request.content_type!r}"))
        return await handler(request)

    def _exchange(self, request: web.Request) -> web.StreamResponse:
        given = request.query.get("token", "")
        if self._session(request):  # a reload of the first URL: already in
            return _see_other()
        if request.method != "GET" or request.path != "/" or self._token is None \
                or not hmac.compare_digest(given, self._token):
            return refusal(request, 403, ConsoleRefused("this token is wrong or was already used: restart "
                                                        "`cuctl console` for a new URL"))
        self._token = None  # once only: a copied URL is useless afterwards
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        response = _see_other()
        response.set_cookie(self.cookie, session, httponly=True, samesite="Strict", path="/")
        return response

    @staticmethod
    async def headers(request: web.Request, response: web.StreamResponse) -> None:
        """``on_response_prepare``: the headers every response carries, refusals and errors included."""
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
        response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
