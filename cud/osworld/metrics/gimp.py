"""OSWorld's GIMP image metrics: structure (SSIM, MSE), brightness, saturation, contrast, size, config.

Ported from OSWorld's desktop_env/evaluators/metrics/gimp.py (desktop-env 1.0.2, Apache-2.0),
quirks kept (check_green_background indexes its arrays [x, y]; check_image_size's ``and``/``or``
precedence). OSWorld's ``structure_check_by_ssim`` calls scikit-image's SSIM with
``channel_axis=2`` on RGB arrays: the mean of the three channels' grey SSIM, which
:func:`cud.osworld.metrics.images.structural_similarity` gives bit for bit. The metrics that need
OpenCV (check_sharper, compare_triangle_positions) are left out.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageStat

from cud.osworld.metrics.images import structural_similarity

__all__ = (
    "check_brightness_decrease_and_structure_sim", "check_config_status", "check_contrast_increase_and_structure_sim",
    "check_file_exists_and_structure_sim", "check_green_background", "check_image_file_size", "check_image_mirror",
    "check_image_size", "check_palette_and_structure_sim", "check_saturation_increase_and_structure_sim",
    "check_structure_sim", "check_structure_sim_resized", "check_textbox_on_leftside", "check_triangle_position",
    "compare_image_list", "structural_similarity_rgb",
)


def compare_image_list(pred_img_path_list: str | list[str] | None, gold_img_path_list: str | list[str] | None) -> float:
    """1.0 iff each predicted image, resized and converted to its gold's size and mode, equals it."""
    if not isinstance(pred_img_path_list, list):
        pred_img_path_list = [pred_img_path_list]  # type: ignore[list-item]
        gold_img_path_list = [gold_img_path_list]  # type: ignore[list-item]
    # OSWorld's plain zip: a gold list None raises (TypeError), a shorter one ends the comparison
    for pred_img_path, gold_img_path in zip(pred_img_path_list, gold_img_path_list, strict=False):  # type: ignore[arg-type]
        if not pred_img_path or not gold_img_path:
            return 0.0
        pred_img: Image.Image = Image.open(pred_img_path)
        gold_img = Image.open(gold_img_path)
        if pred_img.size != gold_img.size:
            pred_img = pred_img.resize(gold_img.size, Image.Resampling.LANCZOS)
        if pred_img.mode != gold_img.mode:
            pred_img = pred_img.convert(gold_img.mode)
        if ImageChops.difference(pred_img, gold_img).getbbox():
            return 0.0
    return 1.0


def _brightness(image: Image.Image) -> float:
    return float(ImageStat.Stat(image.convert("L")).mean[0])


def _normalize_brightness(image: Image.Image, target_brightness: float) -> Image.Image:
    factor = target_brightness / _brightness(image)
    return image.point(lambda x: min(255, max(0, int(x * factor))))


def _structure_check_by_mse(img1: Image.Image, img2: Image.Image, threshold: float = 0.03) -> bool:
    if img1.size != img2.size:
        img1 = img1.resize(img2.size, Image.Resampling.LANCZOS)
    if img1.mode != "RGB":
        img1 = img1.convert("RGB")
    if img2.mode != "RGB":
        img2 = img2.convert("RGB")
    mse = np.mean((np.array(img1, dtype=np.float32) / 255 - np.array(img2, dtype=np.float32) / 255) ** 2)
    return bool(mse < threshold)


def structural_similarity_rgb(array1: np.ndarray[Any, Any], array2: np.ndarray[Any, Any]) -> float:
    """scikit-image's ``structural_similarity(a, b, win_size=7, channel_axis=2)``: the channels' mean."""
    per_channel = np.empty(array1.shape[2], dtype=np.float64)
    for ch in range(array1.shape[2]):
        per_channel[ch] = structural_similarity(array1[..., ch], array2[..., ch])
    return float(per_channel.mean())


def _structure_check_by_ssim(img1: Image.Image, img2: Image.Image, threshold: float = 0.9) -> bool:
    min_size = 7
    if img1.width < min_size or img1.height < min_size or img2.width < min_size or img2.height < min_size:
        return False
    if img1.mode != "RGB":
        img1 = img1.convert("RGB")
    if img2.mode != "RGB":
        img2 = img2.convert("RGB")
    if img1.size != img2.size:
        return False
    # OSWorld's fallback for a side under 7 is unreachable after the check above: the window is 7
    return structural_similarity_rgb(np.array(img1), np.array(img2)) >= threshold


def check_brightness_decrease_and_structure_sim(src_path: str | None, tgt_path: str | None, threshold: float = 0.03) -> float:
    """1.0 iff src is darker than tgt and, both brought to brightness 128, their MSE is under ``threshold``."""
    if src_path is None or tgt_path is None:
        return 0.
    img_src = Image.open(src_path)
    img_tgt = Image.open(tgt_path)
    brightness_reduced = _brightness(img_tgt) > _brightness(img_src)
    structure_same = _structure_check_by_mse(_normalize_brightness(img_src, 128), _normalize_brightness(img_tgt, 128),
                                             threshold=threshold)
    return 1. if brightness_reduced and structure_same else 0.


def check_saturation_increase_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src's mean HSV saturation is above tgt's and their hue and value planes are alike (SSIM >= 0.9)."""
    if src_path is None or tgt_path is None:
        return 0.
    hsv_img_src = Image.open(src_path).convert("HSV")
    hsv_img_tgt = Image.open(tgt_path).convert("HSV")
    saturation_increased = np.mean(np.array(hsv_img_tgt.split()[1])) < np.mean(np.array(hsv_img_src.split()[1]))
    h1, _, v1 = hsv_img_src.split()
    h2, _, v2 = hsv_img_tgt.split()
    structure_same = _structure_check_by_ssim(h1, h2) and _structure_check_by_ssim(v1, v2)
    return 1. if saturation_increased and structure_same else 0.


def check_file_exists_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src is a file and its structure is tgt's (SSIM >= 0.9)."""
    if src_path is None or tgt_path is None:
        return 0.
    if not os.path.isfile(src_path):
        return 0.
    return 1. if _structure_check_by_ssim(Image.open(src_path), Image.open(tgt_path)) else 0.


def check_triangle_position(tgt_path: str | None) -> float:
    """1.0 iff the second most common colour's centroid is within 5% of the image's centre on each axis."""
    if tgt_path is None:
        return 0.
    img_array = np.array(Image.open(tgt_path))
    unique_colors, counts = np.unique(img_array.reshape(-1, img_array.shape[2]), axis=0, return_counts=True)
    triangle_color = unique_colors[np.argsort(counts)][1]
    triangle_coords = np.argwhere(np.all(img_array == triangle_color, axis=2))
    centroid = triangle_coords.mean(axis=0)
    image_center = np.array(img_array.shape[:2]) / 2
    tolerance = 0.05 * np.array(img_array.shape[:2])
    return 1. if bool(np.all(np.abs(centroid - image_center) < tolerance)) else 0.


def check_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff the two images have one size and SSIM >= 0.9 in RGB; 0.0 on any error, as OSWorld."""
    if src_path is None or tgt_path is None:
        return 0.
    try:
        img_src = Image.open(src_path)
        img_tgt = Image.open(tgt_path)
        if img_src.size != img_tgt.size:
            return 0.0
        return 1.0 if _structure_check_by_ssim(img_src, img_tgt) else 0.0
    except Exception:  # OSWorld scores any failure (unreadable image...) 0.0
        return 0.0


def check_structure_sim_resized(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src (cropped to its opaque part if it has transparency) resized to tgt's size is alike (SSIM >= 0.9)."""
    if src_path is None or tgt_path is None:
        return 0.
    img_src: Image.Image = Image.open(src_path)
    img_tgt: Image.Image = Image.open(tgt_path)
    if img_src.mode in ("RGBA", "LA") or "transparency" in img_src.info:
        if img_src.mode != "RGBA":
            img_src = img_src.convert("RGBA")
        bbox = img_src.split()[-1].getbbox()
        if bbox is None:
            return 0.
        img_src_resized = img_src.crop(bbox).convert("RGB").resize(img_tgt.size)
    else:
        img_src_resized = img_src.resize(img_tgt.size)
    if img_tgt.mode != "RGB":
        img_tgt = img_tgt.convert("RGB")
    return 1. if _structure_check_by_ssim(img_src_resized, img_tgt) else 0.


def check_contrast_increase_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src's pixel standard deviation is above tgt's and SSIM >= 0.65."""
    if src_path is None or tgt_path is None:
        return 0.
    source_image = Image.open(src_path)
    target_image = Image.open(tgt_path)
    higher_contrast = np.std(np.asarray(target_image, dtype=np.float32)) < np.std(np.asarray(source_image, dtype=np.float32))
    structure_same = _structure_check_by_ssim(source_image, target_image, threshold=0.65)
    return 1. if higher_contrast and structure_same else 0.


def check_config_status(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """1.0 iff a line ``(key ... value)`` of GIMP's config file has rule's key (one word or two) and value last."""
    if actual_config_path is None:
        return 0.
    with open(actual_config_path) as f:
        content = f.readlines()
    for line in content:
        if line.startswith("#") or line == "\n":
            continue
        items = line.strip().lstrip("(").rstrip(")\n").split()
        if isinstance(rule["key"], str):
            if items[0] == rule["key"] and items[-1] == rule["value"]:
                return 1.
        elif isinstance(rule["key"], list) and len(rule["key"]) == 2:
            if items[0] == rule["key"][0] and items[1] == rule["key"][1] and items[-1] == rule["value"]:
                return 1.
    return 0.


def check_image_size(src_path: str | None, rule: dict[str, Any]) -> float:
    """1.0 iff the image (or its opaque part, see below) has rule's ``height`` and ``width`` where given."""
    if src_path is None:
        return 0.
    img: Image.Image = Image.open(src_path)
    ignore_transparent = rule.get("ignore_transparent", False)
    # OSWorld's precedence: (ignore_transparent and mode in (...)) or 'transparency' in info
    if ignore_transparent and img.mode in ("RGBA", "LA") or "transparency" in img.info:
        if img.mode != "RGBA":
            img = img.convert("RGBA")
        bbox = img.split()[-1].getbbox()
        if bbox is None:
            actual_width = actual_height = 0
        else:
            actual_width, actual_height = bbox[2] - bbox[0], bbox[3] - bbox[1]
    else:
        actual_width, actual_height = img.size
    height_same = actual_height == rule["height"] if rule.get("height", None) is not None else True
    width_same = actual_width == rule["width"] if rule.get("width", None) is not None else True
    return 1. if height_same and width_same else 0.


def _open_loaded(file_path: str) -> Image.Image | None:
    """OSWorld's safe_open_image_with_retry on a file that no longer changes: None if absent, empty or unreadable."""
    if not file_path or not os.path.exists(file_path) or os.path.getsize(file_path) == 0:
        return None
    try:
        image = Image.open(file_path)
        image.load()
    except Exception:  # OSWorld gives up (None) on any failure to open
        return None
    return image


def check_palette_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src is a palette ("P") image and, in RGB, alike to tgt (SSIM >= 0.9)."""
    if src_path is None or tgt_path is None:
        return 0.
    source_image = _open_loaded(src_path)
    if source_image is None:
        return 0.
    try:
        palette_based = source_image.mode == "P"
        target_image = _open_loaded(tgt_path)
        if target_image is None:
            return 0.
        try:
            structure_same = _structure_check_by_ssim(source_image.convert("RGB"), target_image)
            return 1.0 if palette_based and structure_same else 0.0
        finally:
            target_image.close()
    except Exception:  # OSWorld scores any failure 0.0
        return 0.
    finally:
        source_image.close()


def check_textbox_on_leftside(src_path: str | None) -> float:
    """1.0 iff the leftmost dark (grey < 128) pixel of any row is in the left 5% of the image."""
    if src_path is None:
        return 0.
    source_image = Image.open(src_path)
    gray = np.array(source_image.convert("L"))
    width = source_image.size[0]
    # the first dark pixel of each row, as OSWorld's row-by-row scan finds it
    dark = gray < 128
    rows = dark.any(axis=1)
    left_most_dark_pixel = int(dark.argmax(axis=1)[rows].min()) if rows.any() else width
    return 1. if left_most_dark_pixel < width * 0.05 else 0.


def check_image_mirror(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff src flipped left-right is alike to tgt (SSIM >= 0.99)."""
    if src_path is None or tgt_path is None:
        return 0.
    transposed_image = Image.open(src_path).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return 1. if _structure_check_by_ssim(transposed_image, Image.open(tgt_path), 0.99) else 0.


def check_green_background(src_path: str | None, tgt_path: str | None) -> float:
    """1.0 iff every src pixel under a non-black tgt pixel is green (G above R and B); arrays indexed [x, y] as OSWorld."""
    if src_path is None or tgt_path is None:
        return 0.
    target_image = Image.open(tgt_path)
    source_pixels = np.array(Image.open(src_path))
    target_pixels = np.array(target_image)
    for x in range(target_image.width):
        for y in range(target_image.height):
            if tuple(target_pixels[x, y][:3]) != (0, 0, 0):
                r, g, b = source_pixels[x, y][:3]
                if not (g > r and g > b):
                    return 0.
    return 1.


def check_image_file_size(src_path: str | None, rule: dict[str, Any]) -> float:
    """1.0 iff the file is smaller than rule's ``max_size`` bytes."""
    if src_path is None:
        return 0.0
    return 1.0 if os.path.getsize(src_path) < rule["max_size"] else 0.0
