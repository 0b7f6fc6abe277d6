"""cuctl eval: run a suite of task specs, follow each task to its verdict, and write the results (docs/suites.md).

Specs are read and checked here, before anything is submitted (``cud.suite.plan``, with the
code of ``cuctl submit --spec``), and sent over the one connection cuctl has (a socket, or ssh).
At most one task per seat used is in flight: the daemon's queue does the scheduling, and a task
submitted is one results.json knows of, so ``--resume`` follows it instead of submitting it again.
The tasks are watched with ``show`` (what ``follow`` returns at the end), reports and videos
fetched as each ends. If the daemon goes away, the suite keeps results.json and waits for it
(:data:`RECONNECT_SECONDS`); tasks it had running come back ``interrupted``: an ``error``, re-run as
any run that ended ``error`` is, up to ``--retry-errors`` more times (cud.suite.results). Its exit
status is the one rule's (:func:`cud.outcome.exit_status`): 0 all passed, 1 any failed, 3 none
failed but some ended ``error``.
While a run waits in the daemon's queue (the seats that would do unavailable or busy, the day's cap),
the suite says why (:meth:`cud.cuctl.eval_loop.Suite._wait_reason`): on the status line, or, when stderr is not a
terminal, in a line at once, when it changes and every minute (:class:`cud.cuctl.progress.WaitNotice`).
``--model a,b,c``: every spec-run on each model, side by side (:meth:`cud.suite.results.Results.models`).
``--from-osworld``: OSWorld's task files, folders or index files, all converted first (cud.suite.plan); with
``--skip-unconvertible`` one that does not convert is a refused run (cud.suite.results), and the table is per domain.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cud.budget import format_amount
from cud.cuctl.client import Client
from cud.cuctl.eval_loop import Suite, meets, say
from cud.cuctl.output import emit_json, printable, table
from cud.cuctl.progress import live_terminal
from cud.errors import ConfigError, NotFound
from cud.osworld.convert import OSWORLD_HOME, seats_screen, sees_home_user
from cud.outcome import exit_status
from cud.protocol import SeatView
from cud.suite.budget import SuiteBudget
from cud.suite.index import write_index
from cud.suite.junit import write_junit
from cud.suite.plan import Planned, Unconverted, plan_all, reload
from cud.suite.results import RETRY_ERRORS, Results
from cud.suite.words import not_converted_lines, summary_table

__all__ = ()

#: The most ``--retry-errors`` may be.
MAX_RETRY_ERRORS = 10


def eval_suite(client: Client, args: argparse.Namespace) -> int:
    views: list[SeatView] = client.call("seats")
    results, planned, folder = start_results(args, views)
    chosen = names(args.seats, "--seats") or results.suite.get("seats")
    seats, impossible = _seats(views, chosen, planned)
    results.suite["seats"] = chosen
    results.save(folder)
    suite = Suite(client, results, {p.name: p for p in planned}, folder, chosen, seats)
    try:
        suite.refuse(impossible)
        suite.run()
    except KeyboardInterrupt:
        return interrupted(results, folder, args)
    return finish(results, folder, args)


def interrupted(results: Results, folder: Path, args: argparse.Namespace) -> int:
    """Ctrl-C: what is known written (results.json, the index, JUnit with the runs not done ``<skipped>``),
    and one line saying how to go on; exit 130, as any command Ctrl-C stops. Tasks in flight run on."""
    results.save(folder)
    if args.junit:
        write_junit(results, Path(args.junit))
    write_index(results, folder)
    runs = results.spec_runs()
    done = sum(1 for r in runs if r.last.judged)
    sys.stderr.write("\r\x1b[K" if live_terminal(sys.stderr) else "\n")
    print(f"cuctl eval: interrupted with {done} of {len(runs)} runs done (results so far in "
          f"{folder / 'results.json'}{', JUnit: ' + str(args.junit) if args.junit else ''}); "
          f"resume with: cuctl eval --resume {folder}", file=sys.stderr, flush=True)
    return 130


def start_results(args: argparse.Namespace,
                  seats: list[SeatView] | None = None) -> tuple[Results, list[Planned], Path]:
    """The suite asked for (or the one ``--resume DIR`` names), its specs checked, and its output folder made.
    ``seats``: the daemon's, when it is one daemon (an OSWorld suite for seats that all see their home at
    /home/user runs its commands as written: :func:`sees_home_user`)."""
    tags = names(args.tags, "--tags")
    if args.resume:
        if (args.paths or tags or args.repeat is not None or args.out or args.model is not None or args.from_osworld
                or args.max_cost is not None or args.exclude or getattr(args, "skip_unconvertible", False)):
            raise ConfigError("cuctl eval --resume DIR takes no PATH, --repeat, --tags, --exclude, --model, --out, "
                              "--max-cost, --from-osworld or --skip-unconvertible: the suite "
                              "is the one DIR's results.json describes", key="resume")
        folder = Path(args.resume)
        results = Results.load(folder)
        if getattr(args, "retry_errors", None) is not None:  # the one option a resumed suite may change
            results.suite["retry_errors"] = retry_errors(args)
            for attempt in results.attempts:
                attempt.retry_errors = results.retry_errors
        used = names(args.seats, "--seats") or results.suite.get("seats")
        planned = reload(results.suite["files"], osworld=bool(results.suite.get("osworld")),
                         allow_outside=args.allow_files_outside, as_written=sees_home_user(seats, used),
                         screen=seats_screen(seats, used), not_converted=results.suite.get("not_converted", ()))
    else:
        if not args.paths:
            raise ConfigError("cuctl eval needs a spec file or a folder of them (or --resume DIR)", key="paths")
        repeat = 1 if args.repeat is None else args.repeat
        if not 1 <= repeat <= 1000:
            raise ConfigError(f"--repeat must be 1 to 1000, got {repeat}", key="repeat", value=repeat)
        models(args.model)  # a bad --model is refused before the specs are read or the folder made
        skip = getattr(args, "skip_unconvertible", False)
        as_written = bool(args.from_osworld) and sees_home_user(seats, names(args.seats, "--seats"))
        found = plan_all(args.paths, tags, osworld=args.from_osworld, skip_unconvertible=skip,
                         allow_outside=args.allow_files_outside, exclude=args.exclude, note=say, as_written=as_written,
                         screen=seats_screen(seats, names(args.seats, "--seats")))
        if as_written:
            say(f"every seat it uses sees its home at {OSWORLD_HOME}: the OSWorld tasks' commands run as written")
        unconverted = sum(1 for p in found if isinstance(p, Unconverted))
        if unconverted:
            say(f"{unconverted} of {len(found)} OSWorld tasks do not convert (--skip-unconvertible): each is listed "
                f"as not converted, with why, in results.json, the table and the index")
        folder = Path(args.out or datetime.now().strftime("eval-%Y%m%d-%H%M%S"))
        try:
            folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise ConfigError(f"--out {str(folder)!r} already exists; give a new folder (or --resume it)",
                              key="out", value=str(folder)) from None
        results = new_results(args, found, tags, repeat)
        planned = [p for p in found if isinstance(p, Planned)]
    (folder / "reports").mkdir(exist_ok=True)
    return results, planned, folder


def new_results(args: argparse.Namespace, planned: Sequence[Planned | Unconverted], tags: list[str],
                repeat: int) -> Results:
    """A new suite's results: how it was asked for, no attempt yet (an OSWorld suite's: :meth:`Results.osworld`)."""
    chosen = models(args.model)
    results = Results({"paths": list(args.paths), "specs": [p.name for p in planned],
                       "files": {p.name: str(p.path) for p in planned}, "repeat": repeat, "tags": tags,
                       "model": chosen[0] if len(chosen) == 1 else None, "osworld": args.from_osworld,
                       **({"models": chosen} if len(chosen) > 1 else {}),
                       "max_cost": None if args.max_cost is None else format_amount(SuiteBudget(args.max_cost).cap),
                       "seats": None, "retry_errors": retry_errors(args),
                       "started_at": datetime.now(UTC).isoformat(timespec="seconds")})
    if args.from_osworld:
        results.osworld(planned, bool(getattr(args, "skip_unconvertible", False)))
    return results


def models(text: str | None) -> list[str]:
    """``--model a,b,c``: the models every spec runs on, each (none: the specs' own; one: as ``--model M`` always
    was). An empty name, or one given twice, is a usage error naming what was given."""
    if text is None:
        return []
    chosen = [n.strip() for n in text.split(",")]
    if not all(chosen):
        raise ConfigError(f"--model takes one model name or more, comma-separated, none empty; got {text!r}",
                          key="model", value=text)
    twice = sorted({n for n in chosen if chosen.count(n) > 1})
    if twice:
        raise ConfigError(f"--model names {', '.join(map(repr, twice))} more than once (in {text!r}): each model "
                          f"runs every spec once per --repeat", key="model", value=text)
    return chosen


def retry_errors(args: argparse.Namespace) -> int:
    """``--retry-errors N``: how many more times a run that ended ``error`` is submitted (0: never)."""
    value = getattr(args, "retry_errors", None)
    if value is None:
        return RETRY_ERRORS
    if not 0 <= value <= MAX_RETRY_ERRORS:
        raise ConfigError(f"--retry-errors must be 0 to {MAX_RETRY_ERRORS}, got {value}", key="retry_errors",
                          value=value)
    return int(value)


def finish(results: Results, folder: Path, args: argparse.Namespace) -> int:
    """JUnit (``--junit``), the index, the table (or ``--json``); the exit status (cud.outcome.exit_status): 0 when
    every spec-run passed, 1 when any failed, 3 when none failed but some ended ``error`` (or were not judged)."""
    if args.junit:
        write_junit(results, Path(args.junit))
    write_index(results, folder)
    summary = results.summary()
    if args.json:
        emit_json({"out": str(folder), **summary})
    else:
        print_table(summary)
        for line in not_converted_lines(results.attempts):
            print(printable(line))
        print(f"results: {folder / 'results.json'}, index: {folder / 'index.html'}"
              + (f", JUnit: {args.junit}" if args.junit else ""))
    runs = results.spec_runs()
    return exit_status(r.last.ended_as if r.last.judged and r.last.ended_as else "error" for r in runs)


def names(text: str | None, option: str) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if text is not None and not names:
        raise ConfigError(f"{option} needs one name or more, comma-separated, got {text!r}", key=option)
    return names


def _seats(views: list[SeatView], chosen: list[str] | None,
           planned: list[Planned]) -> tuple[list[SeatView], dict[str, NotFound]]:
    """The seats the suite uses (all the daemon's without --seats; a name it lacks is a usage error), and
    why each spec none of --seats could take (pinned elsewhere, or needing a screen or tags none offers)
    is refused: as the daemon refuses, at submit, one none of its seats could take without --seats. ``views``: the
    daemon's seats."""
    known = [s["name"] for s in views]
    for name in chosen or []:
        if name not in known:
            raise ConfigError(f"--seats names {name!r}; the daemon's seats are {', '.join(known)}", key="seats",
                              value=name)
    used = [s for s in views if not chosen or s["name"] in chosen]
    impossible: dict[str, NotFound] = {}
    for p in planned:
        if not chosen:
            continue
        if p.spec.seat is not None and p.spec.seat not in chosen:
            impossible[p.name] = NotFound(f"not submitted: {p.name} is pinned to seat {p.spec.seat!r}, which --seats "
                                          f"{','.join(chosen)} leaves out", key="seats", seat=p.spec.seat)
        elif not any(meets(p.spec.needs, s) for s in used):
            impossible[p.name] = NotFound(f"not submitted: {p.name} needs {p.spec.needs.words()}, which none of "
                                          f"--seats {','.join(chosen)} offers", key="seats", value=",".join(chosen))
    return used, impossible


def print_table(summary: dict[str, Any]) -> None:
    """Per spec: runs, passes, failures, errors (cud could not tell), the pass rate over the runs told with its 95%
    Wilson interval, mean steps, tokens and seconds, and what its tasks cost together (every attempt). An OSWorld
    suite's per domain instead, with its tasks and how many converted; a suite of several models' per model, each
    with its total, then all (cud.suite.words.summary_table)."""
    table(*summary_table(summary))
