"""``cud fleet join`` and ``cud fleet leave``: their flags and what they do (docs/fleet-reference.md)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

from cud.daemon.config import default_socket, load_config
from cud.daemon.config_values import tags
from cud.daemon.fleet.config import FleetConfig, check_address, check_name
from cud.errors import ConfigError, CudError

__all__ = ("add_commands", "run")

#: How long ``cud fleet leave`` waits for the running fleet tasks to finish (then says so and exits 1).
LEAVE_SECONDS = 3600.0


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fleet = commands.add_parser("fleet", help="this daemon in a Ray fleet: join or leave (needs cud[fleet])")
    verbs = fleet.add_subparsers(dest="verb", required=True, metavar="VERB")
    join = verbs.add_parser("join", help="join the fleet as a Ray worker node offering this daemon's seats; "
                                         "stays in the foreground")
    join.add_argument("--address", metavar="HOST:PORT", help="the head's Ray address (default [fleet] address)")
    join.add_argument("--config", type=Path, metavar="FILE", help="the daemon's TOML config ([fleet], socket)")
    join.add_argument("--socket", metavar="PATH", help="the daemon's socket (default as cud run's)")
    join.add_argument("--name", metavar="NAME", help="this node's name in the fleet (default [fleet] name, "
                                                     "else the hostname)")
    join.add_argument("--tag", action="append", metavar="TAG", help="a label of every seat here (repeatable; "
                                                                    "added to [fleet] tags)")
    join.add_argument("ray_args", nargs="*", metavar="-- RAY-START-ARG",
                      help="more arguments for 'ray start' after --, e.g. ports (added to [fleet] ray_args)")
    leave = verbs.add_parser("leave", help="drain this node: no new fleet tasks, running ones finish, then it "
                                           "leaves")
    leave.add_argument("--config", type=Path, metavar="FILE", help="the daemon's TOML config (its socket)")
    leave.add_argument("--socket", metavar="PATH", help="the daemon's socket (default as cud run's)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.config is not None:  # the daemon's own file: its socket and [fleet]
            config = load_config(args.config, {"socket": args.socket})
            socket, fleet = config.socket, config.fleet
        else:
            socket, fleet = (Path(args.socket) if args.socket else default_socket()), FleetConfig()
        if args.verb == "leave":
            return _leave(socket)
        changes: dict[str, object] = {}
        if args.address:
            changes["address"] = check_address("--address", args.address)
        if args.name:
            changes["name"] = check_name("--name", args.name)
        if args.tag:
            changes["tags"] = tags("--tag", [*fleet.tags, *args.tag])  # the config's rule and bound, each once
        if args.ray_args:
            changes["ray_args"] = (*fleet.ray_args, *args.ray_args)
        from cud.daemon.fleet.agent import Agent
        from cud.fleet import need_ray

        need_ray("cud fleet join")
        return Agent(socket, dataclasses.replace(fleet, **changes)).run()  # type: ignore[arg-type]  # values checked by the fleet table's reader
    except CudError as exc:
        print(f"cud: {exc.message}", file=sys.stderr)
        return 2


def _leave(socket: Path) -> int:
    from cud.daemon.fleet.agent import pid_file

    marker = pid_file(socket)
    try:
        pid = int(marker.read_text().strip())
    except (OSError, ValueError):
        raise ConfigError(f"no 'cud fleet join' runs for the daemon at {str(socket)!r} ({str(marker)!r} is "
                          "missing)", path=str(marker)) from None
    os.kill(pid, signal.SIGUSR1)
    print(f"cud: draining: node of {socket} leaves once its fleet tasks end", file=sys.stderr, flush=True)
    deadline = time.monotonic() + LEAVE_SECONDS
    while Path(f"/proc/{pid}").exists() and marker.exists():
        if time.monotonic() > deadline:
            print(f"cud: the node has not left after {LEAVE_SECONDS:.0f} s", file=sys.stderr)
            return 1
        time.sleep(0.5)
    return 0
