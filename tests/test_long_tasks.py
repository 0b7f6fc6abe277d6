"""Long tasks (#20): 100 steps against the scripted model with the API's per-request limits on.

The screen is busy on purpose: a patch of noise (about 0.8 MB a screenshot) next to the
window typed into, so a history replayed in full would pass the API's 50 MB of images
near step 60 and the limits are really in play; both tests check that it does. Each step
types one character of a seeded random text; the window must hold exactly that text at the end.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from Xlib import X
from Xlib import display as xdisplay

from cud.daemon.model.history import PLACEHOLDER
from cud.model_api.image_limits import MAX_IMAGE_BYTES, image_bytes, image_urls
from tests.support.daemon import Daemon, scenario
from tests.support.recorder import Recorder
from tests.support.vnc import VncServer, start_x11vnc

STEPS = 100
NOISE = (640, 400)  # at the top left; the typing window takes the bottom right
#: Random bytes do not compress: no PNG of the screen is smaller than the noise's own bytes.
LEAST_SCREENSHOT_BYTES = NOISE[0] * NOISE[1] * 3
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?-+=/()"
REPLAY = """
[request]
store = false
[history]
keep_screenshots = 6
"""


@pytest.fixture
def busy_screen(xvfb: Any, tmp_path: Path) -> Iterator[Recorder]:
    """Noise on the root window at the top left, and a small typing window at the bottom right."""
    seed = random.randrange(2**32)
    print(f"noise seed {seed}")
    rng = random.Random(seed)
    conn = xdisplay.Display(xvfb.display)
    screen = conn.screen()
    width, height = NOISE
    pixmap = screen.root.create_pixmap(width, height, screen.root_depth)
    gc = pixmap.create_gc()
    rows = 32  # one PutImage stays under the core protocol's request size
    for top in range(0, height, rows):
        pixmap.put_image(gc, 0, top, width, rows, X.ZPixmap, screen.root_depth, 0, rng.randbytes(width * rows * 4))
    screen.root.change_attributes(background_pixmap=pixmap)
    screen.root.clear_area(0, 0, 0, 0)
    conn.sync()
    rec = Recorder(xvfb.display, tmp_path, f"{xvfb.width - width}x{xvfb.height - height}+{width}+{height}")
    try:
        yield rec
    finally:
        rec.stop()
        conn.close()


def _typing_task(seed: int) -> tuple[str, dict[str, Any]]:
    rng = random.Random(seed)
    text = "".join(rng.choice(ALPHABET) for _ in range(STEPS))
    steps = [{"actions": [{"type": "click", "button": "left", "x": 1000, "y": 600}, {"type": "type", "text": text[0]}]}]
    steps += [{"actions": [{"type": "type", "text": char}]} for char in text[1:]]
    return text, scenario(*steps, {"message": "typed it all"})


@pytest.fixture
def x11vnc(busy_screen: Recorder, tmp_path: Path) -> Iterator[Callable[[], VncServer]]:
    """Starts x11vnc on the busy screen when called; stops it by pid however the test ends."""
    started: list[VncServer] = []

    def start() -> VncServer:
        started.append(start_x11vnc(busy_screen.display, tmp_path))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def _run(start_daemon: Any, busy_screen: Recorder, x11vnc: Callable[[], VncServer], tmp_path: Path, *,
         config: str | None, vnc: bool) -> tuple[Daemon, dict[str, Any], str]:
    seed = random.randrange(2**32)
    print(f"text seed {seed}")
    text, plan = _typing_task(seed)
    options: dict[str, Any] = {"max_steps": STEPS + 5, "config": config}
    if vnc:
        options["vnc"] = (x11vnc().server, tmp_path / "x11vnc.passwd")
    daemon = start_daemon(plan, model_options={"record": True}, **options)
    task_id = daemon.call("submit", prompt="type the text")["id"]
    task = daemon.wait_state(task_id, "succeeded", "failed", timeout=600)
    assert task["state"] == "succeeded", task
    busy_screen.wait_text(text)
    return daemon, task, text


def _assert_busy(sizes: list[int]) -> None:
    """The screenshots are as large as the docstring says: the limits are in play, not passed by a blank screen."""
    assert min(sizes) >= LEAST_SCREENSHOT_BYTES, f"a screenshot of {min(sizes)} bytes: the noise is not on the screen"
    assert sum(sizes) > MAX_IMAGE_BYTES, f"{sum(sizes)} bytes of screenshots would fit one request whole"


@pytest.mark.parametrize("vnc", [False, True], ids=["x11", "vnc"])
def test_100_steps_stored_send_every_screenshot_once(start_daemon, busy_screen: Recorder, x11vnc: Any,
                                                    tmp_path: Path, vnc: bool) -> None:
    daemon, task, _ = _run(start_daemon, busy_screen, x11vnc, tmp_path, config=None, vnc=vnc)
    model = daemon.model  # type: ignore[attr-defined]
    requests = model.requests
    assert len(requests) == STEPS + 2  # the first look, a step per character, the last screenshot's turn
    assert "previous_response_id" not in requests[0]
    for body in requests[1:]:  # each continues the previous response with only its new screenshot
        assert body["previous_response_id"] and [i["type"] for i in body["input"]] == ["computer_call_output"]
    # Request k carries step k's screenshot, the one the daemon kept, and nothing else: every
    # screenshot travels once (two steps may look alike, so this is by step, not by content).
    kept = sorted((daemon.state_dir / "trajectories" / str(task["id"])).iterdir())
    assert len(kept) == STEPS + 1
    _assert_busy([path.stat().st_size for path in kept])
    for body, path in zip(requests[1:], kept, strict=True):
        (url,) = image_urls(body["input"])
        assert base64.b64decode(url.split(",", 1)[1]) == path.read_bytes(), f"request for {path.name}"
    assert sum(model.image_sends.values()) == STEPS + 1
    screenshots = sum(len(url) for body in requests for url in image_urls(body["input"]))
    assert sum(model.request_bytes) <= 1.1 * screenshots
    # The daemon's own count is the server's, to the byte.
    usage = task["usage"]
    assert usage["requests"] == len(requests) and usage["request_bytes"] == sum(model.request_bytes)
    assert usage["images"] == STEPS + 1 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    steps = [e["data"] for e in daemon.events(task["id"]) if e["kind"] == "step"]
    assert sum(s["request_bytes"] for s in steps) == usage["request_bytes"]
    assert [s["images"] for s in steps] == [0] + [1] * (len(steps) - 1)


@pytest.mark.parametrize("vnc", [False, True], ids=["x11", "vnc"])
def test_100_steps_replayed_stay_under_the_budget(start_daemon, busy_screen: Recorder, x11vnc: Any,
                                                 tmp_path: Path, vnc: bool) -> None:
    daemon, task, _ = _run(start_daemon, busy_screen, x11vnc, tmp_path, config=REPLAY, vnc=vnc)
    model = daemon.model  # type: ignore[attr-defined]
    requests = model.requests
    assert len(requests) == STEPS + 2
    # Each step's screenshot, as it first travelled (the newest of a request is always whole).
    _assert_busy([image_bytes(list(image_urls(body["input"]))[-1]) for body in requests[1:]])
    for number, body in enumerate(requests):
        assert "previous_response_id" not in body and body["store"] is False
        urls = list(image_urls(body["input"]))
        full = [u for u in urls if u != PLACEHOLDER]
        assert len(full) == min(6, number)  # the newest six in full, the rest placeholders
        assert len(urls) == number  # every step is still there
        if len(full) < len(urls):
            notes = [i for i in body["input"] if i.get("role") == "user" and "placeholder" in str(i.get("content"))]
            assert len(notes) == 1
    assert max(count for count, _ in model.images) <= 400
    assert max(data for _, data in model.images) <= 40_000_000
    assert task["usage"]["images"] == sum(count for count, _ in model.images)
