"""Kept for compatibility: the request checks are in :mod:`cud.protocol.request_checks` (import :mod:`cud.protocol`)."""

from cud.protocol import *
