"""The Responses API's per-request image limits, and how a request's images are counted.

The API's images-and-vision guide allows at most 500 image inputs and 50 MB of image
data in one request. The daemon keeps its replayed requests under these, and the
scripted model refuses requests over them, both by this one count.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ("MAX_IMAGES", "MAX_IMAGE_BYTES", "image_urls", "image_bytes", "image_stats")

MAX_IMAGES = 500
MAX_IMAGE_BYTES = 50_000_000


def image_urls(items: Iterable[Any]) -> Iterator[str]:
    """Every image URL the input items carry: computer screenshots and ``input_image`` parts (and, in a chat
    completion's messages, ``image_url`` parts)."""
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "computer_call_output":
            output = item.get("output")
            url = output.get("image_url") if isinstance(output, dict) else None
            if isinstance(url, str):
                yield url
        content = item.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
                    yield part["image_url"]
                elif part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                    url = part["image_url"].get("url")
                    if isinstance(url, str):
                        yield url


def image_bytes(url: str) -> int:
    """The bytes of image data a URL carries: a base64 data URL's decoded size, else none (fetched by the API)."""
    if not url.startswith("data:"):
        return 0
    comma = url.find(",")
    if comma < 0:
        return 0
    payload = len(url) - comma - 1
    padding = (url.endswith("=")) + (url.endswith("=="))
    return max(0, payload * 3 // 4 - padding)


def image_stats(items: Iterable[Any]) -> tuple[int, int]:
    """(images, image bytes) of the input items."""
    count = total = 0
    for url in image_urls(items):
        count += 1
        total += image_bytes(url)
    return count, total
