"""The console's routes: each one is one or a few socket requests, made with the console user's rights.

Nothing here decides who may do what: the daemon's ``[access]`` does, and its
refusal comes back as JSON ``{"error": {"kind", "message", "source": "daemon"}}``
for the page to show. Bad input (a path id that is no number, a body that is
not a JSON object, an action the protocol refuses) is a 4xx naming the value.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import OrderedDict
from typing import Any

from aiohttp import web
from PIL import Image

from cud.budget import describe_cost
from cud.console.link import Link
from cud.console.security import Handler, refusal
from cud.console.watch import Watch
from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client, RemoteError
from cud.cuctl.dial import Dialer
from cud.cuctl.export import fetch_record
from cud.cuctl.tasks import TaskEventWords
from cud.errors import BadRequest, ConsoleRefused, CudError
from cud.phrases.actions import describe_action
from cud.protocol import MAX_ID, SCREENSHOT_FILE_NAME
from cud.record.html import CSP as REPORT_CSP
from cud.record.html import MEDIA_TYPES, render
from cud.record.overlay import svg_overlay
from cud.record.verdict import check_line, verdict_line
from cud.record.video import VIDEO_TYPES, event_moment

__all__ = ("IMAGES", "LINK", "VIDEOS", "WATCH", "routes")

LINK = web.AppKey("link", Link)
WATCH = web.AppKey("watch", Watch)
#: Most tasks shown on the page, newest first (the daemon keeps up to its retention).
MAX_TASKS = 200
# HTTP status for an error kind; anything else the daemon refuses is a conflict with the task's state.
_STATUS = {
    "bad_request": 400, "protocol": 400, "action_rejected": 400, "out_of_bounds": 400, "unknown_key": 400,
    "access_denied": 403, "not_found": 404, "approval": 409, "connection": 502, "display_unavailable": 503,
    "driver_timeout": 504, "storage_full": 507, "too_many_connections": 503,
}


class Images:
    """Trajectory files the page asked for, by (task, name): they never change once written."""

    def __init__(self, link: Link, size: int = 32) -> None:
        self.link, self.size = link, size
        self._kept: OrderedDict[tuple[int, str], bytes] = OrderedDict()

    async def get(self, task_id: int, name: str) -> bytes:
        key = (task_id, name)
        if key not in self._kept:
            self._kept[key] = await _chunks(self.link, "image", id=task_id, name=name)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return self._kept[key]


IMAGES = web.AppKey("images", Images)
#: Finished videos the page played, by task (the newest few: a player asks for many ranges of one).
VIDEOS = web.AppKey("videos", dict[int, tuple[bytes, bool, str]])
KEPT_VIDEOS = 4


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CudError (the daemon's or ours) → JSON the page shows; never a bare 500 for bad input."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return refusal(request, 404, ConsoleRefused(f"no such page: {request.path[:100]!r}"))
    except web.HTTPMethodNotAllowed as exc:
        return refusal(request, 405, ConsoleRefused(f"{request.method} is not allowed on {request.path[:100]!r}; "
                                                    f"use {', '.join(sorted(exc.allowed_methods))}"))
    except CudError as exc:
        source = "daemon" if isinstance(exc, RemoteError) else "console"
        return refusal(request, _STATUS.get(exc.kind, 409), exc, source)


# -- input ------------------------------------------------------------------------------------
def _id(request: web.Request, what: str = "task") -> int:
    raw = request.match_info["id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or not 1 <= int(raw) <= MAX_ID:
        raise BadRequest(f"{what} id must be an integer from 1 to {MAX_ID}, got {raw[:40]!r}", value=raw[:40])
    return int(raw)


async def _body(request: web.Request, *allowed: str) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    if not isinstance(value, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        expected = ", ".join(repr(a) for a in allowed) or "none"
        raise BadRequest(f"unknown field {unknown[0][:40]!r} in the request body; expected {expected}",
                         field=unknown[0][:40])
    return value


async def _chunks(link: Link, kind: str, **fields: Any) -> bytes:
    """A ``screenshot`` or ``image``, joined and checked as ``cuctl screenshot`` does."""
    chunks = Chunks(kind)
    return chunks.join(await link.call(kind, chunks, **fields))


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(value, ensure_ascii=False), content_type="application/json")


# -- reads ------------------------------------------------------------------------------------
routes = web.RouteTableDef()


@routes.get("/api/state")
async def state(request: web.Request) -> web.Response:
    """Who the console acts as, the seats, the tasks (with what each live one does now), pending approvals."""
    link, watch = request.app[LINK], request.app[WATCH]
    me = await link.call("ping")  # unreachable or refused: the whole page says so
    parts = await asyncio.gather(link.call("seats"), link.call("list", limit=MAX_TASKS), link.call("approvals"),
                                 return_exceptions=True)
    out: dict[str, Any] = {"me": me}
    for name, part in zip(("seats", "tasks", "approvals"), parts, strict=True):
        if isinstance(part, CudError):
            out[name], out[f"{name}_error"] = [], part.message
        elif isinstance(part, BaseException):
            raise part
        else:
            out[name] = part
    # In the words cuctl uses, so the page words nothing itself from model data.
    out["approvals"] = [{**a, "words": [describe_action(x, t, 200) for x, t in
                                        zip(a["actions"], a.get("targets") or [None] * len(a["actions"]),
                                            strict=False)]} for a in out["approvals"]]
    tasks = sorted(out["tasks"], key=lambda t: t["id"], reverse=True)
    watch.track(tasks)
    # The cost in words here, by the one formatter cuctl uses too (exact decimals; none in the page's script).
    out["tasks"] = [{**t, "doing": watch.now.get(t["id"]), **_verdict_words(t),
                     "cost_text": describe_cost(t.get("cost")) if t.get("cost") else ""} for t in tasks[:MAX_TASKS]]
    return _json(out)


def _verdict_words(task: dict[str, Any]) -> dict[str, Any]:
    """A judged task's verdict and checks in the words of ``cuctl show`` (the page words none itself)."""
    verdict = task.get("verdict")
    if not verdict:
        return {"verdict_words": None, "check_words": []}
    return {"verdict_words": verdict_line(verdict), "check_words": [check_line(c) for c in verdict.get("checks", [])]}


@routes.get("/api/seats/{seat}/screen.png")
async def screen(request: web.Request) -> web.Response:
    """The seat's screen now (the daemon's ``screenshot``: a peek at the driver, no VNC of our own)."""
    data = await _chunks(request.app[LINK], "screenshot", seat=request.match_info["seat"])
    return web.Response(body=data, content_type="image/png")


def _file_name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not SCREENSHOT_FILE_NAME.fullmatch(name):
        raise BadRequest(f"{name[:60]!r} is not the name of a trajectory file (like step-0001.png)", value=name[:60])
    return name


@routes.get("/api/tasks/{id}/images/{name}")
async def image(request: web.Request) -> web.Response:
    task_id, name = _id(request), _file_name(request)
    data = await request.app[IMAGES].get(task_id, name)
    return web.Response(body=data, content_type=MEDIA_TYPES[name.rsplit(".", 1)[1]],
                        headers={"Cache-Control": "private, max-age=86400, immutable"})


@routes.get("/api/tasks/{id}/video")
async def video(request: web.Request) -> web.Response:
    """The task's video as far as it is recorded (the daemon's ``video``), in byte ranges: a player seeks so."""
    task_id = _id(request)
    kept = request.app[VIDEOS]
    data, complete, media = kept.get(task_id, (b"", False, ""))
    if not complete:  # a finished recording never changes; one still being made is asked for again
        chunks = Chunks("video")
        result = await request.app[LINK].call("video", chunks, id=task_id)
        data, complete, media = chunks.join(result), bool(result["complete"]), VIDEO_TYPES[result["format"]]
        if complete:
            kept[task_id] = (data, complete, media)
            while len(kept) > KEPT_VIDEOS:
                kept.pop(next(iter(kept)))
    headers = {"Accept-Ranges": "bytes", "Cache-Control": "private, max-age=86400" if complete else "no-store"}
    try:
        wanted = request.http_range
    except ValueError:
        raise BadRequest(f"bad Range header {request.headers.get('Range', '')[:60]!r}") from None
    if wanted.start is None and wanted.stop is None:
        return web.Response(body=data, content_type=media, headers=headers)
    start, stop, _ = wanted.indices(len(data))
    if start >= stop:
        return web.Response(status=416, headers={"Content-Range": f"bytes */{len(data)}"})
    headers["Content-Range"] = f"bytes {start}-{stop - 1}/{len(data)}"
    return web.Response(status=206, body=data[start:stop], content_type=media, headers=headers)


@routes.get("/api/approvals/{id}/marks.svg")
async def marks(request: web.Request) -> web.Response:
    """The approval's targets drawn as the report draws them, sized to its screenshot, to lay over it."""
    approval_id = _id(request, "approval")
    pending = await request.app[LINK].call("approvals")
    approval = next((a for a in pending if a["id"] == approval_id), None)
    if approval is None:
        raise CudError(f"approval {approval_id} is not pending", id=approval_id)
    if not approval.get("screenshot"):
        raise CudError(f"approval {approval_id} has no screenshot", id=approval_id)
    data = await request.app[IMAGES].get(approval["task_id"], approval["screenshot"])
    with Image.open(io.BytesIO(data)) as picture:
        width, height = picture.size
    svg = svg_overlay([{"action": a} for a in approval["actions"]], width, height) \
        or f'<svg class="overlay" viewBox="0 0 {width} {height}"></svg>'
    # A document of its own needs the namespace the report's inline SVG gets from HTML.
    svg = svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    return web.Response(text=svg, content_type="image/svg+xml")


@routes.get("/api/tasks/{id}/events")
async def events(request: web.Request) -> web.StreamResponse:
    """The task's events as server-sent events, as ``cuctl follow`` prints them; ``end`` when it ended."""
    task_id, link = _id(request), request.app[LINK]
    await link.call("show", id=task_id)  # an unknown id or a refusal is a plain error, before streaming
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    await response.prepare(request)
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    video_start: list[float] = []  # the recording's first frame, once its event has passed
    words = TaskEventWords()

    def on_event(message: Any) -> None:
        event = message["event"]
        line: dict[str, Any] = {"event": event, "line": words.describe(event)}
        if event["kind"] == "video_started" and isinstance(event["data"].get("start_epoch"), (int, float)):
            video_start[:] = [float(event["data"]["start_epoch"])]
        elif video_start:
            at = event_moment(video_start[0], event)
            if at is not None:
                line["video_t"] = round(at, 3)  # where this step or approval is in the task's video
        queue.put_nowait(("event", line))

    async def follow() -> None:
        try:
            queue.put_nowait(("end", await link.call("follow", on_event, wait_forever=True, id=task_id)))
        except CudError as exc:
            queue.put_nowait(("failure", exc.to_dict()))

    reader = asyncio.create_task(follow())
    try:  # until the task ends, the daemon fails, or the page goes away (then the write fails)
        while True:
            kind, value = await queue.get()
            await response.write(f"event: {kind}\ndata: {json.dumps(value, ensure_ascii=False)}\n\n".encode())
            if kind != "event":
                break
    finally:
        reader.cancel()
    return response


def _record_page(dialer: Dialer, task_id: int) -> bytes:
    """``cuctl report``'s page (blocking: run on a thread; the record may be many screenshots)."""
    with Client(dialer) as client:
        return render(fetch_record(client, task_id)).encode()


@routes.get("/tasks/{id}/report")
async def report(request: web.Request) -> web.Response:
    task_id = _id(request)
    page = await asyncio.to_thread(_record_page, request.app[LINK].dialer, task_id)
    # The report's own policy (inline styles, data: images only), and never framed.
    return web.Response(body=page, content_type="text/html", charset="utf-8",
                        headers={"Content-Security-Policy": f"{REPORT_CSP}; frame-ancestors 'none'"})


# -- actions (POST: the gate checked Origin and the JSON body type) ------------------------------
@routes.post("/api/approvals/{id}/approve")
async def approve(request: web.Request) -> web.Response:
    approval_id = _id(request, "approval")
    await _body(request)
    return _json(await request.app[LINK].call("approve", id=approval_id))


@routes.post("/api/approvals/{id}/deny")
async def deny(request: web.Request) -> web.Response:
    approval_id = _id(request, "approval")
    reason = (await _body(request, "reason")).get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BadRequest(f"'reason' must be a string, got {json.dumps(reason)[:60]}")
    return _json(await request.app[LINK].call("deny", id=approval_id, reason=reason or None))


async def _task_request(request: web.Request, kind: str) -> web.Response:
    task_id = _id(request)
    await _body(request)
    return _json(await request.app[LINK].call(kind, id=task_id))


@routes.post("/api/tasks/{id}/cancel")
async def cancel(request: web.Request) -> web.Response:
    return await _task_request(request, "cancel")


@routes.post("/api/tasks/{id}/pause")
async def pause(request: web.Request) -> web.Response:
    return await _task_request(request, "pause")


@routes.post("/api/tasks/{id}/resume")
async def resume(request: web.Request) -> web.Response:
    return await _task_request(request, "resume")


@routes.post("/api/tasks/{id}/act")
async def act(request: web.Request) -> web.Response:
    """One action of a person on the paused task's seat; the daemon checks it as it checks the model's."""
    task_id = _id(request)
    action = (await _body(request, "action")).get("action")
    if not isinstance(action, dict):
        raise BadRequest(f"'action' must be a JSON object like {{\"type\": \"click\", ...}}, got "
                         f"{json.dumps(action, ensure_ascii=False)[:60]}")
    return _json(await request.app[LINK].call("act", id=task_id, action=action))

