"""What an Anthropic task sends each step: the held history against the deep-copy shaping it replaced."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cud.daemon.tasks.anthropic_history import DROP_CHUNK, DROPPED, History


# -- REFERENCE: the shaping before the history was held as sent (deep copy of every turn, each step) --
def _reference_shaped(messages: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """The old ``anthropic_computer._shaped``, verbatim but for names: the oracle, not the code under test."""
    send = copy.deepcopy(messages)
    images = [(part, index) for message in send for part in _reference_parts(message)
              for index, block in enumerate(part) if block.get("type") == "image"]
    drop = max(0, len(images) - keep)
    drop -= drop % DROP_CHUNK
    for part, index in images[:drop]:
        part[index] = {"type": "text", "text": DROPPED}
    last = send[-1]["content"][-1]
    last["cache_control"] = {"type": "ephemeral"}
    return send


def _reference_parts(message: dict[str, Any]) -> list[list[dict[str, Any]]]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [block["content"] for block in content
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list)]


def _reference_image_stats(messages: list[dict[str, Any]]) -> tuple[int, int]:
    count = size = 0
    for message in messages:
        for part in _reference_parts(message):
            for block in part:
                if block.get("type") == "image":
                    count += 1
                    size += len(block["source"]["data"]) * 3 // 4
    return count, size
# -- end of the reference ---------------------------------------------------------------------------


#: One tool result of a turn: whether it says something, how many images it carries; or "done" (no content).
_RESULT = st.one_of(st.just("done"), st.tuples(st.booleans(), st.integers(0, 2)))


def _turn(step: int, results: list[object]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The assistant's tool calls of ``step`` and their results, fresh objects each call."""
    calls = [{"type": "tool_use", "id": f"t{step}.{n}", "name": "computer", "input": {"action": "screenshot"}}
             for n in range(len(results))]
    answers: list[dict[str, Any]] = []
    for n, result in enumerate(results):
        if result == "done":
            answers.append({"type": "tool_result", "tool_use_id": f"t{step}.{n}", "content": "done"})
            continue
        said, images = result  # type: ignore[misc]
        content: list[dict[str, Any]] = [{"type": "text", "text": f"said {step}.{n}"}] if said else []
        # Sizes differ per image (4..16 base64 characters), so the byte count is checked, not just the count.
        content += [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": "QUJD" * (1 + (step + n + i) % 4)}} for i in range(images)]
        answers.append({"type": "tool_result", "tool_use_id": f"t{step}.{n}", "content": content})
    return [{"type": "text", "text": f"step {step}"}, *calls], answers


@settings(deadline=None, max_examples=150)
@given(keep=st.integers(1, 12), turns=st.lists(st.lists(_RESULT, min_size=1, max_size=3), max_size=40))
def test_each_request_sends_what_the_deep_copy_sent_and_the_history_stays_bounded(
        keep: int, turns: list[list[object]]) -> None:
    history = History("go", keep)
    reference: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for step, results in enumerate([*turns, None]):
        expected = _reference_shaped(reference, keep)
        sent = history.shaped()
        # Byte for byte as serialised (key order too): the cached prefix is the same bytes.
        assert json.dumps(sent) == json.dumps(expected)
        assert (history.images, history.image_bytes) == _reference_image_stats(expected)
        # One breakpoint, on the last user turn's last block.
        assert [b for m in sent for b in m["content"] if "cache_control" in b] == [sent[-1]["content"][-1]]
        held = sum(1 for m in history.messages for part in _reference_parts(m) for b in part if b["type"] == "image")
        assert held == history.images < keep + DROP_CHUNK  # dropped images are gone, not only unsent
        if results is None:
            break
        calls, answers = _turn(step, results)
        reference += [{"role": "assistant", "content": calls}, {"role": "user", "content": answers}]
        calls, answers = _turn(step, results)  # fresh objects: the history may change its own
        history.add_assistant(calls)
        history.add_results(answers)


@settings(deadline=None)
@given(st.integers(0, 40), st.integers(1, 12))
def test_old_screenshots_are_dropped_in_chunks_and_only_the_newest_kept(turns: int, keep: int) -> None:
    history = History("go", keep)
    for n in range(turns):
        history.add_assistant([{"type": "tool_use", "id": f"t{n}", "name": "computer", "input": {"action": "screenshot"}}])
        history.add_results([{"type": "tool_result", "tool_use_id": f"t{n}", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": f"img{n}"}}]}])
    sent = history.shaped()
    images = [b["source"]["data"] for m in sent if m["role"] == "user" for r in m["content"]
              if r["type"] == "tool_result" for b in r["content"] if b["type"] == "image"]
    # The newest ones, never fewer than keep, fewer than keep + a chunk; in order, none altered.
    assert images == [f"img{n}" for n in range(turns - len(images), turns)]
    assert min(turns, keep) <= len(images) < keep + DROP_CHUNK or len(images) == turns
    assert sent[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sum("cache_control" in b for m in sent for b in m["content"]) == 1
