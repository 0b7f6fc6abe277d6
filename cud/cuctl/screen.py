"""cuctl screenshot: the display as it is now, as a PNG."""

from __future__ import annotations

import argparse
import os
import sys

from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client
from cud.cuctl.output import emit_json
from cud.errors import ProtocolError

__all__ = ()


def screenshot(client: Client, args: argparse.Namespace) -> int:
    if args.output is None and sys.stdout.isatty():
        raise ProtocolError("refusing to write a PNG to a terminal; use -o FILE or redirect stdout")
    chunks = Chunks("screenshot")
    result = client.call("screenshot", chunks, seat=args.seat)
    data = chunks.join(result)
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
