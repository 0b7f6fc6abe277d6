"""Kept for compatibility: what an action touches, in words, is in :mod:`cud.phrases.targets`."""

from cud.phrases.targets import NAME_LIMIT, identity, identity_phrase, target_phrase

__all__ = ("NAME_LIMIT", "identity", "identity_phrase", "target_phrase")
