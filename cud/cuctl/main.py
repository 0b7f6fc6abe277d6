"""cuctl: talk to the cud daemon over its Unix socket, here or over ssh (``--host``).

Exit codes: 0 success; 1 a task (submit --wait, follow) ended in a state other
than succeeded, or its spec's verdict is failed, or a run of ``eval`` did not pass; 2 a usage,
connection, protocol or access error. Reasons go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from cud.cuctl import dial_stdio
from cud.cuctl.client import Client
from cud.cuctl.dial import dialer_for
from cud.errors import CudError

__all__ = ("build_parser", "entry", "main")

Command = Callable[[Client, argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    # argparse exits with 2 on usage errors already; keep that, but never from inside main() for tests.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    """Every command and option of cuctl (docs/cuctl.md lists them; tests/test_docs_complete.py checks it)."""
    # --host, --socket and --json work before or after the command. The copy given to
    # the subcommands defaults to SUPPRESS so it cannot overwrite a value given earlier.
    def common(default: bool) -> _Parser:
        parent = _Parser(add_help=False)
        parent.add_argument("--host", metavar="URL", default=None if default else argparse.SUPPRESS,
                            help="the daemon on another machine: ssh://[USER@]HOST[:PORT][/socket] "
                                 "(default $CUD_HOST; ssh is $CUD_SSH_COMMAND)")
        parent.add_argument("--socket", metavar="PATH", default=None if default else argparse.SUPPRESS,
                            help="daemon socket (default $CUD_SOCKET); with --host, the path on that machine")
        parent.add_argument("--json", action="store_true", help="machine-readable output",
                            default=False if default else argparse.SUPPRESS)
        return parent

    parser = _Parser(prog="cuctl", description="Control the cud desktop-automation daemon.", parents=[common(True)])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    # Each command is "module:function" in cud.cuctl, imported only when it runs: a command
    # starts no slower for the others, and dial-stdio (ssh's far side) needs the standard
    # library alone.
    def add(name: str, func: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, parents=[common(False)])
        p.set_defaults(func=func)
        return p

    p = add("submit", "tasks:submit", "queue a task: a prompt, or a spec file with --spec")
    p.add_argument("prompt", metavar="PROMPT", nargs="?")
    p.add_argument("--spec", metavar="FILE",
                   help="a task spec (TOML, or JSON if it ends in .json): prompt, setup, checks (docs/specs.md); "
                        "--model, --max-steps, --max-duration, the budgets, --approval, --seat, --screen, --seat-tag, "
                        "--rule and the stuck guard's options replace its own")
    p.add_argument("--from-osworld", metavar="FILE.json",
                   help="one OSWorld task file, converted to a spec (docs/osworld.md); its download URLs are "
                        "fetched here, not by the seat; the options replace the spec's own as with --spec")
    p.add_argument("--allow-files-outside", action="store_true",
                   help="let the spec's files (setup src, check equals, metric fixture) be outside its folder, "
                        "links resolved (an absolute path, ../, a link pointing out); refused by default (docs/specs.md): "
                        "only for a spec you trust")
    p.add_argument("--model", metavar="M")
    p.add_argument("--max-steps", type=int, metavar="N")
    p.add_argument("--max-duration", type=int, metavar="S", help="seconds the task may run, approvals included")
    p.add_argument("--max-cost", metavar="AMOUNT",
                   help="what the task may spend, in the daemon's [budget] currency, e.g. 2.00 (docs/budgets.md)")
    p.add_argument("--max-input-tokens", type=int, metavar="N", help="input tokens the task may use (docs/budgets.md)")
    p.add_argument("--max-output-tokens", type=int, metavar="N",
                   help="output tokens the task may use (docs/budgets.md)")
    p.add_argument("--approval", choices=("safety", "actions"))
    p.add_argument("--repeat-limit", type=int, metavar="N",
                   help="stuck after the same action on an unchanged screen N times in a row; 0: never "
                        "(default: the daemon's [guard]; docs/stuck.md)")
    p.add_argument("--cycle-limit", type=int, metavar="N",
                   help="stuck after the same few screens come back in a cycle N rounds; 0: never")
    p.add_argument("--on-stuck", choices=("ask", "fail"),
                   help="when stuck: ask a person (an approval of kind stuck) or end the task as stuck")
    p.add_argument("--seat", metavar="NAME", help="run it on this seat only (default: the first free seat)")
    p.add_argument("--screen", metavar="WxH", help="run it on a seat whose screen is this size, e.g. 1280x800")
    p.add_argument("--seat-tag", action="append", metavar="TAG", dest="seat_tags",
                   help="run it on a seat with this tag ([[seats]] tags, [fleet] tags); repeatable: every one")
    p.add_argument("--rule", action="append", metavar="RULE-JSON",
                   help='a policy rule for this task, ask or deny only (repeatable; docs/targets.md), e.g. '
                        '\'{"action": "type", "app": "xterm", "decision": "ask"}\'')
    p.add_argument("--key", metavar="KEY", help="an idempotency key (1-160 of A-Z a-z 0-9 . _ : @ / # + -): if a "
                   "task has it already, nothing is queued and that task is the answer")
    p.add_argument("--wait", action="store_true", help="block until the task ends; print its final message")
    p.add_argument("--fleet", metavar="HOST:PORT", help="run the spec on the Ray fleet whose head is there, as a "
                   "suite of one (docs/fleet-reference.md; needs cud[fleet])")
    p = add("eval", "eval:eval_suite", "run a suite of task specs, repeated, and write its results (docs/suites.md)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="spec files, or folders of them (*.toml, *.json)")
    p.add_argument("--repeat", type=int, metavar="N", help="run each spec N times (default 1)")
    p.add_argument("--seats", metavar="NAME,...", help="use only these seats (default: all the daemon's); one task "
                                                        "in flight per seat")
    p.add_argument("--tags", metavar="TAG,...", help="only the specs with one of these tags")
    p.add_argument("--exclude", action="append", metavar="GLOB", default=[],
                   help="a folder's files that are not specs: skipped when the GLOB matches the file's name or its "
                        "path (repeatable; hidden files and project files like pyproject.toml are skipped anyway)")
    p.add_argument("--model", metavar="M[,M...]", help="the model of every task, replacing the specs' own (e.g. a "
                   "real model for specs written for the scripted one); several, comma-separated: every spec runs on "
                   "each (x --repeat), and the results are side by side, per model")
    p.add_argument("--out", metavar="DIR", help="a new folder for results.json, index.html and the reports "
                                                "(default eval-YYYYmmdd-HHMMSS)")
    p.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    p.add_argument("--from-osworld", action="store_true", help="the PATHs are OSWorld task files (*.json), their "
                   "domain folders or index files (test_all.json, test_small.json), converted as submit "
                   "--from-osworld does, all before anything runs (docs/osworld.md)")
    p.add_argument("--skip-unconvertible", action="store_true", help="with --from-osworld: run the tasks that "
                   "convert and list each other one as not converted, with why (default: the first that does not "
                   "convert stops the suite before anything runs)")
    p.add_argument("--max-cost", metavar="AMOUNT", help="what the whole suite may spend, in the daemon's [budget] "
                   "currency: shared out as each task's max_cost; what is left unrun when it is spent "
                   "(docs/budgets.md)")
    p.add_argument("--allow-files-outside", action="store_true",
                   help="let the specs' files (setup src, check equals, metric fixture) be outside their folder, "
                        "links resolved (an absolute path, ../, a link pointing out); refused by default (docs/specs.md): "
                        "only for specs you trust")
    p.add_argument("--resume", metavar="DIR", help="go on with the suite in DIR: run only what is not yet judged")
    p.add_argument("--retry-errors", type=int, metavar="N", help="submit a run that ended error (cud or the "
                   "infrastructure could not do its part) up to N more times (default 1; 0: never); a failed run "
                   "is never retried (docs/suites.md)")
    p.add_argument("--fleet", metavar="HOST:PORT", help="run the suite over the Ray fleet whose head is there "
                   "(docs/fleet-reference.md; needs cud[fleet])")
    p.add_argument("--detach", action="store_true", help="with --fleet: run the suite as a Ray job on the head and "
                   "print its JOB id (cuctl fleet status|results JOB)")
    fleet = add("fleet", "fleet:status", "a Ray fleet's suites and approvals (docs/fleet-reference.md)")
    verbs = fleet.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)

    def verb(name: str, func: str, help: str) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=help, parents=[common(False)])
        v.set_defaults(func=func)
        v.add_argument("--fleet", metavar="HOST:PORT", required=True, help="the fleet's head (Ray's GCS address)")
        return v

    verb("status", "fleet:status", "how a detached suite stands").add_argument("job", metavar="JOB")
    v = verb("results", "fleet:results", "a detached suite's results.json, reports, table, index (and JUnit)")
    v.add_argument("job", metavar="JOB")
    v.add_argument("--out", metavar="DIR", help="the folder to write them in (default: JOB)")
    v.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    verb("approvals", "fleet:approvals", "what waits for approval on every node")
    verb("approve", "fleet:approve", "approve NODE:ID").add_argument("id", metavar="NODE:ID")
    v = verb("deny", "fleet:deny", "deny NODE:ID")
    v.add_argument("id", metavar="NODE:ID")
    v.add_argument("--reason", metavar="TEXT")
    p = add("list", "tasks:list_tasks", "list tasks")
    p.add_argument("--key", metavar="KEY", help="only the task submitted with this idempotency key")
    p.add_argument("--key-prefix", metavar="PREFIX", help="only the tasks whose idempotency key starts with PREFIX")
    p.add_argument("--last", type=int, metavar="N", help="only the newest N tasks (default: every one)")
    add("show", "tasks:show", "show one task").add_argument("id", type=int, metavar="ID")
    add("follow", "progress:follow", "show a task's progress until it ends").add_argument("id", type=int, metavar="ID")
    add("cancel", "tasks:cancel", "cancel a task").add_argument("id", type=int, metavar="ID")
    p = add("interrupt", "tasks:interrupt", "end a task that has not ended 'interrupted', with a reason")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--reason", metavar="TEXT", required=True, help="why, kept with the task (e.g. 'retried as "
                                                                   "attempt 2 on host-b, task 17')")
    add("pause", "control:pause", "pause a task before its next screenshot").add_argument("id", type=int, metavar="ID")
    add("resume", "control:resume", "resume a paused task").add_argument("id", type=int, metavar="ID")
    p = add("act", "control:act", "act on a paused task's seat (recorded as a human action)")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("action", metavar="ACTION-JSON", help='e.g. \'{"type": "type", "text": "hello"}\'')
    add("approvals", "approvals:list_approvals", "list pending approvals")
    add("approve", "approvals:approve", "approve a pending approval").add_argument("id", type=int, metavar="ID")
    p = add("deny", "approvals:deny", "deny a pending approval")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--reason", metavar="TEXT")
    p = add("screenshot", "screen:screenshot", "save a seat's display as a PNG")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout, if it is not a terminal)")
    p.add_argument("--seat", metavar="NAME", help="which seat (needed when the daemon has several)")
    add("seats", "seats:list_seats", "list the seats: state, task and screen size")
    p = add("inspect", "targets:inspect", "show the window and accessibility elements at a point of a seat's screen")
    p.add_argument("x", type=int, metavar="X")
    p.add_argument("y", type=int, metavar="Y")
    p.add_argument("--seat", metavar="NAME", help="which seat (needed when the daemon has several)")
    p = add("tree", "targets:tree", "show a seat's accessibility tree with screen bounds")
    p.add_argument("--seat", metavar="NAME", help="which seat (needed when the daemon has several)")
    p.add_argument("--app", metavar="NAME", help="only the application of this name (as the tree names it)")
    p.add_argument("--depth", type=int, metavar="N", help="levels below each window (default 8)")
    p.add_argument("--count", type=int, metavar="N", help="elements in all (default 500)")
    add("ping", "ping:ping", "check that the daemon answers")
    add("metrics", "metrics:metrics", "print the daemon's metrics in the Prometheus text format")
    p = add("report", "report:report", "write a task's record as one self-contained HTML page")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default task-ID.html; - for stdout)")
    p = add("export", "export:export", "write a task's raw record (events and screenshots) as files")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("-o", "--output", metavar="DIR_OR_FILE",
                   help="new directory, or a .tar/.tar.gz/.tgz archive (default task-ID/)")
    p = add("video", "video:video", "write a task's screen recording to a file")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default task-ID.mp4 or .webm; - for stdout)")
    p = add("cp", "session:cp", "copy a file into a seat's home or out of it (SEAT:PATH on one side)")
    p.add_argument("source", metavar="SOURCE", help="a local file (- for stdin) or SEAT:PATH")
    p.add_argument("target", metavar="TARGET", help="SEAT:PATH (a path ending in / keeps the name) or a local path "
                                                    "(- for stdout)")
    p.add_argument("--mode", metavar="OCTAL", help="the file's mode in the seat's home (default: the local file's)")
    p = add("exec", "session:exec_command", "run a command as a seat's user in its session; exits with its status")
    p.add_argument("seat", metavar="SEAT")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARG...]",
                   help="the command, run as given (no shell unless it names one)")
    p.add_argument("--timeout", type=int, metavar="S", help="seconds it may run (default and ceiling: the "
                                                            "daemon's [sessions] max_exec_seconds)")
    p.add_argument("--cwd", metavar="DIR", help="its working directory in the seat's home (default: the home)")
    p = add("clipboard", "session:clipboard", "read or set a seat's clipboard")
    p.add_argument("seat", metavar="SEAT")
    p.add_argument("action", choices=("get", "set"))
    p.add_argument("text", nargs="?", metavar="TEXT", help="with set: the text (default: stdin)")
    add("reset", "session:reset", "return an idle seat's session to a clean state now").add_argument(
        "seat", metavar="SEAT")
    sub.add_parser("dial-stdio", parents=[common(False)],
                   help="relay stdin and stdout to the daemon's socket (what --host runs on the far side of ssh)")
    add("console", "console:console", "serve the web console on 127.0.0.1; prints its URL").add_argument(
        "--port", type=port, default=0, metavar="N", help="TCP port (default 0: a free one)")
    return parser


def port(text: str) -> int:
    """--port: 0 (any free port) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text!r}")
    return int(text)


def _load(target: str) -> Any:
    """The function "module:name" names in cud.cuctl (imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(f"cud.cuctl.{module}"), name)


def _command(target: str) -> Command:
    return _load(target)  # a daemon command (client, args), by the parser's table


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        if args.command == "dial-stdio":
            return dial_stdio.run(args.host, args.socket)
        if args.command == "fleet" or getattr(args, "fleet", None):  # a Ray cluster, not one daemon
            from cud.cuctl import fleet

            # Fleet commands take the arguments alone: the fleet, not one daemon, is what they talk to.
            run: Callable[[argparse.Namespace], int] = (
                {"eval": fleet.eval_fleet, "submit": fleet.submit_fleet}.get(args.command) or _load(args.func))
            return int(run(args))
        with Client(dialer_for(args.host, args.socket)) as client:
            return int(_command(args.func)(client, args))
    except CudError as exc:
        print(f"cuctl: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 2


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
