"""cud's GIMP image metrics give OSWorld's verdicts: differential tests against desktop-env 1.0.2's own.

Hypothesis draws a picture (grey, RGB, RGBA, palette; smooth or noisy; some under SSIM's 7-pixel
window) and a changed copy (darker, brighter, more saturated, more contrast, mirrored, noisier,
resized, palette-quantized, another mode) or an equal one; cud's port (cud/osworld/metrics/gimp.py)
and OSWorld's function (tests/support/osworld_reference.py, which runs scikit-image's own SSIM)
must score alike, or raise alike.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageEnhance, ImageOps

from cud.osworld.catalog import METRICS
from cud.osworld.metrics import FUNCTIONS, metric
from cud.osworld.metrics.gimp import structural_similarity_rgb
from tests.support.osworld_outcomes import collect, outcome
from tests.support.osworld_reference import reference

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TWO_IMAGES = (
    "check_structure_sim", "check_brightness_decrease_and_structure_sim", "check_saturation_increase_and_structure_sim",
    "check_contrast_increase_and_structure_sim", "check_file_exists_and_structure_sim", "check_palette_and_structure_sim",
    "check_structure_sim_resized", "check_image_mirror", "check_green_background", "compare_image_list",
)


@st.composite
def pictures(draw: st.DrawFn) -> Image.Image:
    small = draw(st.integers(0, 9)) == 0
    width = draw(st.integers(3, 9) if small else st.integers(7, 40))
    height = width if draw(st.booleans()) else draw(st.integers(3, 9) if small else st.integers(7, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # smooth, as photographs mostly are
        ramp = np.linspace(0, 200, width)[None, :, None] + np.linspace(0, 50, height)[:, None, None]
        tint = np.array([1.0, 0.6, 0.3, 1.0])[None, None, :]
        pixels = np.clip(ramp * tint + rng.integers(0, 8, (height, width, 4)), 0, 255)
    else:
        pixels = rng.integers(0, 256, (height, width, 4))
    rgba = Image.fromarray(pixels.astype(np.uint8), "RGBA")
    mode = draw(st.sampled_from(["L", "RGB", "RGBA", "P"]))
    if draw(st.booleans()):  # a transparent border, as a cut-out has
        alpha = np.zeros((height, width), np.uint8)
        alpha[height // 4:, width // 3:] = 255
        rgba.putalpha(Image.fromarray(alpha, "L"))
    if mode == "P":
        image = rgba.convert("RGB").quantize(colors=draw(st.integers(2, 64)))
        if draw(st.booleans()):
            image.info["transparency"] = 0  # a palette entry as transparent, saved as PNG's tRNS
        return image
    return rgba.convert(mode)


def changed(draw: st.DrawFn, image: Image.Image) -> Image.Image:
    kind = draw(st.sampled_from(["same", "dark", "bright", "saturate", "contrast", "mirror", "noise", "resize",
                                 "palette", "mode", "black"]))
    rgb = image.convert("RGB")
    rgb.info.pop("transparency", None)  # a palette's key index is no RGB key (PIL refuses to save it)
    factor = draw(st.floats(0.3, 2.0))
    if kind == "dark":
        return ImageEnhance.Brightness(rgb).enhance(min(factor, 0.95))
    if kind == "bright":
        return ImageEnhance.Brightness(rgb).enhance(max(factor, 1.05))
    if kind == "saturate":
        return ImageEnhance.Color(rgb).enhance(factor)
    if kind == "contrast":
        return ImageEnhance.Contrast(rgb).enhance(factor)
    if kind == "mirror":
        return ImageOps.mirror(image)
    if kind == "noise":
        noise = np.random.default_rng(draw(st.integers(0, 99))).integers(-20, 21, (rgb.height, rgb.width, 3))
        return Image.fromarray(np.clip(np.asarray(rgb, dtype=np.int64) + noise, 0, 255).astype(np.uint8), "RGB")
    if kind == "resize":
        return image.resize((draw(st.integers(5, 45)), draw(st.integers(5, 45))))
    if kind == "palette":
        return rgb.quantize(colors=16)
    if kind == "mode":
        return image.convert(draw(st.sampled_from(["L", "RGB", "RGBA"])))
    if kind == "black":  # a cut-out: part black, as check_green_background's target
        out = rgb.copy()
        out.paste((0, 0, 0), (0, 0, rgb.width // 2, rgb.height))
        return out
    return image.copy()


def _same(name: str, *args: Any) -> None:
    ours, theirs = outcome(metric(name), *args), outcome(reference(name), *args)
    collect()
    assert ours == theirs, (name, args)


@SETTINGS
@given(data=st.data(), image=pictures())
def test_two_image_metrics_score_as_osworld(data: st.DataObject, image: Image.Image) -> None:
    other = changed(data.draw, image)
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp, "a.png"), Path(tmp, "b.png")
        image.save(first)
        other.save(second)
        pair = [(str(first), str(second)), (str(second), str(first))]
        for src, tgt in pair:
            for name in TWO_IMAGES:
                _same(name, src, tgt)
            _same("compare_image_list", [src, tgt], [tgt, tgt])
            _same("check_brightness_decrease_and_structure_sim", src, tgt, data.draw(st.sampled_from([0.03, 0.15, 0.0])))
        for name in TWO_IMAGES:
            _same(name, None, str(second))


@SETTINGS
@given(data=st.data(), image=pictures())
def test_one_image_metrics_score_as_osworld(data: st.DataObject, image: Image.Image) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "a.png")
        if data.draw(st.booleans()):  # a shape on a plain ground, as the triangle and text-box tasks have
            image = Image.new("RGB", image.size, (255, 255, 255))
            w, h = image.size
            x = data.draw(st.integers(0, w - 1))
            ImageDraw.Draw(image).polygon([(x, 0), (w - 1, h - 1), (0, h - 1)], fill=(0, 0, 0))
        image.save(path)
        _same("check_triangle_position", str(path))
        _same("check_textbox_on_leftside", str(path))
        rule = data.draw(st.fixed_dictionaries({}, optional={
            "height": st.integers(0, 45), "width": st.integers(0, 45), "ignore_transparent": st.booleans()}))
        for size in (image.size, (image.width, None), (None, image.height)):
            _same("check_image_size", str(path), {**rule, **({} if size[0] is None else {"width": size[0]}),
                                                   **({} if size[1] is None else {"height": size[1]})})
        _same("check_image_size", str(path), rule)
        limit = path.stat().st_size + data.draw(st.integers(-2, 2))
        _same("check_image_file_size", str(path), {"max_size": limit})
        for name in ("check_triangle_position", "check_textbox_on_leftside"):
            _same(name, None)
        _same("check_image_size", None, rule)


config_lines = st.one_of(
    st.just("# comment"), st.just(""),
    st.builds(lambda k, v: f"({k} {v})", st.sampled_from(["theme", "undo-levels", "hide-docks", "session-info"]),
              st.sampled_from(['"Light"', "100", "yes", "no", 'toolbox "x" yes'])))


@SETTINGS
@example(lines=['(session-info toolbox "x" yes)'], key=["session-info", "toolbox"], value="yes")
@example(lines=["(theme x)", '(theme "Light")'], key="theme", value='"Light"')
@given(lines=st.lists(config_lines, max_size=6), key=st.one_of(st.sampled_from(["theme", "undo-levels", "hide-docks"]),
                                                              st.just(["session-info", "toolbox"])),
       value=st.sampled_from(['"Light"', "100", "yes", "no"]))
def test_check_config_status_scores_as_osworld(lines: list[str], key: str | list[str], value: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "gimprc")
        path.write_text("\n".join(lines) + "\n")
        _same("check_config_status", str(path), {"type:": "key-value", "key": key, "value": value})
    _same("check_config_status", None, {"key": key, "value": value})


def test_the_catalog_names_each_port() -> None:
    for name in (*TWO_IMAGES, "check_triangle_position", "check_textbox_on_leftside", "check_image_size",
                 "check_image_file_size", "check_config_status"):
        assert FUNCTIONS[name] == f"gimp:{name}"
        assert METRICS[name].expected == (name not in {"check_triangle_position", "check_textbox_on_leftside"})
    assert METRICS["check_brightness_decrease_and_structure_sim"].options == {"threshold"}


def test_a_mirrored_photo_passes_and_a_plain_copy_fails(tmp_path: Path) -> None:
    ramp = np.tile(np.linspace(0, 255, 40), (30, 1)).astype(np.uint8)  # dark left, light right
    Image.fromarray(ramp).convert("RGB").save(tmp_path / "a.png")
    ImageOps.mirror(Image.open(tmp_path / "a.png")).save(tmp_path / "b.png")
    assert metric("check_image_mirror")(str(tmp_path / "a.png"), str(tmp_path / "b.png")) == 1.0
    assert metric("check_image_mirror")(str(tmp_path / "a.png"), str(tmp_path / "a.png")) == 0.0
    assert metric("check_structure_sim")(str(tmp_path / "a.png"), str(tmp_path / "a.png")) == 1.0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(7, 30), height=st.integers(7, 30), near=st.booleans())
def test_rgb_ssim_is_scikit_images_to_the_bit(seed: int, width: int, height: int, near: bool) -> None:
    from skimage.metrics import structural_similarity as skimage_ssim

    rng = np.random.default_rng(seed)
    first = rng.integers(0, 256, (height, width, 3)).astype(np.uint8)
    # a near copy: only one channel changed, so the channels' scores differ
    second = first.copy() if near else rng.integers(0, 256, (height, width, 3)).astype(np.uint8)
    if near:
        second[..., 1] = 255 - second[..., 1]
    theirs = skimage_ssim(first, second, win_size=7, channel_axis=2)
    assert structural_similarity_rgb(first, second) == theirs


@pytest.mark.parametrize("size", [(20, 10), (10, 20)])
def test_check_green_background_indexes_x_y_as_osworld(tmp_path: Path, size: tuple[int, int]) -> None:
    Image.new("RGB", size, (0, 200, 0)).save(tmp_path / "green.png")
    Image.new("RGB", size, (255, 255, 255)).save(tmp_path / "white.png")
    Image.new("RGB", (size[0], size[0]), (255, 255, 255)).save(tmp_path / "square.png")
    _same("check_green_background", str(tmp_path / "green.png"), str(tmp_path / "white.png"))
    # a square target over a wider or taller source: OSWorld's [x, y] reads the source's first square
    _same("check_green_background", str(tmp_path / "green.png"), str(tmp_path / "square.png"))


@pytest.mark.parametrize("ignore", [False, True])
def test_check_image_size_crops_to_a_transparency_key_even_when_told_not_to(tmp_path: Path, ignore: bool) -> None:
    # OSWorld's ``a and b or c``: an image with a transparency key is cropped whatever ignore_transparent says
    image = Image.new("RGB", (20, 10), (0, 0, 0))
    image.paste((255, 255, 255), (5, 2, 15, 8))
    image.save(tmp_path / "keyed.png", transparency=(0, 0, 0))
    for rule in ({"width": 20, "height": 10}, {"width": 10, "height": 6}):
        _same("check_image_size", str(tmp_path / "keyed.png"), {**rule, "ignore_transparent": ignore})
    assert metric("check_image_size")(str(tmp_path / "keyed.png"), {"width": 10, "ignore_transparent": False}) == 1.0
