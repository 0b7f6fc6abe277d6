"""The [models] table (its chat entries too), the screen scaling of the anthropic API and its actions' translation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.daemon.config import load_config
from cud.daemon.model.table import resolve_model_keys
from cud.daemon.tasks.anthropic_actions import Pointer, translate
from cud.errors import ComputerUseFailed, ConfigError, OutOfBounds, UnknownKey
from cud.model_api.scaling import MAX_LONG_EDGE, MAX_PIXELS, ScreenScale


def _config(tmp_path: Path, text: str) -> object:
    path = tmp_path / "cud.toml"
    path.write_text(text)
    return load_config(path, {"display": ":0", "socket": str(tmp_path / "s"), "state_dir": str(tmp_path / "st")},
                       env={})


def test_an_entry_defaults_its_model_id_and_tool(tmp_path: Path) -> None:
    config = _config(tmp_path, '[models.claude]\napi = "anthropic"\n'
                               '[models."claude-opus-4-5"]\napi = "anthropic"\napi_key_env = "K2"\n'
                               '[models.mine]\nmodel = "gpt-x"\nbase_url = "http://127.0.0.1:1/v1"\n')
    claude, opus, mine = (config.models[n] for n in ("claude", "claude-opus-4-5", "mine"))  # type: ignore[attr-defined]
    assert (claude.model, claude.api_key_env, claude.tool, claude.beta) == (
        "claude", "ANTHROPIC_API_KEY", "computer_20250124", "computer-use-2025-01-24")
    assert (opus.tool, opus.beta, opus.api_key_env) == ("computer_20251124", "computer-use-2025-11-24", "K2")
    assert (mine.api, mine.model, mine.base_url, mine.api_key_env) == ("responses", "gpt-x", "http://127.0.0.1:1/v1", None)


def test_a_chat_entry_has_its_format_and_needs_no_key(tmp_path: Path) -> None:
    config = _config(tmp_path, '[models.tars]\napi = "chat"\nmodel = "UI-TARS-1.5-7B"\nbase_url = "http://h:8000/v1"\n'
                               'format = "ui-tars"\n[models.cua]\napi = "chat"\nbase_url = "http://h/v1"\n'
                               'format = "opencua"\napi_key_env = "CUA_KEY"\n')
    tars, cua = config.models["tars"], config.models["cua"]  # type: ignore[attr-defined]
    assert (tars.api, tars.model, tars.base_url, tars.format, tars.api_key_env) == (
        "chat", "UI-TARS-1.5-7B", "http://h:8000/v1", "ui-tars", None)
    assert (cua.format, cua.api_key_env) == ("opencua", "CUA_KEY")
    # Without api_key_env a chat entry needs no key (a placeholder is sent); with one, the variable must be set.
    assert resolve_model_keys({"tars": tars}, {}) == {}
    with pytest.raises(ConfigError, match="CUA_KEY"):
        resolve_model_keys({"cua": cua}, {})


@pytest.mark.parametrize(("text", "said"), [
    ('[models.v]\napi = "chat"\nformat = "ui-tars"\n', "config key 'models.v.base_url' is required for api = \"chat\""),
    ('[models.v]\napi = "chat"\nbase_url = "http://h/v1"\n', "'models.v.format' is required for api = \"chat\": one of "
                                                             "'ui-tars', 'opencua', 'qwen-vl'"),
    ('[models.v]\napi = "chat"\nbase_url = "http://h/v1"\nformat = "cogagent"\n',
     "config key 'models.v.format' must be 'ui-tars' or 'opencua' or 'qwen-vl', got 'cogagent'"),
    ('[models.v]\nformat = "ui-tars"\n', "'models.v.format' is only for api = \"chat\""),
    ('[models.v]\napi = "anthropic"\nformat = "ui-tars"\n', "'models.v.format' is only for api = \"chat\""),
    ('[models.v]\napi = "gemini"\n', "models.v.api"),
    ('[models.v]\napi = "anthropic"\ntool = "computer_2024"\n', "models.v.tool"),
    ('[models.v]\ntool = "computer_20250124"\n', "only for api = \"anthropic\""),
    ('[models.v]\napi_key_env = "A-B"\n', "models.v.api_key_env"),
    ('[models.v]\nbase_url = "ftp://x"\n', "models.v.base_url"),
    ('[models.v]\nprice = 1\n', "models.v.price"),
])
def test_a_bad_entry_is_refused_naming_its_key(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, text)
    assert said in caught.value.message


def test_a_missing_key_names_its_variable() -> None:
    from cud.daemon.model.table import ModelEntry
    models = {"claude": ModelEntry("claude", "anthropic", "claude-x", None, "CUD_NO_SUCH_KEY")}
    with pytest.raises(ConfigError) as caught:
        resolve_model_keys(models, {})
    assert "CUD_NO_SUCH_KEY" in caught.value.message and "'claude'" in caught.value.message
    assert resolve_model_keys(models, {"CUD_NO_SUCH_KEY": " k "}) == {"claude": "k"}


# -- the screen the model sees ------------------------------------------------------------------
screens = st.tuples(st.integers(1, 8000), st.integers(1, 8000))


@settings(deadline=None)
@given(screens)
def test_the_fit_is_within_the_api_limits_and_keeps_the_aspect(size: tuple[int, int]) -> None:
    scale = ScreenScale.fit(*size)
    assert 1 <= scale.model_width <= size[0] and 1 <= scale.model_height <= size[1]
    assert max(scale.model_width, scale.model_height) <= MAX_LONG_EDGE
    assert scale.model_width * scale.model_height <= MAX_PIXELS or min(scale.model_width, scale.model_height) == 1
    if size[0] * size[1] <= MAX_PIXELS and max(size) <= MAX_LONG_EDGE:
        assert not scale.scaled
    else:  # the aspect within a pixel's rounding of each side
        assert abs(scale.model_width / size[0] - scale.model_height / size[1]) <= 1 / min(
            scale.model_width, scale.model_height) + 1e-9 or min(scale.model_width, scale.model_height) == 1


@settings(deadline=None)
@given(screens, st.data())
def test_every_model_pixel_lands_on_the_native_pixels_it_covers(size: tuple[int, int], data: st.DataObject) -> None:
    scale = ScreenScale.fit(*size)
    x = data.draw(st.integers(0, scale.model_width - 1))
    y = data.draw(st.integers(0, scale.model_height - 1))
    nx, ny = scale.to_screen(x, y, "click")
    assert 0 <= nx < size[0] and 0 <= ny < size[1]
    # The model pixel x covers native [x*W/w, (x+1)*W/w): the mapped pixel is inside that span.
    assert x * size[0] / scale.model_width <= nx + 1 and nx < (x + 1) * size[0] / scale.model_width
    assert y * size[1] / scale.model_height <= ny + 1 and ny < (y + 1) * size[1] / scale.model_height


@settings(deadline=None)
@given(screens, st.data())
def test_a_native_pixel_round_trips_within_the_scale_factor(size: tuple[int, int], data: st.DataObject) -> None:
    scale = ScreenScale.fit(*size)
    nx, ny = data.draw(st.integers(0, size[0] - 1)), data.draw(st.integers(0, size[1] - 1))
    back = scale.to_screen(*scale.to_model(nx, ny), "point")
    assert abs(back[0] - nx) < max(1, math.ceil(size[0] / scale.model_width))
    assert abs(back[1] - ny) < max(1, math.ceil(size[1] / scale.model_height))


@pytest.mark.parametrize("point", [(-1, 0), (0, -1), (1429, 0), (0, 804), (10**9, 5), (1.5, 3), (True, 2), ("1", 2)])
def test_a_coordinate_off_the_model_screen_is_refused_naming_it(point: tuple[object, object]) -> None:
    scale = ScreenScale.fit(1920, 1080)
    assert (scale.model_width, scale.model_height) == (1429, 804)
    with pytest.raises(OutOfBounds) as caught:
        scale.to_screen(*point, "left_click coordinate")
    assert "left_click coordinate" in caught.value.message and repr(point[0]) in caught.value.message


def test_the_corners_of_a_full_hd_screen() -> None:
    scale = ScreenScale.fit(1920, 1080)
    assert scale.to_screen(0, 0, "p") == (0, 0)
    assert scale.to_screen(1428, 803, "p") == (1919, 1079)


# -- the actions ---------------------------------------------------------------------------------
FULL_HD = ScreenScale.fit(1920, 1080)
SAME = ScreenScale.fit(1280, 800)
NEW, OLD = "computer_20251124", "computer_20250124"


def _run(call: dict[str, object], pointer: Pointer | None = None, scale: ScreenScale = SAME, tool: str = OLD) -> object:
    return translate(call, scale, pointer or Pointer(), tool)


def test_each_action_becomes_the_protocols() -> None:
    assert _run({"action": "left_click", "coordinate": [10, 20]}).actions == [
        {"type": "click", "x": 10, "y": 20, "button": "left"}]
    assert _run({"action": "right_click", "coordinate": [1, 2], "text": "shift"}).actions == [
        {"type": "click", "x": 1, "y": 2, "button": "right", "keys": ["shift"]}]
    assert _run({"action": "middle_click", "coordinate": [1, 2]}).actions[0]["button"] == "wheel"
    assert _run({"action": "double_click", "coordinate": [3, 4]}).actions == [{"type": "double_click", "x": 3, "y": 4}]
    assert [a["type"] for a in _run({"action": "triple_click", "coordinate": [3, 4]}).actions] == [
        "double_click", "click"]
    assert _run({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [30, 40]}).actions == [
        {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}]}]
    assert _run({"action": "key", "text": "ctrl+s Return"}).actions == [
        {"type": "keypress", "keys": ["ctrl", "s"]}, {"type": "keypress", "keys": ["Return"]}]
    assert _run({"action": "type", "text": "Grüße"}).actions == [{"type": "type", "text": "Grüße"}]
    assert _run({"action": "scroll", "coordinate": [5, 6], "scroll_direction": "up", "scroll_amount": 3}).actions == [
        {"type": "scroll", "x": 5, "y": 6, "scroll_x": 0, "scroll_y": -300}]
    assert _run({"action": "scroll", "coordinate": [5, 6], "scroll_direction": "right", "scroll_amount": 2}
                ).actions[0]["scroll_x"] == 200
    assert _run({"action": "mouse_move", "coordinate": [7, 8]}).actions == [{"type": "move", "x": 7, "y": 8}]
    waited = _run({"action": "wait", "duration": 1})
    assert waited.actions == [{"type": "wait"}] and waited.screenshot
    assert _run({"action": "screenshot"}).screenshot and _run({"action": "screenshot"}).actions == []
    assert _run({"action": "zoom", "region": [0, 0, 714, 401]}, scale=FULL_HD, tool=NEW).region == (0, 0, 961, 540)


def test_coordinates_are_mapped_to_native_pixels() -> None:
    assert _run({"action": "left_click", "coordinate": [1428, 803]}, scale=FULL_HD).actions == [
        {"type": "click", "x": 1919, "y": 1079, "button": "left"}]


def test_the_pointer_is_remembered_for_clicks_without_a_coordinate_and_for_its_position() -> None:
    pointer = Pointer()
    with pytest.raises(ComputerUseFailed, match="has not been moved"):
        _run({"action": "left_click"}, pointer)
    _run({"action": "mouse_move", "coordinate": [1000, 500]}, pointer, FULL_HD)
    assert _run({"action": "left_click"}, pointer, FULL_HD).actions[0]["x"] == pointer.at[0]  # type: ignore[index]
    assert _run({"action": "cursor_position"}, pointer, FULL_HD).text == "X=1000,Y=500"


def test_mouse_down_moves_and_up_become_one_drag() -> None:
    pointer = Pointer()
    assert _run({"action": "left_mouse_down", "coordinate": [1, 1]}, pointer).actions == []
    assert _run({"action": "mouse_move", "coordinate": [5, 5]}, pointer).actions == []
    assert _run({"action": "left_mouse_up", "coordinate": [9, 9]}, pointer).actions == [
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 5, "y": 5}, {"x": 9, "y": 9}]}]
    with pytest.raises(ComputerUseFailed, match="not held"):
        _run({"action": "left_mouse_up"}, pointer)


@pytest.mark.parametrize(("call", "error", "said"), [
    ({"action": "teleport", "coordinate": [1, 1]}, ComputerUseFailed, "unknown computer action 'teleport'"),
    ({"action": "hold_key", "text": "shift", "duration": 1}, ComputerUseFailed, "'hold_key'"),
    ({"action": "zoom", "region": [0, 0, 5, 5]}, ComputerUseFailed, "computer_20250124 does not have"),
    ({"action": "key", "text": "ctrl+NoSuchKey"}, UnknownKey, "'NoSuchKey'"),
    ({"action": "left_click", "coordinate": [1280, 0]}, OutOfBounds, "(1280, 0)"),
    ({"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [5, 800]}, OutOfBounds, "(5, 800)"),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "sideways", "scroll_amount": 1},
     ComputerUseFailed, "'sideways'"),
    ({"coordinate": [1, 1]}, ComputerUseFailed, "no action"),
])
def test_a_bad_call_is_refused_quoting_it(call: dict[str, object], error: type[Exception], said: str) -> None:
    with pytest.raises(error) as caught:
        _run(call)
    assert said in str(caught.value)
