"""Kept for compatibility: the reply types are in :mod:`cud.protocol.replies` (import :mod:`cud.protocol`)."""

from cud.protocol import *
