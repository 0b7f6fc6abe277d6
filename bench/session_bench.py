"""Sessions (issues 28 and 36): how long a seat's reset takes, for an empty home and a 100 MB one, with and
without a seat of its own, and why it copies.

1. **The reset** (``SeatSession.reset``, as the daemon runs it before a task): a seat
   user of its own (``useradd --system`` as root, removed at the end; not as root, the
   user running the bench), openbox on a private Xvfb, and before every reset a dirty
   session: an xterm and two detached processes started, files written into the home,
   the clipboard set. ``ROUNDS`` resets per template and per seat, p50 and p95, for two
   seats taking turns: one without isolation, as before, and one with
   ``Isolation(private_tmp=True, home_path="/home/user")`` (issue 36), whose dirty session
   also writes into its own /tmp, /var/tmp and /dev/shm. Such a seat's reset drops its
   namespaces and the next command makes new ones (``nsexec.py make``), so the time that
   counts is the reset **and the first command after it** (``/bin/true``): measured for
   both seats, from the call of the reset until that command ended. Issue 36's goal for
   it: p95 <= 1 s for an empty home, <= 3 s for a 100 MB one (issue 28's: <= 3 s).
2. **A command's start**: ``/bin/true`` through ``SeatSession.run``, ``COMMANDS`` times per
   seat in turns, once the namespaces are there: without isolation, and with it (through
   ``nsexec.py enter``); p50, p95 and their ratio.
3. **The mechanism**, on the 100 MB template alone: ``cp -a`` (what the reset runs, with
   ``--reflink=auto``, which is the same on a file system without reflinks), against an
   overlay mount (mount, then umount and empty the upper dir: what a reset by overlayfs
   costs; root only) and ``rsync -a --delete`` onto a home the task changed (if rsync is
   installed).

Isolation needs root: not as root, the seat with isolation is left out and the report says so.

Run alone: ``.venv/bin/python -m bench.session_bench [--rounds 20] [--commands 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import table
from cud.daemon.session.namespace import Isolation
from cud.daemon.session.processes import SeatSession, SessionPlaces
from cud.daemon.session.user import SeatUser
from tests.support.desktop import start_desktop
from tests.support.seat_users import SeatUsers, make_home

ROUNDS = 20
#: Issue 28's goal for the reset, at p95 (a seat without isolation).
GOAL_SECONDS = 3.0
#: Issue 36's goals for the reset and the first command after it, at p95, per template.
ISOLATED_GOALS = {"empty home": 1.0, "100 MB home": 3.0}
#: The seat of its own measured: the session's own temp places, its home at /home/user.
ISOLATION = Isolation(private_tmp=True, home_path="/home/user")
#: Commands started per seat for a command's start cost.
COMMANDS = 50
#: What a task leaves in the session's own temp places: a file of 1 MiB, a folder in a folder, a FIFO, in each.
TEMP_MESS = ("for place in /tmp /var/tmp /dev/shm; do mkdir -p $place/task/deep && "
             "head -c 1048576 /dev/urandom > $place/task/blob.bin && echo left > $place/task/deep/note && "
             "mkfifo $place/task/fifo; done")
#: After the reset, in the new namespaces: none of it is there (else the bench stops, naming the command).
TEMP_GONE = "for place in /tmp /var/tmp /dev/shm; do test ! -e $place/task || exit 1; done"
#: The 100 MB template: 100 files of 1 MiB in 10 folders, and 200 small ones.
BIG_FILES, BIG_FILE_BYTES, SMALL_FILES = 100, 1 << 20, 200


def _make_template(path: Path, big: bool) -> None:
    path.mkdir()
    (path / "Desktop").mkdir()
    (path / "Desktop" / "notes.txt").write_text("first line\n")
    if not big:
        return
    for index in range(BIG_FILES):
        folder = path / f"data{index % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"blob{index}.bin").write_bytes(os.urandom(BIG_FILE_BYTES))
    for index in range(SMALL_FILES):
        (path / "Desktop" / f"small{index}.txt").write_text(f"file {index}\n")


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _dirty(session: SeatSession) -> None:
    """What a task leaves: windows, detached processes, files, the clipboard; with isolation, its temp places."""
    await session.launch(["/usr/bin/xterm"])
    await session.launch(["/bin/sh", "-c", "(sleep 1000 &) ; setsid sleep 1000"])
    await session.write_file("Desktop/notes.txt", b"changed\n" * 1000)
    await session.write_file("Downloads/new.bin", os.urandom(1 << 20))
    await session.clipboard_set("copied by the task")
    if session.namespace is not None:
        await _command(session, ["/bin/sh", "-c", TEMP_MESS])


async def _command(session: SeatSession, argv: list[str]) -> None:
    done = await session.run(argv, timeout=60)
    if done.exit_code != 0:
        raise RuntimeError(f"{argv!r} exited {done.exit_code} on seat {session.seat!r}: {done.stderr[-300:]!r}")


@dataclasses.dataclass
class _Samples:
    """One seat's samples: the reset alone (its report's seconds), the reset and the first command after it
    (from the call of the reset until ``/bin/true`` ended), and commands started once the namespaces are there."""

    reset: list[float] = dataclasses.field(default_factory=list)
    with_first: list[float] = dataclasses.field(default_factory=list)
    starts: list[float] = dataclasses.field(default_factory=list)


async def _measure(sessions: list[SeatSession], rounds: int, commands: int) -> list[_Samples]:
    """``rounds`` resets of each session after a dirty one, then ``commands`` starts of each: the seats take
    turns, so a change in the machine's load falls on each alike. One user for all: one session at a time is
    dirty (a reset ends every process of the user)."""
    samples = [_Samples() for _ in sessions]
    for session in sessions:
        await session.reset()
        await _command(session, ["/bin/true"])
    for _ in range(rounds):
        for session, kept in zip(sessions, samples, strict=True):
            await _dirty(session)
            started = time.perf_counter()
            report = await session.reset()
            await _command(session, ["/bin/true"])  # with isolation: makes the namespaces again
            kept.with_first.append(time.perf_counter() - started)
            kept.reset.append(report.seconds)
            if session.namespace is not None:  # not timed: what the task left in its temp places is gone
                await _command(session, ["/bin/sh", "-c", TEMP_GONE])
    for _ in range(commands):
        for session, kept in zip(sessions, samples, strict=True):
            started = time.perf_counter()
            await _command(session, ["/bin/true"])
            kept.starts.append(time.perf_counter() - started)
    return samples


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - started


def _mechanisms(template: Path, work: Path, rounds: int) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    target = work / "copy"
    samples = []
    for _ in range(rounds):
        shutil.rmtree(target, ignore_errors=True)
        samples.append(_timed(["cp", "-a", "--reflink=auto", "--no-target-directory", str(template), str(target)]))
    rows.append(("cp -a --reflink=auto (the reset's)", f"{statistics.median(samples):.3f}"))
    if os.geteuid() == 0:
        lower, upper, scratch, merged = template, work / "upper", work / "scratch", work / "merged"
        for folder in (upper, scratch, merged):
            folder.mkdir()
        samples = []
        try:
            for _ in range(rounds):
                started = time.perf_counter()
                subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                f"lowerdir={lower},upperdir={upper},workdir={scratch}", str(merged)], check=True,
                               capture_output=True)
                (merged / "Desktop" / "notes.txt").write_text("changed\n")
                subprocess.run(["umount", str(merged)], check=True, capture_output=True)
                for folder in (upper, scratch):
                    shutil.rmtree(folder)
                    folder.mkdir()
                samples.append(time.perf_counter() - started)
            rows.append(("overlay mount + umount + empty the upper dir", f"{statistics.median(samples):.3f}"))
        except subprocess.CalledProcessError as exc:
            rows.append(("overlay mount", f"not possible here: {exc.stderr.decode(errors='replace').strip()}"))
    if shutil.which("rsync"):
        samples = []
        for _ in range(rounds):
            (target / "Desktop" / "notes.txt").write_text("changed\n")
            (target / "new.bin").write_bytes(b"x" * 1000)
            samples.append(_timed(["rsync", "-a", "--delete", f"{template}/", f"{target}/"]))
        rows.append(("rsync -a --delete onto a changed copy", f"{statistics.median(samples):.3f}"))
    return rows


def _p50_p95(samples: list[float], scale: float = 1.0, digits: int = 3) -> tuple[str, str]:
    return f"{statistics.median(samples) * scale:.{digits}f}", f"{_percentile(samples, 0.95) * scale:.{digits}f}"


def _ratios(mine: list[float], theirs: list[float]) -> tuple[str, str]:
    """``mine`` against ``theirs`` at p50 and at p95."""
    return (f"{statistics.median(mine) / statistics.median(theirs):.1f}x",
            f"{_percentile(mine, 0.95) / _percentile(theirs, 0.95):.1f}x")


def _reset_rows(label: str, names: list[str], measured: list[_Samples], rounds: int) -> list[tuple[object, ...]]:
    """One row per seat: the reset alone, with the first command, against the seat without isolation, the goal."""
    rows: list[tuple[object, ...]] = []
    for index, (name, kept) in enumerate(zip(names, measured, strict=True)):
        goal = GOAL_SECONDS if index == 0 else ISOLATED_GOALS[label]
        met = "yes" if _percentile(kept.with_first, 0.95) <= goal else "NO"
        rows.append((label, name, rounds, *_p50_p95(kept.reset), *_p50_p95(kept.with_first),
                     *_ratios(kept.with_first, measured[0].with_first), f"{goal:g} s: {met}"))
    return rows


def run(rounds: int = ROUNDS, commands: int = COMMANDS) -> str:
    users = SeatUsers()
    base = Path(tempfile.mkdtemp(prefix="cud-bench-session-", dir="/tmp"))
    base.chmod(0o755)
    isolations = {"none": Isolation()}
    if os.geteuid() == 0:  # a seat's namespaces need root
        isolations["private_tmp, home_path"] = ISOLATION
    names = list(isolations)
    resets: list[tuple[object, ...]] = []
    starts: list[_Samples] = []
    try:
        user: SeatUser = users.make()
        for big in (False, True):
            _make_template(base / ("template-100mb" if big else "template-empty"), big)
        with start_desktop("x11", base) as desktop:
            for label, template in (("empty home", base / "template-empty"), ("100 MB home", base / "template-100mb")):
                sessions = [SeatSession(f"bench{index}", user, make_home(base, user, f"home-{template.name}-{index}"),
                                        SessionPlaces(desktop.display, None, template, isolation=isolation))
                            for index, isolation in enumerate(isolations.values())]
                try:  # the command starts once, with the empty home
                    measured = asyncio.run(_measure(sessions, rounds, 0 if starts else commands))
                finally:
                    for session in sessions:
                        session.close()
                starts = starts or measured
                resets += _reset_rows(label, names, measured, rounds)
        mechanisms = _mechanisms(base / "template-100mb", base, max(3, rounds // 4))
    finally:
        users.remove_all()
        shutil.rmtree(base, ignore_errors=True)
    start_rows: list[tuple[object, ...]] = [(name, commands, *_p50_p95(kept.starts, 1000, 1))
                                            for name, kept in zip(names, starts, strict=True)]
    if len(starts) == 2:
        start_rows.append(("ratio (isolation / none)", "", *_ratios(starts[1].starts, starts[0].starts)))
    return "\n\n".join([
        "### Sessions: the reset, with and without isolation",
        "Each reset after a dirty session (an xterm, two detached processes, 1 MiB written into the home, the "
        "clipboard set; with isolation also 1 MiB, a folder and a FIFO written into each of the session's own "
        "/tmp, /var/tmp and /dev/shm): every process of the seat's user ended, X clients and selections cleared, "
        "the home emptied and the template copied in; with isolation, the session's namespaces dropped. Such a "
        "seat's next command makes new ones (nsexec.py make), so the time that counts is the reset **with the "
        "first command after it** (/bin/true, from the call of the reset until it ended), for both seats; "
        "'reset' alone is the reset's own report. The seats (one user) take turns; 'vs none' compares the reset "
        "with its first command against the seat without isolation's. Goals at p95: 3 s without isolation; with "
        "it, 1 s for an empty home and 3 s for a 100 MB one."
        + ("" if len(starts) == 2 else " Not run as root: no seat with isolation."),
        table(("template", "isolation", "resets", "reset p50 s", "reset p95 s", "+ first command p50 s",
               "+ first command p95 s", "p50 vs none", "p95 vs none", "goal: met"), resets),
        f"A command's start: /bin/true through SeatSession.run, {commands} times per seat in turns, the namespaces "
        "already made (with isolation every command goes through 'python -I -S nsexec.py enter'):",
        table(("isolation", "commands", "p50 ms", "p95 ms"), start_rows),
        "The home's mechanism on the 100 MB template (median seconds):",
        table(("mechanism", "s"), mechanisms),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--commands", type=int, default=COMMANDS)
    args = parser.parse_args()
    print(run(args.rounds, args.commands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
