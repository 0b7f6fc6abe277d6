"""What of a history travels (#20): the [history] table, the two shapers on random histories,
and the daemon's errors when the model server refuses a request a setting can fix."""

from __future__ import annotations

import base64
import copy
import json
import random
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest

from cud.daemon.config import load_config
from cud.daemon.model.history import PLACEHOLDER, PLACEHOLDER_BYTES, History, ReplayHistory, StoredHistory, load_history
from cud.errors import ConfigError
from cud.model_api.image_limits import image_bytes, image_stats, image_urls
from tests.support.daemon import cuctl, scenario

# -- the [history] table ----------------------------------------------------------------------


def test_the_mode_follows_store_unless_set() -> None:
    assert load_history({}, {}).mode == "stored"
    assert load_history({}, {"store": False}).mode == "replay"
    assert load_history({"mode": "replay"}, {}).mode == "replay"


@pytest.mark.parametrize(("table", "request_", "named"), [
    ({"mode": "stored"}, {"store": False}, "'history.mode'"),
    ({"mode": "both"}, {}, "'history.mode'"),
    ({"mode": 1}, {}, "'history.mode'"),
    ({"keep_screenshots": 0}, {}, "'history.keep_screenshots'"),
    ({"keep_screenshots": 501}, {}, "'history.keep_screenshots'"),
    ({"keep_screenshots": True}, {}, "'history.keep_screenshots'"),
    ({"keep_screenshots": 2.5}, {}, "'history.keep_screenshots'"),
    ({"max_images": 501}, {}, "'history.max_images'"),
    ({"max_image_bytes": 50_000_001}, {}, "'history.max_image_bytes'"),
    ({"max_image_bytes": "40MB"}, {}, "'history.max_image_bytes'"),
    ({"keep_screenshots": 20, "max_images": 10}, {}, "'history.keep_screenshots'"),
    ({"keep": 3}, {}, "'history.keep'"),
])
def test_a_bad_history_table_is_refused_naming_the_key(table: dict[str, Any], request_: dict[str, Any],
                                                       named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_history(table, request_)
    assert named in str(caught.value)


def test_the_config_file_reads_history_and_retries(tmp_path: Any) -> None:
    path = tmp_path / "cud.toml"
    path.write_text("max_retries = 0\n[request]\nstore = false\n[history]\nkeep_screenshots = 3\n")
    config = load_config(path, {"display": ":1", "socket": str(tmp_path / "s")}, env={})
    assert config.history == History(mode="replay", keep_screenshots=3) and config.max_retries == 0
    path.write_text("max_retries = 11\n")
    with pytest.raises(ConfigError, match="'max_retries'"):
        load_config(path, {"display": ":1", "socket": str(tmp_path / "s")}, env={})


# -- the shapers, on histories grown the way the SDK's loop grows them ---------------------------


class Sent(NamedTuple):
    items: list[Any]
    extra: dict[str, Any]
    handed: int  # screenshots in the history the shaper was handed


def _shot(rng: random.Random, size: int) -> str:
    return "data:image/png;base64," + base64.b64encode(rng.randbytes(size)).decode()


def _grow(shaper: Any, rng: random.Random, steps: int, sizes: tuple[int, int]) -> list[Sent]:
    """Drive ``shaper`` like AsyncComputerToolset.run drives responses.create; return what each request sent."""
    history: list[Any] = [{"role": "user", "content": "the task"}]
    sent = []
    for step in range(steps):
        # The screenshots the shaper is handed (before it leaves any step out): placeholders are image data too.
        handed = sum(1 for _ in image_urls(history))
        items, extra = shaper.request(history)
        sent.append(Sent(copy.deepcopy(items), dict(extra), handed))  # as serialised then: later steps edit in place
        call_id = f"call_{step}"
        output = [SimpleNamespace(id=f"rs_{step}"), SimpleNamespace(id=f"cu_{step}")]
        shaper.accepted(history, SimpleNamespace(id=f"resp_{step}", output=output))
        if rng.random() < 0.3:
            history.append({"type": "message", "id": f"msg_{step}", "role": "assistant", "content": []})
        history.append({"type": "reasoning", "id": f"rs_{step}", "summary": []})
        history.append({"type": "computer_call", "id": f"cu_{step}", "call_id": call_id, "actions": []})
        history.append({"type": "computer_call_output", "call_id": call_id,
                        "output": {"type": "computer_screenshot", "image_url": _shot(rng, rng.randint(*sizes))}})
    return sent


def _newest_that_fit(sizes: list[int], handed: int, history: History) -> int:
    """How many of the newest screenshots (``sizes``, oldest first) fit whole: at most ``keep_screenshots``, and
    their bytes with a placeholder's for every screenshot handed over within ``max_image_bytes``; the newest
    always. The shaper must send at least these in full, whatever else it keeps."""
    count, budget = 0, history.max_image_bytes - handed * PLACEHOLDER_BYTES
    for size in reversed(sizes):
        if count and (count == history.keep_screenshots or size > budget):
            break
        count, budget = count + 1, budget - size
    return count


@pytest.mark.parametrize("seed", range(40))
def test_replayed_requests_keep_the_budget_on_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    history = History(mode="replay", keep_screenshots=rng.randint(1, 12), max_images=rng.randint(12, 40),
                      max_image_bytes=rng.randint(20_000, 400_000))
    sent = _grow(ReplayHistory(history), rng, rng.randint(1, 120), (1_000, 60_000))
    originals: dict[str, str] = {}  # each screenshot as taken (the newest always travels whole), by its call
    for number, (items, extra, handed) in enumerate(sent):
        assert extra == {}
        outputs = [i for i in items if i.get("type") == "computer_call_output"]
        for output in outputs:
            originals.setdefault(output["call_id"], output["output"]["image_url"])
        urls = list(image_urls(items))
        full = [u for u in urls if u != PLACEHOLDER]
        count, data = image_stats(items)
        assert count <= history.max_images
        # Every screenshot that fits is whole; only a newest one alone may pass the byte budget.
        assert len(full) <= history.keep_screenshots
        assert data <= history.max_image_bytes or len(full) == 1
        # And the newest that fit are all whole (a shaper that keeps too few fails here): a run of them at
        # the end, each exactly as taken.
        newest = _newest_that_fit([image_bytes(originals[o["call_id"]]) for o in outputs], handed, history)
        assert all(o["output"]["image_url"] == originals[o["call_id"]] for o in outputs[len(outputs) - newest:]), (
            f"request {number}: the newest {newest} screenshots fit but were not all sent whole")
        if newest == history.keep_screenshots:  # the count binds: exactly the newest keep_screenshots
            assert urls[-newest:] == full
        if urls:
            assert urls[-1] != PLACEHOLDER  # the newest screen always travels
        # Whole steps only: every output has its call, and nothing before the prompt.
        calls = {i["call_id"] for i in items if i.get("type") == "computer_call"}
        assert all(i["call_id"] in calls for i in items if i.get("type") == "computer_call_output")
        assert items[0] == {"role": "user", "content": "the task"}
        if PLACEHOLDER in urls or len(urls) < number:
            assert sum("placeholder" in str(i.get("content")) for i in items) == 1


@pytest.mark.parametrize("seed", range(10))
def test_stored_requests_carry_only_what_is_new(seed: int) -> None:
    rng = random.Random(seed)
    shaper = StoredHistory()
    sent = _grow(shaper, rng, rng.randint(2, 60), (100, 5_000))
    assert sent[0][:2] == ([{"role": "user", "content": "the task"}], {})
    for step, (items, extra, _) in enumerate(sent[1:]):
        assert extra == {"previous_response_id": f"resp_{step}"}
        assert [i["type"] for i in items] == ["computer_call_output"] and items[0]["call_id"] == f"call_{step}"


def test_compaction_drops_what_it_supersedes() -> None:
    shaper = ReplayHistory(History(mode="replay"))
    history: list[Any] = [{"role": "user", "content": "p"}, {"type": "computer_call", "call_id": "a"},
                          {"type": "computer_call_output", "call_id": "a", "output": {"image_url": PLACEHOLDER}},
                          {"type": "compaction", "id": "cmp_1", "encrypted_content": "x"},
                          {"type": "computer_call", "call_id": "b"},
                          {"type": "computer_call_output", "call_id": "b", "output": {"image_url": PLACEHOLDER}}]
    items, _ = shaper.request(history)
    assert [i.get("call_id") or i.get("type") for i in items] == ["compaction", "b", "b"]


def test_image_bytes_are_the_decoded_size() -> None:
    for size in range(0, 40):
        data = bytes(range(size))
        assert image_bytes("data:image/png;base64," + base64.b64encode(data).decode()) == size
    assert image_bytes("https://example.invalid/x.png") == 0


# -- the daemon, against a model server that refuses ----------------------------------------------


def test_a_server_that_cannot_continue_fails_the_task_naming_the_setting(start_daemon) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}]}, {"message": "done"}),
                          model_options={"keep_responses": False})
    task_id = daemon.call("submit", prompt="continue me")["id"]
    task = daemon.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "model_request"
    assert "history.mode" in task["error"]["message"] and "replay" in task["error"]["message"]
    assert "not found" in task["error"]["message"]
    # Refused once, never silently re-sent whole.
    requests = daemon.model.requests
    assert len(requests) == 2 and "previous_response_id" in requests[1]


def test_a_request_over_the_image_limit_fails_naming_the_limit_and_setting(start_daemon) -> None:
    # A server whose image limit is below the daemon's budget: what a too-large request meets.
    daemon = start_daemon(scenario(*[{"actions": [{"type": "wait"}]}] * 4, {"message": "done"}),
                          config="[request]\nstore = false\n", model_options={"max_image_bytes": 1})
    task = daemon.wait_state(daemon.call("submit", prompt="big")["id"], "failed")
    message = task["error"]["message"]
    assert task["error"]["kind"] == "model_request" and "'history.max_image_bytes'" in message
    assert "500 images and 50 MB" in message


def test_retried_answers_are_events_and_max_retries_bounds_them(start_daemon) -> None:
    busy = {"http_error": 429, "headers": {"retry-after-ms": "5"}, "times": 2}
    daemon = start_daemon(scenario(busy, {"actions": [{"type": "wait"}]}, {"message": "done"}, look_first=False))
    task_id = daemon.call("submit", prompt="retry")["id"]
    assert daemon.wait_state(task_id, "succeeded")["usage"]["requests"] == 4  # 2 refused + 2 answered
    retries = [e["data"] for e in daemon.events(task_id) if e["kind"] == "model_retry"]
    assert [(r["status"], r["attempt"], r["retrying"]) for r in retries] == [(429, 1, True), (429, 2, True)]

    once = start_daemon(scenario(busy, {"message": "done"}, look_first=False), config="max_retries = 0\n")
    task_id = once.call("submit", prompt="no retry")["id"]
    task = once.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "api" and task["error"]["details"] == {"status": 429}
    retries = [e["data"] for e in once.events(task_id) if e["kind"] == "model_retry"]
    assert [(r["status"], r["attempt"], r["retrying"]) for r in retries] == [(429, 1, False)]


def test_replay_with_compaction_sends_nothing_it_superseded(start_daemon) -> None:
    config = """
[request]
store = false
context_management = [{ type = "compaction", compact_threshold = 3000 }]
"""
    daemon = start_daemon(scenario(*[{"actions": [{"type": "wait"}]}] * 8, {"message": "done"}), config=config)
    task_id = daemon.call("submit", prompt="compact me", repeat_limit=0)["id"]  # 8 waits on a still screen
    assert daemon.wait_state(task_id, "succeeded")["state"] == "succeeded"
    requests = daemon.model.requests
    seen: set[str] = set()
    newest, compactions = None, 0
    for body in requests:
        ids = [i["id"] for i in body["input"] if i.get("type") == "compaction"]
        calls = {i["call_id"] for i in body["input"] if "call_id" in i}
        if ids:
            # Only the newest compaction item travels, first: the prompt and the steps before it are gone.
            assert len(ids) == 1 and body["input"][0]["type"] == "compaction"
            if ids[0] != newest:
                assert not calls & seen, "a step the compaction superseded was sent again"
                newest, compactions = ids[0], compactions + 1
        seen |= calls
    assert compactions >= 2


def test_usage_is_shown_by_show_follow_the_report_and_export(start_daemon, tmp_path: Any) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}]}, {"message": "done"}))
    task_id = daemon.call("submit", prompt="count me")["id"]
    usage = daemon.wait_state(task_id, "succeeded")["usage"]
    assert usage["requests"] == 3 and usage["images"] == 2
    sent = f"{usage['input_tokens']:,} in ({usage['cached_tokens']:,} cached), {usage['output_tokens']:,} out"
    shown = cuctl(daemon.socket, "show", str(task_id)).stdout
    assert "model usage:" in shown and "3 requests (2 images" in shown and sent in shown
    followed = [line for line in cuctl(daemon.socket, "follow", str(task_id)).stdout.splitlines() if " done in " in line]
    assert len(followed) == 3 and "1 request (0 images" in followed[0] and "1 request (1 image," in followed[1]
    page = tmp_path / "report.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "Model usage" in html and sent in html and html.count("1 request (") == 3
    exported = tmp_path / "export"
    assert cuctl(daemon.socket, "export", str(task_id), "-o", str(exported)).returncode == 0
    assert json.loads((exported / "task.json").read_text())["usage"] == usage
