"""``python -m cud.scripted --scenario FILE|NAME [--api messages|chat]``: serve a scenario until SIGTERM or SIGINT.

``--api responses`` (the default) answers ``POST /v1/responses``; ``--api messages`` answers
Anthropic's ``POST /v1/messages`` (:mod:`cud.scripted.messages`), for a ``[models]`` entry with
``api = "anthropic"`` whose ``base_url`` is the printed URL; ``--api chat --format NAME`` answers
``POST /v1/chat/completions`` in that chat format's grammar (:mod:`cud.scripted.chat`), for an entry
with ``api = "chat"`` and the same ``format``.

Prints the base URL on stdout once it accepts connections; ``--port-file`` also
writes the port there (atomically, so a poller never reads half a number).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading

from cud.errors import ConfigError
from cud.model_api.chat import FORMATS
from cud.scripted.chat import ScriptedChat
from cud.scripted.messages import ScriptedMessages
from cud.scripted.scenario import bundled_names, scenario_folder
from cud.scripted.server import ScriptedModel

__all__ = ()


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"latency must be a number of seconds >= 0, got {text!r}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cud.scripted", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario", required=True, help=f"a scenario file, or a bundled name ({', '.join(bundled_names())})"
    )
    parser.add_argument("--scenarios", metavar="DIR", action="append", default=[],
                        help="a folder of scenario files: a request whose model is scripted:NAME plays NAME.json "
                             "from it (the others play --scenario); repeated, a later folder's NAME.json wins")
    parser.add_argument("--api", choices=("responses", "messages", "chat"), default="responses",
                        help="the API served: OpenAI's Responses API (default), Anthropic's Messages API, or "
                             "OpenAI-compatible chat completions (an open model's, vLLM's shape)")
    parser.add_argument("--format", choices=tuple(FORMATS), default="ui-tars",
                        help="with --api chat: the chat format the answers are written in (default: ui-tars)")
    parser.add_argument("--port", type=_port, default=0, help="TCP port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--port-file", help="write the port to this file when ready")
    parser.add_argument("--latency", type=_seconds, default=0.0, help="seconds added before every answer")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not log each turn on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="cud.scripted: %(message)s")

    try:
        named = {name: scenario for folder in args.scenarios for name, scenario in scenario_folder(folder).items()}
        model: ScriptedModel
        if args.api == "chat":
            model = ScriptedChat(args.scenario, format=args.format, scenarios=named, latency=args.latency, record=False)
        else:
            serve = ScriptedMessages if args.api == "messages" else ScriptedModel
            model = serve(args.scenario, scenarios=named, latency=args.latency, record=False)
        url = model.start(args.port)
    except ConfigError as exc:
        print(f"cud.scripted: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cud.scripted: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    # Handlers only set a flag; the main thread does the shutdown.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        if args.port_file:
            temporary = f"{args.port_file}.tmp{os.getpid()}"
            with open(temporary, "w", encoding="ascii") as file:
                file.write(f"{model.port}\n")
            os.replace(temporary, args.port_file)
        print(url, flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        model.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
