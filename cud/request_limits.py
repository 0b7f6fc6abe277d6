"""Kept for compatibility: the model API's image limits are in :mod:`cud.model_api.image_limits`."""

from cud.model_api.image_limits import MAX_IMAGE_BYTES, MAX_IMAGES, image_bytes, image_stats, image_urls

__all__ = ("MAX_IMAGES", "MAX_IMAGE_BYTES", "image_urls", "image_bytes", "image_stats")
