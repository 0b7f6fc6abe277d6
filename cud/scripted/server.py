"""A loopback HTTP server that answers ``POST /v1/responses`` from a scenario.

It speaks just enough of the Responses API for the openai SDK's computer loop:
non-streaming responses with ``computer_call`` items (GA batched ``actions``) and
assistant ``message`` items, OpenAI-style error bodies, and the checks the real
API makes on a request (a model, exactly one ``{"type": "computer"}`` tool, an
``input`` list, every ``computer_call_output`` answering a call with its safety
checks acknowledged), the per-request image limits (500 images, 50 MB of image
data), and stored responses continued by ``previous_response_id`` (see
:mod:`cud.scripted.chain`). A request is answered from its input and the response
it continues (see :mod:`cud.scripted.scenario`).

The Authorization header must be present (any key) and is never recorded or logged.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from cud.model_api.image_limits import MAX_IMAGE_BYTES, MAX_IMAGES, image_stats, image_urls
from cud.scripted.answer import (
    ApiError,
    aim,
    answered_call,
    attempt_number,
    check_outputs,
    computer_call,
    message_item,
    new_id,
    not_chat_only,
    pick,
    validate,
    waiting,
)
from cud.scripted.chain import (
    IMAGE_TOKENS,
    CallTurns,
    ChainError,
    Chains,
    Context,
    Stored,
    compaction_item,
    compaction_threshold,
)
from cud.scripted.scenario import Scenario, Step, load_scenario, parse_scenario

__all__ = ["MODEL_PREFIX", "ScriptedModel"]

log = logging.getLogger("cud.scripted")

#: A replayed history re-sends earlier screenshots, so bodies grow; this bounds them (far
#: past the API's 50 MB of images, so a client over that limit hears the API's 400).
MAX_BODY = 256 * 1024 * 1024
#: A request whose model is this plus a name plays that scenario (``ScriptedModel(scenarios=...)``).
MODEL_PREFIX = "scripted:"
#: The context's tokens after a compaction: what the compaction item stands for.
COMPACTED_TOKENS = 200
class ScriptedModel:
    """Serve ``scenario`` on 127.0.0.1; ``start()`` returns the base URL to give the SDK.

    ``scenario`` is a :class:`Scenario`, a decoded scenario dict, a file path or the
    name of a bundled scenario. ``latency`` is added before every answer. Usable as a
    context manager; ``requests`` lists the decoded request bodies received so far
    (each carries every earlier screenshot, so a long-lived server passes
    ``record=False``); ``request_bytes`` the size of each, counted even then.
    """

    #: The one endpoint served (the Messages server serves its own, cud.scripted.messages).
    PATH = "/v1/responses"

    def __init__(
        self,
        scenario: Scenario | dict[str, Any] | str | os.PathLike[str],
        *,
        scenarios: Mapping[str, Scenario | dict[str, Any]] | None = None,
        latency: float = 0.0,
        record: bool = True,
        keep_responses: bool = True,
        max_images: int = MAX_IMAGES,
        max_image_bytes: int = MAX_IMAGE_BYTES,
    ) -> None:
        if isinstance(scenario, Scenario):
            self.scenario = scenario
        elif isinstance(scenario, dict):
            self.scenario = parse_scenario(scenario)
        else:
            self.scenario = load_scenario(scenario)
        #: Played instead of ``scenario`` for a request whose model is ``scripted:NAME`` (see :meth:`scenario_for`).
        self.scenarios = {name: s if isinstance(s, Scenario) else parse_scenario(s, source=f"scenario {name!r}")
                          for name, s in (scenarios or {}).items()}
        self.latency = latency
        self.record = record
        #: False plays an OpenAI-compatible server that cannot continue a stored response.
        self.keep_responses = keep_responses
        #: The API's per-request image limits, lower for a test of what happens past them.
        self.max_images, self.max_image_bytes = max_images, max_image_bytes
        self._lock = threading.Lock()
        self._requests: list[Any] = []
        self._sizes: list[int] = []
        self._answer_seconds: list[float] = []
        self._images: list[tuple[int, int]] = []
        self._image_sends: collections.Counter[str] = collections.Counter()
        self._chains = Chains()
        self._call_turns = CallTurns()
        #: The waits a waiting step answered so far, by the call of the last one.
        self._waits = CallTurns()
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
    def answer_seconds(self) -> list[float]:
        """For every request answered, in order: seconds from its headers read to its answer written (the
        latency and this server's own work): the model's part of a client's round, as the bench splits it."""
        with self._lock:
            return list(self._answer_seconds)

    @property
    def request_bytes(self) -> list[int]:
        """The length of every ``POST /v1/responses`` body as read off the socket, in arrival order.

        Counted before anything is parsed, so a body the server then refuses counts too.
        """
        with self._lock:
            return list(self._sizes)

    @property
    def images(self) -> list[tuple[int, int]]:
        """(images, image bytes) of every request that parsed, in arrival order, counted even unrecorded."""
        with self._lock:
            return list(self._images)

    @property
    def image_sends(self) -> dict[str, int]:
        """How many requests carried each image, by the SHA-1 of its URL."""
        with self._lock:
            return dict(self._image_sends)

    @property
    def stored_responses(self) -> int:
        return len(self._chains)

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
    def _received(self, raw: bytes, headers: Any, *, x_api_key: bool = False) -> Any:
        """How every API served here takes a request: its size counted; without a key (a bearer token, or with
        ``x_api_key`` Anthropic's header too; any key will do) an HTTP 401; its JSON body parsed and recorded;
        then held back by the server's latency. The key itself is never kept."""
        with self._lock:
            self._sizes.append(len(raw))
        auth = headers.get("Authorization") or ""
        keyed = (auth.startswith("Bearer ") and auth[7:].strip()) or (x_api_key and (headers.get("x-api-key") or "").strip())
        if not keyed:
            needed = "an x-api-key or a bearer Authorization header" if x_api_key else "a bearer Authorization header"
            raise ApiError(401, f"Missing {needed}; any API key will do.", code="invalid_api_key")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "We could not parse the JSON body of your request.") from None
        if self.record:
            with self._lock:
                self._requests.append(body)
        self._stopping.wait(self.latency)
        return body

    def _answer(self, raw: bytes, headers: Any) -> dict[str, Any]:
        body = self._received(raw, headers)
        items = validate(body)
        try:
            context = self._chains.context(body.get("previous_response_id"))
        except ChainError as exc:
            raise ApiError(400, str(exc), code=exc.code, param=exc.param) from None
        images, image_data = self._count_images(items)
        check_outputs(items, context.calls)
        turn_number = self._turn(items, context)
        attempt = attempt_number(headers.get("x-stainless-retry-count"))
        scenario = self.scenario_for(body["model"])
        turns = scenario.turns
        if turn_number >= len(turns):
            message = f"scenario {scenario.name!r} has {len(turns)} turns; turn {turn_number} is past its end"
            raise ApiError(400, message, code="scenario_exhausted")
        step = pick(turns[turn_number].transient, turns[turn_number].step, attempt)
        log.info("turn %d attempt %d: step %d (%s)", turn_number, attempt, step.index, step.kind)
        not_chat_only(step)
        self._stopping.wait(step.delay)
        if step.kind == "error":
            assert step.http_error is not None
            message = f"scripted HTTP {step.http_error} at step {step.index}"
            raise ApiError(step.http_error, message, body=step.body, headers=step.headers)
        # Tokens: the text at 4 bytes a token, each image at a flat rate; a continued
        # response's context is the chain's, and the API's prompt cache holds it.
        new_tokens = max(0, len(raw) - image_data * 4 // 3) // 4 + IMAGE_TOKENS * images
        tokens_in, cached = context.tokens + new_tokens, context.tokens
        # A step that waits answers its turn with a wait, and the next request asks for the same turn again.
        waits = 0
        if step.kind == "call" and waiting(step, items):
            assert step.until is not None
            waits = (self._waits.get(answered_call(items)) or 0) + 1
            if waits > step.until[1]:
                raise ApiError(400, f"step {step.index}: colour {step.until[0]} did not show in {step.until[1]} "
                                    f"screenshots", code="until_not_met")
            step = Step(step.index, "call", actions=[{"type": "wait"}])
        turn_done = turn_number if waits else turn_number + 1
        output: list[dict[str, Any]] = []
        threshold = compaction_threshold(body)
        compacted = threshold is not None and tokens_in > threshold
        if compacted:
            output.append(compaction_item(new_id("cmp"), new_id("summary")))
        if step.message is not None:
            output.append(message_item(step.message, "commentary" if step.kind == "call" else "final_answer"))
        calls: dict[str, tuple[str, ...]] = {}
        if step.kind == "call":
            call = computer_call(step, aim(step, items))
            output.append(call)
            calls[call["call_id"]] = tuple(check["id"] for check in call["pending_safety_checks"])
            self._call_turns.add(call["call_id"], turn_done - 1)
            if waits:
                self._waits.add(call["call_id"], waits)
        tokens_out = 20 * len(output)
        response_id = new_id("resp")
        stored = body.get("store", True) is not False
        if stored and self.keep_responses:
            context_after = (COMPACTED_TOKENS if compacted else tokens_in) + tokens_out
            self._chains.keep(response_id, Stored(turns=turn_done, calls=calls, context_tokens=context_after))
        now = int(time.time())
        return {
            "id": response_id,
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
            "previous_response_id": body.get("previous_response_id"),
            "store": stored,
            "temperature": 1.0,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body["tools"],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": tokens_in,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                "output_tokens": tokens_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens_in + tokens_out,
            },
        }

    def scenario_for(self, model: str) -> Scenario:
        """The scenario a request plays: ``scripted:NAME`` picks ``scenarios[NAME]`` (an unknown NAME is the
        API's 400 for an unknown model), any other model name the default one. Each request names its model,
        so the runs of several tasks, each with its own scenario, interleave on one server."""
        if not model.startswith(MODEL_PREFIX):
            return self.scenario
        name = model.removeprefix(MODEL_PREFIX)
        if name not in self.scenarios:
            known = ", ".join(sorted(self.scenarios)) or "none"
            raise ApiError(400, f"The model {model!r} does not exist: this scripted model has no scenario {name!r} "
                                f"(it has: {known})", param="model", code="model_not_found")
        return self.scenarios[name]

    def _count_images(self, items: list[dict[str, Any]]) -> tuple[int, int]:
        """Count the request's images (each by its digest too) and refuse it past the API's limits."""
        digests = [hashlib.sha1(url.encode()).hexdigest() for url in image_urls(items)]
        images, data = image_stats(items)
        with self._lock:
            self._images.append((images, data))
            self._image_sends.update(digests)
        if images > self.max_images:
            raise ApiError(400, f"Invalid 'input': this request has {images} images, but at most "
                            f"{self.max_images} images are allowed per request.", param="input",
                            code="too_many_images")
        if data > self.max_image_bytes:
            raise ApiError(400, f"Invalid 'input': this request has {data} bytes of images, but at most "
                            f"{self.max_image_bytes} bytes of images are allowed per request.", param="input",
                            code="image_payload_too_large")
        return images, data

    def _turn(self, items: list[dict[str, Any]], context: Context) -> int:
        """The turn a request asks for: one past the call it answers last, else by counting."""
        known = self._call_turns.get(answered_call(items))
        outputs = [item for item in items if item.get("type") == "computer_call_output"]
        return known + 1 if known is not None else context.turns + len(outputs)


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
        started = time.monotonic()
        try:
            raw = self._read_body()
            path = urlsplit(self.path).path
            if path != self.server.model.PATH:
                raise ApiError(404, f"Invalid URL ({method} {path})", code="unknown_url")
            if method != "POST":
                raise ApiError(405, f"Method {method} is not allowed on {path}; use POST.", code="method_not_allowed")
            headers: tuple[tuple[str, str], ...] = ()
            status, body = 200, self.server.model._answer(raw, self.headers)
        except ApiError as exc:
            status, body, headers = exc.status, exc.body, exc.headers
        except Exception:  # a bug here must reach the client as a 500, not a dropped connection
            log.exception("scripted model failed to answer")
            status, body, headers = 500, ApiError(500, "The scripted model failed; see its log.").body, ()
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", new_id("req"))
            for name, value in headers:
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (cancelled task, timeout) or we are stopping
        else:
            if status == 200:
                with self.server.model._lock:
                    self.server.model._answer_seconds.append(time.monotonic() - started)

    def _read_body(self) -> bytes:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                raise ApiError(411, "Send the body with a Content-Length.")
            return b""
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True  # the unread body would be taken for the next request
            message = f"Bad Content-Length {length_header!r} (max {MAX_BODY})."
            raise ApiError(413 if length > MAX_BODY else 400, message)
        return self.rfile.read(length)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
