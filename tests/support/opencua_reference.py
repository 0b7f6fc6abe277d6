"""OpenCUA's own prompt, resize and action extraction, the reference the opencua format's tests hold it to.

Vendored verbatim (only methods made functions, the agent's default smart_resize arguments inlined)
from github:xlang-ai/OpenCUA, evaluation/agentnetbench/agent/opencua.py (the agent's prompt and
parser, "mirrored from opencua_eval_all_in_one.py"), and model/README.md
(``qwen25_smart_resize_to_absolute``: OpenCUA-7B/32B answer in the smart-resized screenshot's
pixels). Licence: MIT License, Copyright (c) 2025 The OpenCUA Authors.
"""

# ruff: noqa: E501, UP006, UP035

from __future__ import annotations

import re
from typing import Any, List, Tuple

STEP_TEMPLATE = "# Step {step_num}:\n"
INSTRUTION_TEMPLATE = (
    "\n# Task Instruction:\n{instruction}\n\n"
    "Please generate the next move according to the screenshot, task instruction and previous steps (if provided).\n"
)
L2_SYSTEM_PROMPTS = [
    'You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a series of pyautogui actions to complete the task.\n\nFor each step, provide your response in this format:\n\nThought:\n  - Step by Step Progress Assessment:\n    - Analyze completed task parts and their contribution to the overall goal\n    - Reflect on potential errors, unexpected results, or obstacles\n    - If previous action was incorrect, predict a logical recovery step\n  - Next Action Analysis:\n    - List possible next actions based on current state\n    - Evaluate options considering current state and previous actions\n    - Propose most logical next action\n    - Anticipate consequences of the proposed action\n  - For Text Input Actions:\n    - Note current cursor position\n    - Consolidate repetitive actions (specify count for multiple keypresses)\n    - Describe expected final text outcome\n    - Use first-person perspective in reasoning\n\nAction:\n  Provide clear, concise, and actionable instructions:\n  - If the action involves interacting with a specific target:\n    - Describe target explicitly without using coordinates\n    - Specify element names when possible (use original language if non-English)\n    - Describe features (shape, color, position) if name unavailable\n    - For window control buttons, identify correctly (minimize "—", maximize "□", close "X")\n  - if the action involves keyboard actions like \'press\', \'write\', \'hotkey\':\n    - Consolidate repetitive keypresses with count\n    - Specify expected text outcome for typing actions\n\nFinally, output the action as PyAutoGUI code or the following functions:\n- {"name": "computer.triple_click", "description": "Triple click on the screen", "parameters": {"type": "object", "properties": {"x": {"type": "number", "description": "The x coordinate of the triple click"}, "y": {"type": "number", "description": "The y coordinate of the triple click"}}, "required": ["x", "y"]}}\n- {"name": "computer.terminate", "description": "Terminate the current task and report its completion status", "parameters": {"type": "object", "properties": {"status": {"type": "string", "enum": ["success", "failure"], "description": "The status of the task"}}, "required": ["status"]}}'
]
ACTION_HISTORY_TEMPLATE = "## Action:\n{action}\n"
L2_RESPONSE_TEMPLATE = "## Thought:\n{thought}\n\n## Action:\n{action}\n\n## Code:\n{code}\n"


def smart_resize_qwen25(width: int, height: int) -> Tuple[int, int]:
        """Compute resized dimensions following Qwen2.5 style constraints.

        Returns (new_width, new_height).
        """
        factor = 28
        min_pixels = 3136
        max_pixels = 12845056

        # Round to multiples of factor
        w_bar = max(1, round(width / factor)) * factor
        h_bar = max(1, round(height / factor)) * factor

        prod = w_bar * h_bar
        if prod > max_pixels:
            beta = (width * height / max_pixels) ** 0.5
            w_bar = max(1, int((width / beta) // factor) * factor)
            h_bar = max(1, int((height / beta) // factor) * factor)
        elif prod < min_pixels:
            beta = (min_pixels / (width * height)) ** 0.5
            w_bar = int(((width * beta) + factor - 1) // factor) * factor
            h_bar = int(((height * beta) + factor - 1) // factor) * factor

        return int(w_bar), int(h_bar)


def extract_actions(action: str) -> List[Tuple[str, Any]]:
        """Extract (type, value) tuples from parsed action string.

        Follows the logic of extract_actions() in opencua_eval_all_in_one.py.
        """
        if not action:
            return []

        actions: List[Tuple[str, Any]] = []

        action_lines = action.strip().split("\n")
        for raw in action_lines:
            line = raw.strip()

            # computer.terminate
            if line.startswith("computer.terminate"):
                status_match = re.search(r"status=['\"](\w+)['\"]", line)
                if status_match:
                    actions.append(("terminate", status_match.group(1)))
                    continue

            # computer.triple_click
            if line.startswith("computer.triple_click"):
                coord_match = re.search(r"x=([\d.]+),\s*y=([\d.]+)", line)
                if coord_match:
                    x, y = map(float, coord_match.groups())
                    actions.append(("triple_click", (x, y)))
                    continue

            # pyautogui.*
            if line.startswith("pyautogui."):
                coord_match = re.search(r"x=([\d.]+),\s*y=([\d.]+)", line)
                if coord_match:
                    x, y = map(float, coord_match.groups())
                    if "click" in line and "doubleClick" not in line and "rightClick" not in line:
                        actions.append(("click", (x, y)))
                    elif "moveTo" in line:
                        actions.append(("moveTo", (x, y)))
                    elif "doubleClick" in line:
                        actions.append(("doubleClick", (x, y)))
                    elif "rightClick" in line:
                        actions.append(("rightClick", (x, y)))
                    elif "dragTo" in line:
                        actions.append(("dragTo", (x, y)))

                # write(message=...)
                write_match = re.search(r"message=['\"](.+?)['\"]", line)
                if write_match:
                    text = write_match.group(1)
                    actions.append(("write", text))

                # write('...') positional
                if not write_match:
                    write_positional = re.search(r"pyautogui\.write\((['\"])(.*?)\1\)", line)
                    if write_positional:
                        actions.append(("write", write_positional.group(2)))

                # press/hotkey keys=[...]
                keys_match = re.findall(r"keys=\[(.*?)\]", line)
                if keys_match:
                    key_string = keys_match[0]
                    key_list = re.findall(r"['\"]([^'\"]*)['\"]|(\w+)", key_string)
                    keys = [m[0] or m[1] for m in key_list if m[0] or m[1]]
                    normalized_keys: List[str] = []
                    for k in keys:
                        k = k.strip()
                        normalized_keys.append("ctrl" if k.lower() in ("cmd", "command") else k)
                    if "hotkey" in line:
                        actions.append(("hotkey", normalized_keys))
                    else:
                        actions.append(("press", normalized_keys))

                # hotkey positional: pyautogui.hotkey('ctrl', 'v')
                if "hotkey(" in line and "keys=" not in line:
                    inside = re.search(r"pyautogui\.hotkey\((.*)\)", line)
                    if inside:
                        arg_str = inside.group(1)
                        parts = re.findall(r"['\"]([^'\"]+)['\"]", arg_str)
                        if parts:
                            normalized_keys = [
                                ("ctrl" if p.strip().lower() in ("cmd", "command") else p.strip()) for p in parts
                            ]
                            actions.append(("hotkey", normalized_keys))

                # press positional: pyautogui.press('enter') or press(['ctrl','v'])
                if "press(" in line and "keys=" not in line:
                    inside = re.search(r"pyautogui\.press\((.*)\)", line)
                    if inside:
                        arg_str = inside.group(1).strip()
                        keys: List[str] = []
                        if arg_str.startswith("["):
                            parts = re.findall(r"['\"]([^'\"]+)['\"]", arg_str)
                            keys = [p.strip() for p in parts]
                        else:
                            one = re.search(r"['\"]([^'\"]+)['\"]", arg_str)
                            if one:
                                keys = [one.group(1).strip()]
                        if keys:
                            normalized_keys = [
                                ("ctrl" if k.lower() in ("cmd", "command") else k) for k in keys
                            ]
                            if len(normalized_keys) > 1:
                                actions.append(("hotkey", normalized_keys))
                            else:
                                actions.append(("press", normalized_keys))

                # scroll
                scroll_match = re.search(r"pyautogui\.scroll\(([-\d]+)\)", line)
                if scroll_match:
                    actions.append(("scroll", int(scroll_match.group(1))))

        return actions


def qwen25_smart_resize_to_absolute(model_x, model_y, original_width, original_height):
    # model/README.md, with the agent's smart_resize above.
    resized_width, resized_height = smart_resize_qwen25(original_width, original_height)
    rel_x = model_x / resized_width
    rel_y = model_y / resized_height
    abs_x = int(rel_x * original_width)
    abs_y = int(rel_y * original_height)
    return abs_x, abs_y
