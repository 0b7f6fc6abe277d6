"""The scripted chat server through the real openai SDK: each format's text, runs counted past a
format's history, colour targets in the model's space, and what it refuses."""

from __future__ import annotations

import io
from typing import Any

import openai
import pytest
from PIL import Image, ImageDraw

from cud.model_api.chat import FORMATS, Turn, format_for
from cud.scripted import ScriptedModel
from cud.scripted.chat import ScriptedChat

RED = "#CC2233"


def _screen(width: int = 1280, height: int = 800, box: tuple[int, int, int, int] | None = None) -> bytes:
    image = Image.new("RGB", (width, height), "white")
    if box is not None:
        ImageDraw.Draw(image).rectangle(box, fill=RED)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _client(server: ScriptedChat) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)


def _ask(client: openai.OpenAI, fmt_name: str, instruction: str, past: list[Turn], png: bytes,
         model: str = "m") -> str:
    fmt = format_for(fmt_name)
    space = fmt.space(*Image.open(io.BytesIO(png)).size)
    messages = fmt.request(instruction, past, fmt.image(png, space), space)
    answer = client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
    assert answer.usage is not None and answer.usage.completion_tokens == 20
    return answer.choices[0].message.content or ""


@pytest.mark.parametrize("fmt_name", list(FORMATS))
def test_a_run_longer_than_the_history_plays_every_step_and_two_runs_interleave(fmt_name: str) -> None:
    fmt = format_for(fmt_name)
    steps: list[dict[str, Any]] = [{"actions": [{"type": "click", "button": "left", "x": 10 * n, "y": 5}]}
                                   for n in range(fmt.HISTORY + 3)]
    with ScriptedChat({"name": "long", "steps": [*steps, {"message": "done"}]}, format=fmt_name) as server:
        client = _client(server)
        png = _screen()
        space = fmt.space(1280, 800)
        past: dict[str, list[Turn]] = {"a": [], "b": []}
        for n in range(len(steps)):
            for run in ("a", "b"):  # two runs (two instructions) at once: each has its own count
                text = _ask(client, fmt_name, f"task {run}", past[run], png)
                reply = fmt.parse(text, space)
                assert [(a["type"], a["x"]) for a in reply.actions] == [
                    ("click", space.to_screen(10 * n, 5, "x")[0])]
                past[run].append(Turn(fmt.image(png, space), text))
        assert fmt.parse(_ask(client, fmt_name, "task a", past["a"], png), space).final == "done"
        # A request with no past turn starts its run over.
        assert fmt.parse(_ask(client, fmt_name, "task a", [], png), space).actions[0]["x"] == 0


@pytest.mark.parametrize("fmt_name", list(FORMATS))
def test_a_colour_target_is_aimed_in_the_models_space_and_lands_on_it(fmt_name: str) -> None:
    fmt = format_for(fmt_name)
    scenario = {"name": "aim", "steps": [{"actions": [{"type": "click", "button": "left",
                                                       "target": {"color": RED}}]}]}
    box = (1500, 900, 1540, 940)
    with ScriptedChat(scenario, format=fmt_name) as server:
        png = _screen(1920, 1080, box)
        reply = fmt.parse(_ask(_client(server), fmt_name, "hit it", [], png), fmt.space(1920, 1080))
    [click] = reply.actions
    assert box[0] <= click["x"] <= box[2] and box[1] <= click["y"] <= box[3], click


def test_a_look_only_step_waits_and_what_a_format_cannot_say_is_a_400() -> None:
    scenario = {"name": "s", "steps": [{"actions": [{"type": "screenshot"}]},
                                       {"actions": [{"type": "click", "button": "left", "x": 1, "y": 1}]}]}
    with ScriptedChat(scenario, format="opencua") as server:
        client = _client(server)
        png, space = _screen(), format_for("opencua").space(1280, 800)
        first = _ask(client, "opencua", "go", [], png)
        assert format_for("opencua").parse(first, space).actions == [{"type": "wait"}]
    asking = {"name": "ask", "steps": [{"call_user": "which one?"}]}
    with ScriptedChat(asking, format="qwen-vl") as server:
        with pytest.raises(openai.BadRequestError, match="cannot say it"):
            _ask(_client(server), "qwen-vl", "go", [], _screen())
    with pytest.raises(Exception, match="no chat format 'cogagent'"):
        ScriptedChat(asking, format="cogagent")


def test_the_computer_tool_servers_refuse_the_chat_only_steps() -> None:
    with ScriptedModel({"name": "t", "steps": [{"text": "raw"}]}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="only the chat server plays"):
            client.responses.create(model="m", input=[], tools=[{"type": "computer"}])  # type: ignore[list-item]
