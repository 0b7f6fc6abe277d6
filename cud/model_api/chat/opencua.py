"""OpenCUA(-7B/-32B): ``## Thought`` / ``## Action`` / ``## Code`` answers whose code is pyautogui, in the
pixels of the smart-resized screenshot.

Source: github:xlang-ai/OpenCUA (MIT): ``evaluation/agentnetbench/agent/opencua.py`` (the prompt,
the history, the parser: "mirrored from" the evaluation the models were published with) and
``model/README.md`` ("Important Notes on Coordinate Systems": OpenCUA-7B and -32B, Qwen2.5-VL
based, answer in absolute pixels of the screenshot after ``smart_resize(factor=28,
min_pixels=3136, max_pixels=12845056)``; OpenCUA-Qwen2-7B's relative 0..1 coordinates are not
this format). The tests hold cud to a vendored copy of that code (tests/support/opencua_reference.py).

Prompt: the agent's default, the L2 system prompt (:data:`SYSTEM_PROMPT`, its one variant);
then the last :data:`HISTORY` steps, each as the agent's brief history (``# Step N:\\n## Action:\\n``
and the step's ``## Action`` text), the last :data:`IMAGES` of them after their screenshot; then
the current screenshot with the task (:data:`INSTRUCTION`).

Answer: the code is the last fenced block (```` ```python ````) of the answer, else (as the
reference) its lines that start with ``pyautogui.`` or ``computer.``. Its calls are read as
:mod:`cud.model_api.chat.pyautogui` says, plus OpenCUA's functions:

=====================================  ==========================================================
``computer.triple_click(x, y)``        ``double_click`` then ``click``
``computer.wait()`` / ``time.sleep``   ``wait``
``computer.terminate(status=...)``     ``final`` (the answer's ``## Action`` text, else its
                                       thought, else the status); ``gave_up`` if status is
                                       ``failure``. Nothing may follow it.
=====================================  ==========================================================

OpenCUA cannot ask the user (no ``call_user``). Refused: what the pyautogui grammar refuses, a
terminate status other than success/failure, an answer with no code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cud.model_api.chat import Reply, Turn
from cud.model_api.chat import pyautogui as grammar
from cud.model_api.chat.actions import double_click, image_part, text_part, unparsed, wait
from cud.model_api.chat.resize import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, image, smart_space
from cud.model_api.scaling import ScreenScale

__all__ = ("HISTORY", "IMAGES", "INSTRUCTION", "NAME", "SYSTEM_PROMPT", "image", "parse", "render", "request",
           "space")

NAME = "opencua"
#: The agent's max_history_length: past steps whose ``## Action`` goes back.
HISTORY = 10
#: The agent's default "image_3": the current screenshot and the last two steps'.
IMAGES = 2

#: The agent's L2 system prompt, verbatim (split only to keep the source's lines short).
SYSTEM_PROMPT = "\n".join((
    'You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a '
    'series of pyautogui actions to complete the task.',
    '',
    'For each step, provide your response in this format:',
    '',
    'Thought:',
    '  - Step by Step Progress Assessment:',
    '    - Analyze completed task parts and their contribution to the overall goal',
    '    - Reflect on potential errors, unexpected results, or obstacles',
    '    - If previous action was incorrect, predict a logical recovery step',
    '  - Next Action Analysis:',
    '    - List possible next actions based on current state',
    '    - Evaluate options considering current state and previous actions',
    '    - Propose most logical next action',
    '    - Anticipate consequences of the proposed action',
    '  - For Text Input Actions:',
    '    - Note current cursor position',
    '    - Consolidate repetitive actions (specify count for multiple keypresses)',
    '    - Describe expected final text outcome',
    '    - Use first-person perspective in reasoning',
    '',
    'Action:',
    '  Provide clear, concise, and actionable instructions:',
    '  - If the action involves interacting with a specific target:',
    '    - Describe target explicitly without using coordinates',
    '    - Specify element names when possible (use original language if non-English)',
    '    - Describe features (shape, color, position) if name unavailable',
    '    - For window control buttons, identify correctly (minimize "—", maximize "□", close "X")',
    "  - if the action involves keyboard actions like 'press', 'write', 'hotkey':",
    '    - Consolidate repetitive keypresses with count',
    '    - Specify expected text outcome for typing actions',
    '',
    'Finally, output the action as PyAutoGUI code or the following functions:',
    '- {"name": "computer.triple_click", "description": "Triple click on the screen", "parameters": '
    '{"type": "object", "properties": {"x": {"type": "number", "description": "The x coordinate of the '
    'triple click"}, "y": {"type": "number", "description": "The y coordinate of the triple click"}}, '
    '"required": ["x", "y"]}}',
    '- {"name": "computer.terminate", "description": "Terminate the current task and report its '
    'completion status", "parameters": {"type": "object", "properties": {"status": {"type": "string", '
    '"enum": ["success", "failure"], "description": "The status of the task"}}, "required": '
    '["status"]}}',
))

#: The current step's text (the reference's INSTRUTION_TEMPLATE), after the screenshot.
INSTRUCTION = "\n".join((
    '',
    '# Task Instruction:',
    '{instruction}',
    '',
    'Please generate the next move according to the screenshot, task instruction and previous steps (if provided).',
    '',
))

#: OpenCUA's own functions, beside pyautogui's: name -> positional parameters.
_SIGNATURES: dict[str, dict[str, tuple[str, ...]]] = {
    "pyautogui": grammar.SIGNATURES,
    "computer": {"triple_click": ("x", "y"), "terminate": ("status",), "wait": ()},
    "time": {"sleep": ("secs",)},
}
_STATUSES = ("success", "failure")
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def _section(text: str, name: str) -> str | None:
    """The text under ``## name:`` up to the next ``## `` heading (None without that heading)."""
    match = re.search(rf"^#+\s*{name}:?[ \t]*\n?(.*?)(?=^#+\s*\w+:?[ \t]*$|\Z)", text, re.DOTALL | re.MULTILINE)
    return match.group(1).strip() if match else None


def space(width: int, height: int) -> ScreenScale:
    return smart_space(width, height, min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)


def request(instruction: str, past: Sequence[Turn], screenshot: bytes, space: ScreenScale) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    kept = list(past)[-HISTORY:]
    first = len(past) - len(kept)
    for index, turn in enumerate(kept):
        if index >= len(kept) - IMAGES and turn.screenshot is not None:
            messages.append({"role": "user", "content": [image_part(turn.screenshot)]})
        action = _section(turn.text, "Action")
        said = turn.text.strip() if action is None else action
        messages.append({"role": "assistant", "content": f"# Step {first + index + 1}:\n## Action:\n{said}\n"})
    messages.append({"role": "user", "content": [image_part(screenshot),
                                                 text_part(INSTRUCTION.replace("{instruction}", instruction))]})
    return messages


def parse(text: str, space: ScreenScale) -> Reply:
    blocks = _FENCE.findall(text)
    if blocks:
        code = blocks[-1]
    else:
        code = "\n".join(line.strip() for line in text.split("\n")
                         if line.strip().startswith(("pyautogui.", "computer.")))
    if not code.strip():
        raise unparsed(NAME, text, "has no code (a ```python block of pyautogui or computer calls)")

    def refuse(why: str) -> Exception:
        return unparsed(NAME, text, why)

    thought, summary = _section(text, "Thought"), _section(text, "Action")
    actions: list[dict[str, Any]] = []
    pending: list[tuple[object, object]] = []
    final: str | None = None
    gave_up = False
    for module, function, args in grammar.calls(code, _SIGNATURES, refuse):
        where = f"{module}.{function}"
        if final is not None:
            raise refuse(f"has {where} after computer.terminate")
        if module == "pyautogui":
            actions.extend(grammar.to_actions(function, args, space, pending, where))
            continue
        actions.extend(grammar.flush(space, pending, where))
        if function == "triple_click":
            double = double_click(space, args.get("x"), args.get("y"), "computer.triple_click")
            actions += [double, {"type": "click", "x": double["x"], "y": double["y"], "button": "left"}]
        elif function in ("wait", "sleep"):
            actions.append(wait())
        else:
            status = args.get("status")
            if status not in _STATUSES:
                raise refuse(f"terminates with status {status!r}, not one of {_STATUSES}")
            final, gave_up = summary or thought or status, status == "failure"
    actions.extend(grammar.flush(space, pending, "pyautogui.moveTo"))
    return Reply(actions, thought=thought or None, final=final, gave_up=gave_up)


def render(actions: Sequence[dict[str, Any]], thought: str = "", final: str | None = None,
           call_user: str | None = None, gave_up: bool = False) -> str:
    if call_user is not None:
        raise ValueError("OpenCUA has no way to ask the user")
    if gave_up and final is None:
        raise ValueError("gave_up ends the task: it needs a final message")
    code: list[str] = []
    for action in actions:
        if action["type"] == "wait":
            code.append("computer.wait()")
        else:
            code.extend(grammar.action_code(action))
    summary = "act"
    if final is not None:
        code.append(f"computer.terminate(status={'failure' if gave_up else 'success'!r})")
        summary = final
    if not code:
        raise ValueError("an answer needs an action or a final message")
    body = "\n".join(code)
    return f"## Thought:\n{thought}\n\n## Action:\n{summary}\n\n## Code:\n```python\n{body}\n```\n"
