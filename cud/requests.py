"""Kept for compatibility: the request types are in :mod:`cud.protocol.requests` (import :mod:`cud.protocol`)."""

from cud.protocol import *  # noqa: F403
from cud.protocol import __all__ as __all__
