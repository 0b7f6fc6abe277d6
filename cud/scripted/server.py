"""A loopback HTTP server that answers ``POST /v1/responses`` from a scenario.

It speaks just enough of the Responses API for the openai SDK's computer loop:
non-streaming responses with ``computer_call`` items (GA batched ``actions``) and
assistant ``message`` items, OpenAI-style error bodies, and the checks the real
API makes on a request (a model, exactly one ``{"type": "computer"}`` tool, an
``input`` list, every ``computer_call_output`` answering a call with its safety
checks acknowledged). Each request is answered from its own input alone (see
:mod:`cud.scripted.scenario`), so the server holds no per-run state.

The Authorization header must be present (any key) and is never recorded or logged.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from PIL import Image

from cud.scripted.scenario import Scenario, Step, load_scenario, parse_scenario
from cud.scripted.vision import decode_screenshot, find_colour, parse_colour

__all__ = ["ScriptedModel"]

log = logging.getLogger("cud.scripted")

#: Every turn re-sends all earlier screenshots, so bodies grow; this bounds them.
MAX_BODY = 256 * 1024 * 1024
_ERROR_TYPES = {401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_exceeded"}


class _ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        body: dict[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        self.status, self.headers = status, headers
        self.body = body or {"error": {"message": message, "type": kind, "param": param, "code": code}}


class ScriptedModel:
    """Serve ``scenario`` on 127.0.0.1; ``start()`` returns the base URL to give the SDK.

    ``scenario`` is a :class:`Scenario`, a decoded scenario dict, a file path or the
    name of a bundled scenario. ``latency`` is added before every answer. Usable as a
    context manager; ``requests`` lists the decoded request bodies received so far
    (each carries every earlier screenshot, so a long-lived server passes
    ``record=False``); ``request_bytes`` the size of each, counted even then.
    """

    def __init__(
        self,
        scenario: Scenario | dict[str, Any] | str | os.PathLike[str],
        *,
        latency: float = 0.0,
        record: bool = True,
    ) -> None:
        if isinstance(scenario, Scenario):
            self.scenario = scenario
        elif isinstance(scenario, dict):
            self.scenario = parse_scenario(scenario)
        else:
            self.scenario = load_scenario(scenario)
        self.latency = latency
        self.record = record
        self._lock = threading.Lock()
        self._requests: list[Any] = []
        self._sizes: list[int] = []
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life ----------------------------------------------------------------------
    def start(self, port: int = 0) -> str:
        if self._server is not None:
            raise RuntimeError("scripted model already started")
        self._stopping.clear()
        server = _Server(("127.0.0.1", port), _Handler)
        server.model = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="cud-scripted", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        with self._lock:
            self._stopping.set()
            connections = list(self._connections)
        server.shutdown()
        # Idle keep-alive connections would hold their threads until the client
        # hung up; cutting them lets server_close() join every handler thread.
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("scripted model not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[Any]:
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def request_bytes(self) -> list[int]:
        """The length of every ``POST /v1/responses`` body as read off the socket, in arrival order.

        Counted before anything is parsed, so a body the server then refuses counts too.
        """
        with self._lock:
            return list(self._sizes)

    # -- connection bookkeeping (called from handler threads) --------------------------
    def _register(self, connection: socket.socket) -> bool:
        with self._lock:
            if self._stopping.is_set():
                return False
            self._connections.add(connection)
            return True

    def _unregister(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    # -- answering ---------------------------------------------------------------------
    def _answer(self, raw: bytes, headers: Any) -> dict[str, Any]:
        with self._lock:
            self._sizes.append(len(raw))
        auth = headers.get("Authorization") or ""
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise _ApiError(401, "Missing bearer Authorization header; any API key will do.", code="invalid_api_key")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _ApiError(400, "We could not parse the JSON body of your request.") from None
        if self.record:
            with self._lock:
                self._requests.append(body)
        self._stopping.wait(self.latency)
        items = _validate(body)
        turn_number = sum(1 for item in items if item.get("type") == "computer_call_output")
        attempt = _attempt(headers.get("x-stainless-retry-count"))
        turns = self.scenario.turns
        if turn_number >= len(turns):
            message = f"scenario {self.scenario.name!r} has {len(turns)} turns; turn {turn_number} is past its end"
            raise _ApiError(400, message, code="scenario_exhausted")
        step = _pick(turns[turn_number].transient, turns[turn_number].step, attempt)
        log.info("turn %d attempt %d: step %d (%s)", turn_number, attempt, step.index, step.kind)
        self._stopping.wait(step.delay)
        if step.kind == "error":
            assert step.http_error is not None
            message = f"scripted HTTP {step.http_error} at step {step.index}"
            raise _ApiError(step.http_error, message, body=step.body, headers=step.headers)
        output: list[dict[str, Any]] = []
        if step.message is not None:
            output.append(_message(step.message, "commentary" if step.kind == "call" else "final_answer"))
        if step.kind == "call":
            output.append(_computer_call(step, _aim(step, items)))
        now = int(time.time())
        tokens_in, tokens_out = len(raw) // 4, 20 * len(output)
        return {
            "id": _new_id("resp"),
            "object": "response",
            "created_at": now,
            "completed_at": now,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": body.get("metadata") or {},
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": False,
            "previous_response_id": None,
            "temperature": 1.0,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body["tools"],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": tokens_in,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": tokens_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens_in + tokens_out,
            },
        }


def _validate(body: object) -> list[dict[str, Any]]:
    """The checks the real API makes that a broken client could fail; returns the input items."""
    if not isinstance(body, dict):
        raise _ApiError(400, "The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _ApiError(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    if body.get("stream") or body.get("background"):
        raise _ApiError(400, "The scripted model answers only non-streaming, foreground requests.", param="stream")
    tools = body.get("tools")
    computer = isinstance(tools, list) and len(tools) == 1 and isinstance(tools[0], dict)
    if not computer or tools[0].get("type") != "computer":
        raise _ApiError(400, f"tools must be exactly [{{'type': 'computer'}}], got {tools!r}", param="tools")
    items = body.get("input")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise _ApiError(400, "input must be a list of input items.", param="input")
    calls = {item.get("call_id"): item for item in items if item.get("type") == "computer_call"}
    for item in items:
        if item.get("type") != "computer_call_output":
            continue
        call_id = item.get("call_id")
        if call_id not in calls:
            raise _ApiError(400, f"No computer call found for output with call_id {call_id!r}.", param="input")
        acknowledged = {_check_id(check) for check in item.get("acknowledged_safety_checks") or []}
        for check in calls[call_id].get("pending_safety_checks") or []:
            if _check_id(check) not in acknowledged:
                raise _ApiError(400, f"Safety check {_check_id(check)!r} was not acknowledged.", param="input")
    return items


def _check_id(check: object) -> object:
    return check.get("id") if isinstance(check, dict) else check


def _attempt(header: str | None) -> int:
    try:
        return max(0, int(header or 0))
    except ValueError:
        return 0


def _pick(transient: tuple[Step, ...], step: Step, attempt: int) -> Step:
    for error in transient:
        assert error.times is not None
        if attempt < error.times:
            return error
        attempt -= error.times
    return step


def _screenshot(step: Step, items: list[dict[str, Any]], why: str) -> Image.Image:
    outputs = [item for item in items if item.get("type") == "computer_call_output"]
    if not outputs:
        raise _ApiError(400, f"step {step.index} {why}, but the request carries no screenshot", code="no_screenshot")
    shot = outputs[-1].get("output")
    url = shot.get("image_url") if isinstance(shot, dict) else None
    if not isinstance(url, str):
        raise _ApiError(400, f"step {step.index} {why}, but the last screenshot has no image_url", code="no_screenshot")
    try:
        return decode_screenshot(url)
    except ValueError as exc:
        raise _ApiError(400, f"step {step.index} {why}, but {exc}", code="bad_screenshot") from None


def _aim(step: Step, items: list[dict[str, Any]]) -> list[Any]:
    """The step's actions with every colour target replaced by x/y on the last screenshot."""
    actions = copy.deepcopy(step.actions or [])
    image = _screenshot(step, items, "expects a screenshot") if step.expect_screenshot else None

    def resolve(holder: dict[str, Any]) -> None:
        nonlocal image
        colour = holder.pop("target")["color"]
        if image is None:
            image = _screenshot(step, items, f"aims at colour {colour}")
        point = find_colour(image, parse_colour(colour) or (0, 0, 0))
        if point is None:
            message = f"step {step.index}: colour {colour} is not on the {image.width}x{image.height} screenshot"
            raise _ApiError(400, message, code="target_not_found")
        holder["x"], holder["y"] = point

    for action in actions:
        if isinstance(action, dict) and "target" in action:
            resolve(action)
        if isinstance(action, dict) and action.get("type") == "drag" and isinstance(action.get("path"), list):
            for point in action["path"]:
                if isinstance(point, dict) and "target" in point:
                    resolve(point)
    return actions


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def _message(text: str, phase: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": _new_id("msg"),
        "role": "assistant",
        "status": "completed",
        "phase": phase,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _computer_call(step: Step, actions: list[Any]) -> dict[str, Any]:
    checks = [
        {"id": check.get("id") or _new_id("cu_sc"), "code": check["code"], "message": check["message"]}
        for check in step.safety_checks
    ]
    return {
        "type": "computer_call",
        "id": _new_id("cu"),
        "call_id": _new_id("call"),
        "status": "completed",
        "actions": actions,
        "pending_safety_checks": checks,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread
    block_on_close = True
    model: ScriptedModel


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    server_version = "cud-scripted"
    timeout = 120  # an abandoned keep-alive connection ends on its own
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's
        # algorithm and delayed ACKs add tens of milliseconds to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self.server.model._register(self.connection):
            self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.model._unregister(self.connection)

    def handle_one_request(self) -> None:
        if self.server.model._stopping.is_set():
            self.close_connection = True
            return
        super().handle_one_request()

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        try:
            raw = self._read_body()
            path = urlsplit(self.path).path
            if path != "/v1/responses":
                raise _ApiError(404, f"Invalid URL ({method} {path})", code="unknown_url")
            if method != "POST":
                raise _ApiError(405, f"Method {method} is not allowed on {path}; use POST.", code="method_not_allowed")
            status, body, headers = 200, self.server.model._answer(raw, self.headers), ()
        except _ApiError as exc:
            status, body, headers = exc.status, exc.body, exc.headers
        except Exception:  # a bug here must reach the client as a 500, not a dropped connection
            log.exception("scripted model failed to answer")
            status, body, headers = 500, _ApiError(500, "The scripted model failed; see its log.").body, ()
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", _new_id("req"))
            for name, value in headers:
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (cancelled task, timeout) or we are stopping

    def _read_body(self) -> bytes:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                raise _ApiError(411, "Send the body with a Content-Length.")
            return b""
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True  # the unread body would be taken for the next request
            message = f"Bad Content-Length {length_header!r} (max {MAX_BODY})."
            raise _ApiError(413 if length > MAX_BODY else 400, message)
        return self.rfile.read(length)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
