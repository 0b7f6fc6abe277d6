"""The base64 pieces the daemon streams a picture in: decoded, joined and checked, for cuctl and the console."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cud.errors import ProtocolError

__all__ = ("Chunks", "decode_base64")


def decode_base64(text: Any, what: str, **details: Any) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ProtocolError(f"{what} has invalid base64", **details) from None


class Chunks:
    """The ``chunk`` messages of a ``screenshot`` or ``image`` reply: pass it as the call's ``on_stream``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._parts: list[bytes] = []

    def __call__(self, message: Any) -> None:
        if message.get("type") != "chunk":
            raise ProtocolError(f"unexpected {message.get('type')!r} message in a {self.kind!r} reply")
        self._parts.append(decode_base64(message.get("data"), f"a chunk of the {self.kind}"))

    def join(self, result: dict[str, Any]) -> bytes:
        """The whole picture, once the reply ``result`` came; its byte count must match."""
        data = b"".join(self._parts)
        if len(data) != result["bytes"]:
            raise ProtocolError(f"{self.kind} arrived with {len(data)} bytes, the daemon sent {result['bytes']}")
        return data
