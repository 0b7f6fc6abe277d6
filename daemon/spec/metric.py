"""A ``metric`` check: an OSWorld metric of what the model left, judged in a process of its own, unprivileged.

The result (a file of the seat's home, read bounded; a command's output, run as the seat's
user; a fixture; a value; several files of the home or fixtures) and the expected value are
gathered here, the files among them (several side by side, under the names the spec gives)
written into a private temporary directory that only the judge's user can read, and the judge
(``python -I -m cud.osworld.judge``, the daemon's own interpreter) is run with the question as
JSON on its standard input: as ``[sessions] judge_user`` (a daemon that is not root: as itself),
in a session of its own, with its resources bounded (:func:`_limits`, set by
:mod:`cud.daemon.session.bounded` before the judge's interpreter starts),
killed at the check's ``timeout``, its output bounded. A document the model produced is parsed
by openpyxl or lxml there, never in the daemon and never as root.

Its answer, ``{"score": s}`` or ``{"error": "…"}`` (cud/osworld/judge.py): the check passes iff
``s >= 1``, as OSWorld's own runner counts a task; an error, a crash or the timeout is the check's
``error`` (nobody can tell whether the app worked), naming what happened. A result file that is
not there is the metric's None (OSWorld's getters return None), which OSWorld's metrics score 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cud.daemon.session.commands import Completed, ProcessGroup, collect, feed, read_all
from cud.daemon.session.processes import SESSION_PATH
from cud.daemon.session.user import SeatUser, judge_account
from cud.errors import ConfigError, CudError, NotFound
from cud.spec import Check
from cud.spec.metric import MULTI_KINDS, MetricArg

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("JUDGE_ARGV", "Judged", "judge_metric")

#: The judge: the daemon's own interpreter, isolated (-I: no PYTHON* variables, no user site, no working directory
#: on sys.path), so it imports the cud the daemon runs and nothing the seat's user could put in its way.
JUDGE_ARGV = (sys.executable, "-I", "-m", "cud.osworld.judge")
#: The program that sets the judge's limits and becomes its user before the judge starts (cud.daemon.session.bounded).
_BOUNDED = Path(__file__).resolve().parents[1] / "session" / "bounded.py"
#: The largest file of the home a metric reads, and the most of a result command's output kept.
MAX_RESULT_BYTES = 16 * 1024 * 1024
#: What is kept of the judge's stdout and stderr (its answer is one short JSON object).
MAX_JUDGE_OUTPUT = 64 * 1024
#: The judge's address space: pandas and numpy imported, a spreadsheet of some MB parsed, and no more.
JUDGE_MEMORY = 3 << 30
#: The largest file the judge may write (a metric's temporary conversion).
JUDGE_FILE_BYTES = 64 << 20
#: Descriptors the judge may hold open.
JUDGE_OPEN_FILES = 256
#: Text kept of a crashed judge's stderr in the why.
STDERR_CHARS = 300


@dataclasses.dataclass(frozen=True)
class Judged:
    """What the check found: whether it looked (the metric gave a score), passed, what it observed and why."""

    looked: bool
    passed: bool
    observed: Any
    why: str


async def judge_metric(check: Check, session: SeatSession, files: Mapping[str, bytes], judge_user: str) -> Judged:
    """Gather ``check``'s result and expected value and ask the judge, as ``judge_user``, what the metric says."""
    assert check.result is not None
    try:
        account = judge_account("sessions.judge_user", judge_user)
    except ConfigError as exc:  # the default user, never checked at config load, is not on this machine
        raise CudError(f"the metric's judge has no user: {exc.message}") from None
    result = await _gather(check.result, "result", check, session, files)
    expected = None if check.expected is None else await _gather(check.expected, "expected", check, session, files)
    workdir = await asyncio.to_thread(_private_dir, {"result": result, "expected": expected}, account)
    try:
        question = {"metric": check.metric, "result": result.arg(workdir, "result"),
                    "expected": None if expected is None else expected.arg(workdir, "expected"),
                    "options": check.options}
        done = await _run_judge(json.dumps(question).encode(), account, workdir, check.timeout)
    finally:
        await asyncio.to_thread(shutil.rmtree, workdir, True)
    # The judge names the copies, gone now: a why names the files as the spec does.
    copies = {str(workdir / role / name): spec_name
              for role, each in (("result", result), ("expected", expected)) if each is not None
              for name, spec_name, _data in each.copies}
    return _answer(check, done, result.summary, copies)


@dataclasses.dataclass(frozen=True)
class _Gathered:
    """A result or expected value as the judge gets it: its files (several side by side), a value, or None and why."""

    summary: str
    #: Each file: its name in the judge's directory, its name in the spec, and its bytes (None: it is not there).
    copies: tuple[tuple[str, str, bytes | None], ...] = ()
    #: Several files (files, fixtures): the indexes of those the metric gets; None: the one file is the argument.
    gives: tuple[int, ...] | None = None
    value: Any = None
    none: str | None = None  # None for the metric, and why

    def arg(self, workdir: Path, role: str) -> dict[str, Any]:
        """The judge's ARG: as OSWorld's file getters return, a path (one file given), a list of paths (several;
        None for one not there), None (one file given, not there) or the value."""
        if self.none is not None:
            return {"none": self.none}
        if not self.copies:
            return {"value": self.value}
        picked = [self.copies[i] for i in (self.gives or (0,))]
        paths = [None if data is None else str(workdir / role / name) for name, _spec_name, data in picked]
        if len(paths) > 1:
            return {"paths": paths}
        return {"path": paths[0]} if paths[0] is not None else {"none": f"there is no {picked[0][1]}"}


async def _gather(arg: MetricArg, role: str, check: Check, session: SeatSession,
                  files: Mapping[str, bytes]) -> _Gathered:
    if arg.kind == "file":
        try:
            data = await session.read_file(arg.value, max_bytes=MAX_RESULT_BYTES)
        except NotFound:
            return _Gathered(f"no file {arg.value}", none=f"there is no {arg.value}")
        return _Gathered(f"{arg.value} ({len(data)} bytes)", ((_file_name(arg.value), arg.value, data),))
    if arg.kind == "fixture":
        data = files[arg.value]
        return _Gathered(f"fixture {arg.value} ({len(data)} bytes)", ((_file_name(arg.value), arg.value, data),))
    if arg.kind in MULTI_KINDS:
        copies: list[tuple[str, str, bytes | None]] = []
        for path, name in zip(arg.value, arg.names, strict=True):
            copies.append((name, path, files[path] if arg.kind == "fixtures" else await _home_file(session, path)))
        what = "" if arg.kind == "files" else "fixture "
        summary = ", ".join(f"{what}{path} ({len(data)} bytes)" if data is not None else f"no file {path}"
                            for _name, path, data in copies)
        return _Gathered(summary, tuple(copies), arg.gives)
    if arg.kind == "command":
        done = await session.run(arg.value, timeout=check.timeout, max_output=MAX_RESULT_BYTES)
        if done.timed_out:
            raise CudError(f"the {role}'s command {arg.value[0]} ran past the check's timeout of {check.timeout:g} s "
                           "and was stopped")
        if done.truncated:
            raise CudError(f"the {role}'s command {arg.value[0]} printed over {MAX_RESULT_BYTES} bytes, the limit")
        # OSWorld's command getter hands the metric the output whatever the exit status.
        text = done.stdout.decode("utf-8", "replace")
        return _Gathered(f"the output of {arg.value[0]} ({len(done.stdout)} bytes, exit status {done.exit_code})",
                         value=text)
    return _Gathered(arg.describe(), value=arg.value)


async def _home_file(session: SeatSession, path: str) -> bytes | None:
    """The file ``path`` of the home (read as a ``file`` result is: confined, no link followed), None if absent."""
    try:
        return await session.read_file(path, max_bytes=MAX_RESULT_BYTES)
    except NotFound:
        return None


def _file_name(path: str) -> str:
    """The copy's name: the file's own (a metric may go by its extension), or ``file`` for one a path cannot name
    (a fixture's ``..``)."""
    name = Path(path).name
    return "file" if name in ("", ".", "..") else name


def _private_dir(gathered: Mapping[str, _Gathered | None], account: SeatUser | None) -> Path:
    """A new directory holding each gathered file (``result/NAME``, ``expected/NAME``, several side by side) and a
    ``tmp`` for the judge: written while only root can reach it, then handed to the judge's user, 0700 and 0600, so
    no one else reads it."""
    workdir = Path(tempfile.mkdtemp(prefix="cud-judge-"))
    try:
        made = [workdir, workdir / "tmp"]
        (workdir / "tmp").mkdir(mode=0o700)
        for role, each in gathered.items():
            if each is None or not each.copies:
                continue
            (workdir / role).mkdir(mode=0o700)
            made.append(workdir / role)
            for name, _spec_name, data in each.copies:
                if data is None:
                    continue
                # O_EXCL: the names are distinct (cud.spec.metric.file_names), so nothing is written twice.
                fd = os.open(workdir / role / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                made.append(workdir / role / name)
        if account is not None:
            for path in reversed(made):  # the directory last: until then the judge's user cannot enter it
                os.chown(path, account.uid, account.gid, follow_symlinks=False)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return workdir


def _env(workdir: Path) -> dict[str, str]:
    tmp = str(workdir / "tmp")
    # One thread for the numeric libraries: the judge may not start another (RLIMIT_NPROC 0).
    return {"PATH": SESSION_PATH, "LANG": "C.UTF-8", "HOME": tmp, "TMPDIR": tmp, "MPLCONFIGDIR": tmp,
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


async def _run_judge(question: bytes, account: SeatUser | None, workdir: Path, timeout: float) -> Completed:
    """The judge's answer to ``question``: started through bounded.py (its limits set, then the user's), killed
    (its whole group) past ``timeout``."""
    outs = [os.pipe(), os.pipe()]  # our own pipes, as a session's command: see SeatSession.run
    failed, told = os.pipe()
    who = ("-", "-", "") if account is None else (str(account.uid), str(account.gid), ",".join(map(str, account.groups)))
    argv = [sys.executable, "-I", "-S", str(_BOUNDED), json.dumps(_limits(timeout)), *who, str(told), "--",
            *JUDGE_ARGV]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=workdir, env=_env(workdir), stdin=asyncio.subprocess.PIPE, stdout=outs[0][1],
            stderr=outs[1][1], start_new_session=True, close_fds=True, pass_fds=(told,))
    except OSError as exc:
        for fd in (*outs[0], *outs[1], failed):
            os.close(fd)
        raise CudError(f"the metric's judge did not start: {exc.strerror or exc}") from None
    finally:
        os.close(told)
    for _read, write in outs:
        os.close(write)
    why = await asyncio.to_thread(read_all, failed)
    if why:
        await proc.wait()
        for read, _write in outs:
            os.close(read)
        name = f"user {account.name!r}" if account is not None else "the daemon's user"
        raise CudError(f"the metric's judge did not start as {name}: {json.loads(why)[1]} (it runs the daemon's "
                       f"interpreter {JUDGE_ARGV[0]}, which that user must be able to run, and read cud and its "
                       "libraries)")
    return await collect(list(JUDGE_ARGV), ProcessGroup(proc), (outs[0][0], outs[1][0]), feed(proc, question),
                         timeout=timeout, max_output=MAX_JUDGE_OUTPUT)


def _limits(timeout: float) -> dict[str, int]:
    """The judge's limits: no process or thread of its own (it cannot run a program), CPU seconds past the
    timeout's, memory, file size, descriptors, no core file."""
    return {"RLIMIT_NPROC": 0, "RLIMIT_CPU": math.ceil(timeout) + 1, "RLIMIT_AS": JUDGE_MEMORY,
            "RLIMIT_FSIZE": JUDGE_FILE_BYTES, "RLIMIT_NOFILE": JUDGE_OPEN_FILES, "RLIMIT_CORE": 0}


def _answer(check: Check, done: Completed, summary: str, copies: Mapping[str, str]) -> Judged:
    """The check from the judge's run: its score, or why there is none (``copies``: the paths the judge was given,
    each with the spec's name of the file, put back in what it said)."""
    name = check.metric
    if done.timed_out:
        return Judged(False, False, {"result": summary},
                      f"OSWorld's {name} ran past the check's timeout of {check.timeout:g} s and was stopped")
    if done.exit_code != 0:
        return Judged(False, False, {"result": summary}, f"the judge of OSWorld's {name} crashed: "
                      f"{_ended(done.exit_code)}{_stderr(done)}")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and set(answer) == {"error"} and isinstance(answer["error"], str):
        said = answer["error"]
        for copy, spec_name in sorted(copies.items(), key=lambda item: -len(item[0])):  # 'a.b' before its 'a'
            said = said.replace(copy, spec_name)
        return Judged(False, False, {"result": summary, "error": said[:1000]},
                      f"OSWorld's {name} could not judge {summary}: {said[:300]}")
    score = answer.get("score") if isinstance(answer, dict) and set(answer) == {"score"} else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        what = (f"its answer is over {MAX_JUDGE_OUTPUT} bytes" if done.truncated else
                f"its answer is not a score: {done.stdout[:200].decode('utf-8', 'replace')!r}")
        return Judged(False, False, {"result": summary}, f"the judge of OSWorld's {name} crashed: {what}"
                      f"{_stderr(done)}")
    observed = {"score": score, "result": summary}
    passed = score >= 1.0
    return Judged(True, passed, observed, f"OSWorld's {name} scored {score:g} of 1 on {summary}")


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            signame = signal.Signals(-code).name
        except ValueError:
            signame = f"signal {-code}"
        why = {"SIGXCPU": " (its CPU time ran out)", "SIGXFSZ": " (it wrote a file over its size limit)",
               "SIGKILL": " (killed, perhaps out of memory)", "SIGSEGV": " (a bad memory access)"}.get(signame, "")
        return f"killed by {signame}{why}"
    return f"exit status {code}"


def _stderr(done: Completed) -> str:
    text = done.stderr.decode("utf-8", "replace").strip()
    if not text:
        return ""
    last = text[-STDERR_CHARS:]
    return f"; it said: {'…' if len(text) > STDERR_CHARS else ''}{last}"
