"""cuctl ping: is the daemon there, and what may I do?"""

from __future__ import annotations

import argparse

from cud.cuctl.client import Client
from cud.cuctl.output import emit_json

__all__ = ()


def ping(client: Client, args: argparse.Namespace) -> int:
    result = client.call("ping")
    if args.json:
        emit_json(result)
    else:
        rights = [r for r, ok in (("submit", result["may_submit"]), ("approve", result["may_approve"]),
                                  ("operate", result.get("may_operate", False))) if ok]
        said = ", ".join(rights[:-1]) + " and " + rights[-1] if len(rights) > 1 else "".join(rights)
        print(f"cud {result['version']} (protocol {result['protocol']}, pid {result['pid']}) answers "
              f"{result['peer']['name']}: may {said or 'do nothing'}")
    return 0
