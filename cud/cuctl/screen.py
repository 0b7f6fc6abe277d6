"""cuctl screenshot: the display as it is now, as a PNG."""

from __future__ import annotations

import argparse
import base64
import os
import sys
from typing import Any

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json
from cud.errors import ProtocolError

__all__ = ()


def screenshot(client: Client, args: argparse.Namespace) -> int:
    parts: list[bytes] = []

    def on_chunk(message: Any) -> None:
        if message.get("type") != "chunk":
            raise ProtocolError(f"unexpected {message.get('type')!r} message in a screenshot")
        parts.append(base64.b64decode(message["data"], validate=True))

    if args.output is None and sys.stdout.isatty():
        raise ProtocolError("refusing to write a PNG to a terminal; use -o FILE or redirect stdout")
    result = client.call("screenshot", on_chunk, seat=args.seat)
    data = b"".join(parts)
    if len(data) != result["bytes"]:
        raise ProtocolError(f"screenshot arrived with {len(data)} bytes, the daemon sent {result['bytes']}")
    if args.output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    tmp = f"{args.output}.part"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, args.output)
    if args.json:
        emit_json({"path": os.path.abspath(args.output), **result})
    else:
        print(f"{args.output}: {result['width']}x{result['height']} PNG, {result['bytes']} bytes")
    return 0
