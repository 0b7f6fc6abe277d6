"""A spec's setup steps, in order: its ``setup`` before the model is asked anything, its ``postconfig`` after.

Both lists are run by :func:`run_steps`, each under its own name (its events' kind and its keys' list).
Each step is bounded in time (``run`` by its ``timeout``, ``wait_for`` by its own,
``sleep`` by itself, ``files`` by the sizes the spec may send) and recorded as a
``setup`` (or ``postconfig``) event. The first that fails raises :class:`~cud.errors.SetupFailed`,
naming the step, its key in the spec and why; for ``setup`` the task then fails with it and the
model is never asked (what a failed ``postconfig`` does is :mod:`cud.daemon.spec.flow`'s). Its
``details.fault`` says whose failure it is (cud.outcome):
``task`` when the step ran and the spec's expectation was not met (:class:`StepFailed`:
a command's exit status or its timeout, a ``wait_for`` that ran out: the app did not
come up), ``cud`` when cud could not do the step at all (a file not copied, a command
that did not start, no session): the run's outcome is then ``error``. Everything runs as the seat's user in its session
(:class:`cud.daemon.session.processes.SeatSession`); nothing goes through a shell
unless the step's argv names one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cud.daemon.spec.desktop import Desktop, wait_until_found
from cud.errors import CudError, SetupFailed
from cud.spec import SetupStep, WaitFor
from cud.spec.setup import failure_message

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("OPENER", "STAGES", "StepFailed", "WaitRanOut", "run_steps", "tail")

#: The desktop's opener for ``open`` (xdg-utils): a URL in the browser, a file in its application.
OPENER = "xdg-open"
#: How much of a failed command's output an error quotes.
TAIL_CHARS = 400

Record = Callable[[str, dict[str, Any]], None]
#: The spec's lists of steps: each list's key, which is also the kind of its steps' events.
STAGES = ("setup", "postconfig")


class StepFailed(CudError):
    """A setup step ran and the spec's expectation was not met: the task's own failure (``fault = "task"``)."""


class WaitRanOut(StepFailed):
    """A ``wait_for`` ran out: it says what the display shows, not what the seat's session holds."""


def tail(data: bytes, limit: int = TAIL_CHARS) -> str:
    """The end of a command's output as one line of text, for an error or a check's why."""
    text = data.decode("utf-8", "replace").strip().replace("\n", " | ")
    return text if len(text) <= limit else "…" + text[-limit:]


async def run_steps(stage: str, steps: Sequence[SetupStep], session: SeatSession | None, desktop: Desktop,
                    files: Mapping[str, bytes], record: Record) -> None:
    """Run ``steps``, the spec's list ``stage`` (one of :data:`STAGES`), in order; SetupFailed at the first that
    fails. Each is recorded as an event of kind ``stage`` and named by its key ``stage[index].kind``."""
    assert stage in STAGES
    for index, step in enumerate(steps):
        key = f"{stage}[{index}].{step.kind}"
        started = time.monotonic()
        try:
            if step.acts_in_session and session is None:
                raise CudError("this seat has no session (its user and home are not configured)")
            await _step(session, desktop, step, files)  # type: ignore[arg-type]  # session is set when the step acts in one
        except CudError as exc:
            ms = round((time.monotonic() - started) * 1000, 1)
            # Which part failed decides who may read why (SetupStep.FAILS_ONLY_LOOKING, AccessRights.task_for).
            part = "wait_for" if isinstance(exc, WaitRanOut) else step.kind
            record(stage, {"index": index, "kind": step.kind, "what": step.describe(), "ms": ms, "ok": False,
                             "part": part, "error": exc.message})
            # Whose failure it is decides the run's outcome (cud.outcome.task_outcome): failed, or error.
            fault = "task" if isinstance(exc, StepFailed) else "cud"
            raise SetupFailed(failure_message(index, key, step.describe(), exc.message), key=key, step=index,
                              cause=exc.kind, part=part, what=step.describe(), fault=fault) from None
        record(stage, {"index": index, "kind": step.kind, "what": step.describe(),
                         "ms": round((time.monotonic() - started) * 1000, 1), "ok": True})


async def _step(session: SeatSession, desktop: Desktop, step: SetupStep, files: Mapping[str, bytes]) -> None:
    if step.kind == "files":
        for copy in step.files:
            await session.write_file(copy.dest, files[copy.src], mode=copy.mode)
    elif step.kind == "run":
        done = await session.run(step.argv, timeout=step.timeout)
        if done.timed_out:
            raise StepFailed(f"it ran past its timeout of {step.timeout:g} s and was stopped; output: "
                             f"{tail(done.stdout + done.stderr) or '(none)'}")
        if done.exit_code != step.exit_code:
            raise StepFailed(f"it exited with status {done.exit_code}, not {step.exit_code}; output: "
                             f"{tail(done.stdout + done.stderr) or '(none)'}")
    elif step.kind in ("launch", "open"):
        if step.kind == "launch":
            await session.launch(step.argv)
        else:
            # A file is named by its real path in the home (confined there: a path leading out is refused).
            target = step.target if step.is_url else str(session.home.resolve(step.target))
            await session.launch([OPENER, target])
        if step.wait_for is not None:
            await wait_for(desktop, step.wait_for)
    elif step.kind == "clipboard":
        await session.clipboard_set(step.text)
    else:
        await asyncio.sleep(step.seconds)


async def wait_for(desktop: Desktop, want: WaitFor) -> None:
    """Until a window or an element like ``want`` is there; WaitRanOut after its timeout, saying what is there."""
    if want.is_window:
        found = await wait_until_found(lambda: desktop.find_windows(want.window_class, want.window_title),
                                       want.timeout)
        if not found:
            try:
                there = ", ".join(f"{w.wm_class!r} {w.title!r}" for w in (await desktop.windows())[:10]) or "none"
            except CudError as exc:
                there = f"unknown: {exc.message}"
            raise WaitRanOut(f"no window with {want.describe()} appeared within {want.timeout:g} s (windows now: "
                           f"{there})")
        return
    found = await wait_until_found(lambda: desktop.find_elements(want.app, want.role, want.name), want.timeout)
    if not found:
        raise WaitRanOut(f"no element with {want.describe()} appeared within {want.timeout:g} s")
