"""Kept for compatibility: the request types are in :mod:`cud.protocol.requests` (import :mod:`cud.protocol`)."""

from cud.protocol import *
