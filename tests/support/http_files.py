"""A loopback HTTP server that serves fixed bytes by path (downloads of OSWorld's tasks, fetched by cuctl)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ("Served", "serve_files")


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    requested: list[str] = field(default_factory=list)  # every path asked for, in order


@contextlib.contextmanager
def serve_files(files: Mapping[str, bytes], redirects: Mapping[str, str] | None = None) -> Iterator[Served]:
    """Serve ``files`` (path -> body; any other path is a 404) and ``redirects`` (path -> Location, a 302)."""
    served = Served("")
    moved = dict(redirects or {})

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            served.requested.append(self.path)
            if self.path in moved:
                self.send_response(302)
                self.send_header("Location", moved[self.path])
                self.end_headers()
                return
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    served.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
