"""The daemon's side of ``responses.create``: one shared client, and a per-task wrapper.

The SDK's loop calls ``client.responses.create(**request)`` once a step with the
whole history. The wrapper a task hands the loop (:class:`ModelRequests`):

* shapes what is sent (:mod:`cud.daemon.model.history`: only the new items in stored
  mode, a budgeted replay otherwise), leaving every check the SDK makes on the
  response to the SDK;
* times the call and meters it: the bytes of every attempt as they leave (an
  httpx request hook, attributed to the task through a context variable), the
  images and image data sent, and the model's ``usage``;
* records each answer the SDK will retry (429, 5xx, ...) as a task event;
* turns the API's refusals that a setting can fix into errors naming the setting.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from cud.daemon.model.history import History, shaper_for
from cud.errors import ModelRequestError
from cud.model_api.image_limits import MAX_IMAGE_BYTES, MAX_IMAGES, image_stats

if TYPE_CHECKING:
    import httpx2

__all__ = ("METER_HOOKS", "ModelRequests", "Sent", "make_client", "metering")

#: Answers the SDK retries (with its exponential back-off), as its _should_retry has them.
_RETRIED = {408, 409, 429}
_SIZE_WORDS = re.compile(r"image|payload|too large|request size|body size", re.IGNORECASE)


@dataclasses.dataclass
class Sent:
    """What one ``responses.create`` call sent, over all of its attempts."""

    bytes: int = 0
    attempts: int = 0
    images: int = 0
    image_bytes: int = 0
    on_retry: Callable[[int, int], None] | None = None  # (status, attempt) of an answer the SDK retries


_METER: contextvars.ContextVar[Sent | None] = contextvars.ContextVar("cud_model_request", default=None)


async def _on_request(request: httpx2.Request) -> None:
    sent = _METER.get()
    if sent is not None:
        length = request.headers.get("content-length")
        sent.bytes += int(length) if length and length.isdigit() else len(request.content)
        sent.attempts += 1


async def _on_response(response: httpx2.Response) -> None:
    sent = _METER.get()
    status = response.status_code
    if sent is not None and sent.on_retry is not None and (status in _RETRIED or status >= 500):
        sent.on_retry(status, sent.attempts)


#: The httpx event hooks that meter every attempt of a request made inside :func:`metering`.
METER_HOOKS: dict[str, list[Callable[..., Any]]] = {"request": [_on_request], "response": [_on_response]}


@contextlib.contextmanager
def metering(sent: Sent) -> Iterator[Sent]:
    """Count the attempts of the requests made inside into ``sent`` (a client built with :data:`METER_HOOKS`)."""
    token = _METER.set(sent)
    try:
        yield sent
    finally:
        _METER.reset(token)


def make_client(api_key: str, base_url: str | None, max_retries: int) -> AsyncOpenAI:
    """The one client every seat shares (its connection pool serves them side by side), metered."""
    http = DefaultAsyncHttpxClient(event_hooks=METER_HOOKS)
    return AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, http_client=http)


class ModelRequests:
    """A task's ``responses.create``: shaped, timed and metered; hooks report to the task's run."""

    def __init__(self, history: History, max_retries: int, *,
                 on_start: Callable[[], None], on_end: Callable[[float, Any, Sent], None],
                 on_retry: Callable[[int, int, bool], None],
                 before: Callable[[], Awaitable[None]] | None = None) -> None:
        self.history = history
        self.max_retries = max_retries
        self._shaper = shaper_for(history)
        self._on_start, self._on_end, self._on_retry = on_start, on_end, on_retry
        #: Awaited before each request goes out (a task's budgets: it may wait for a person, or raise).
        self._before = before

    def wrap(self, client: AsyncOpenAI) -> AsyncOpenAI:
        wrapped = client.with_options()  # a shallow copy sharing the connection pool
        original = wrapped.responses.create

        async def create(**kwargs: Any) -> Any:
            if self._before is not None:
                await self._before()
            items = kwargs["input"]
            send, extra = self._shaper.request(items)
            images, image_data = image_stats(send)
            sent = Sent(images=images, image_bytes=image_data,
                        on_retry=lambda status, attempt: self._on_retry(status, attempt, attempt <= self.max_retries))
            token = _METER.set(sent)
            self._on_start()
            started, response = time.monotonic(), None
            try:
                response = await original(**{**kwargs, **extra, "input": send})
            except openai.APIStatusError as exc:
                explained = self._explain(exc, sent, extra)
                if explained is None:
                    raise
                raise explained from exc
            finally:
                _METER.reset(token)
                self._on_end((time.monotonic() - started) * 1000, response, sent)
            self._shaper.accepted(items, response)
            return response

        wrapped.responses.create = create  # type: ignore[method-assign]  # this client's create, wrapped
        return wrapped

    def _explain(self, exc: openai.APIStatusError, sent: Sent, extra: dict[str, Any]) -> ModelRequestError | None:
        """A ModelRequestError naming the setting for a refusal a setting fixes; None for any other."""
        status, body = exc.status_code, exc.body if isinstance(exc.body, dict) else {}
        nested = body.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else body
        message = str(error.get("message") or exc.message)
        param, code = error.get("param"), error.get("code")
        said = f"HTTP {status}: {message}"
        previous = extra.get("previous_response_id")
        if previous is not None and status in (400, 404, 422) and (
                param == "previous_response_id" or code == "previous_response_not_found"
                or "previous_response" in message.lower() or "previous response" in message.lower()):
            return ModelRequestError(
                f"the model server refused to continue response {previous!r} ({said}); cud continues stored "
                "responses because config key 'history.mode' is 'stored' (the default). For a server that "
                "cannot continue stored responses, set [history] mode = \"replay\" (with [request] store = false "
                "for zero data retention)",
                setting="history.mode", status=status, previous_response_id=previous)
        over = sent.images > MAX_IMAGES or sent.image_bytes > MAX_IMAGE_BYTES
        if status in (400, 413) and (over or _SIZE_WORDS.search(message)):
            carried = f"{sent.images} image(s), {sent.image_bytes / 1e6:.1f} MB of image data"
            limits = f"the API allows {MAX_IMAGES} images and {MAX_IMAGE_BYTES / 1e6:.0f} MB of images per request"
            if self.history.mode == "replay":
                fix = (f"lower config key 'history.keep_screenshots' (now {self.history.keep_screenshots}), "
                       f"'history.max_image_bytes' (now {self.history.max_image_bytes}) or 'history.max_images' "
                       f"(now {self.history.max_images}), or use history.mode = \"stored\"")
                setting = "history.max_image_bytes"
            else:
                fix = "in stored mode a request carries one step's screenshots: shrink the screen or the batch"
                setting = "history.mode"
            return ModelRequestError(
                f"the model server refused a request of {sent.bytes} bytes ({carried}) ({said}); {limits}: {fix}",
                setting=setting, status=status, images=sent.images, image_bytes=sent.image_bytes)
        return None
