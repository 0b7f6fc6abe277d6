"""``cud run``: the command line of the daemon.

Exit codes: 0 after a clean stop, 1 when the daemon could not start or failed,
2 for a usage or configuration error, a state directory another daemon holds
included (the reason is on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from cud.daemon.config import METRICS_INTERVAL, load_config
from cud.daemon.fleet.cli import add_commands as add_fleet_commands
from cud.daemon.fleet.cli import run as run_fleet
from cud.daemon.store.state_lock import StateLock
from cud.errors import ConfigError, CudError

__all__ = ("build_parser", "main")


def build_parser() -> argparse.ArgumentParser:
    """``cud run``'s flags (docs/daemon.md lists them; tests/test_docs_complete.py checks it)."""
    parser = argparse.ArgumentParser(prog="cud", description="Desktop-automation daemon for X11 and VNC sandboxes.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run the daemon in the foreground")
    run.add_argument("--config", type=Path, metavar="FILE", help="TOML config file (flags override it)")
    run.add_argument("--socket", metavar="PATH", help="Unix socket (default $CUD_SOCKET, /run/cud/cud.sock as root, "
                     "else $XDG_RUNTIME_DIR/cud.sock)")
    run.add_argument("--state-dir", metavar="DIR", help="where the database and trajectories live")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--display", metavar=":N", help="X display to drive (default $DISPLAY)")
    where.add_argument("--vnc", metavar="HOST::PORT", help="VNC server to drive instead of an X display")
    where.add_argument("--seat", action="append", metavar="NAME=DISPLAY",
                       help="a seat: an X display driven one task at a time (repeat for more seats)")
    run.add_argument("--vnc-password-file", metavar="F", help="file holding the VNC password")
    run.add_argument("--model", metavar="NAME", help="default model for tasks")
    run.add_argument("--approval", choices=("safety", "actions"), help="approval mode")
    run.add_argument("--approval-timeout", type=float, metavar="S", help="seconds an approval may stay pending")
    run.add_argument("--max-steps", type=int, metavar="N", help="model turns per task, default and ceiling")
    run.add_argument("--max-duration", type=int, metavar="S",
                     help="seconds a task may run (approvals included), default and ceiling")
    run.add_argument("--max-cost", metavar="AMOUNT",
                     help="what a task may spend in [budget] currency, default and ceiling (docs/budgets.md)")
    run.add_argument("--max-input-tokens", type=int, metavar="N", help="a task's input tokens, default and ceiling")
    run.add_argument("--max-output-tokens", type=int, metavar="N", help="a task's output tokens, default and ceiling")
    run.add_argument("--metrics-textfile", metavar="PATH",
                     help=f"write the metrics there every {METRICS_INTERVAL:g} s ([metrics] interval), "
                          "for node_exporter's textfile collector")
    run.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    add_fleet_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "fleet":
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        return run_fleet(args)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        # journald stamps the time itself; the level prefix lets it set the priority.
        format="%(levelname)s %(name)s: %(message)s",
    )
    # The SDK's HTTP logging would show request details; keep it out of the journal.
    logging.getLogger("openai").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    os.umask(0o077)  # every file the daemon makes is private unless it says otherwise
    overrides = {
        "socket": args.socket,
        "state_dir": args.state_dir,
        "display": args.display,
        "vnc": args.vnc,
        "vnc_password_file": args.vnc_password_file,
        "seat": args.seat,
        "model": args.model,
        "approval": args.approval,
        "approval_timeout": args.approval_timeout,
        "max_steps": args.max_steps,
        "max_duration": args.max_duration,
        "max_cost": args.max_cost,
        "max_input_tokens": args.max_input_tokens,
        "max_output_tokens": args.max_output_tokens,
        "metrics_textfile": args.metrics_textfile,
    }
    try:
        config = load_config(args.config, overrides)
        # Before anything reads a row, and before the driver stack is imported: a second
        # daemon on a live one's state dir is refused at once and changes nothing.
        state_lock = StateLock.acquire(config.state_dir, config.socket)
    except ConfigError as exc:
        print(f"cud: {exc.message}", file=sys.stderr)
        return 2
    from cud.daemon.service import Daemon  # after config: a usage error never needs the driver stack

    try:
        asyncio.run(Daemon(config, state_lock).run())
    except ConfigError as exc:
        print(f"cud: {exc.message}", file=sys.stderr)
        return 2
    except CudError as exc:
        print(f"cud: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
