"""cuctl console: serve the web console on 127.0.0.1 until interrupted (:mod:`cud.console`)."""

from __future__ import annotations

import argparse
import sys

from cud.cuctl.client import Client

__all__ = ()


def console(client: Client, args: argparse.Namespace) -> int:
    # aiohttp is imported only here: every other command stays as quick to start as before.
    from cud.console.server import Config, run

    me = client.call("ping")  # a daemon that is not there, or refuses us, fails now (exit 2), not on the page
    rights = "may approve" if me["may_approve"] else "may not approve" if me["may_submit"] else "may only read"
    print(f"cuctl console: acting as {me['peer']['name']} (uid {me['peer']['uid']}, {rights}) on the daemon at "
          f"{client.where}; open the URL on stdout (its token works once); Ctrl-C stops",
          file=sys.stderr, flush=True)
    return run(Config(daemon=client.dialer, port=args.port))
