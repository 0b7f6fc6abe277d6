"""One spec's task on a seat, in order: reset, setup, the model, postconfig, checks, collect, the verdict.

* The reset (when the spec's ``reset`` is true) has returned the seat's session to its
  clean state before this starts (:meth:`cud.daemon.seats.seat.Seat.prepare`; a reset that
  fails puts the task back in the queue and leaves the seat unavailable).
* Setup steps run in order (:mod:`cud.daemon.spec.setup`); the first that fails ends the
  task ``failed`` with an error of kind ``setup_failed``: no model request is made, no
  check runs.
* The model's part is the SDK's loop, unchanged (:meth:`cud.daemon.tasks.runner.TaskRun.play`).
* The postconfig steps and then the checks run whatever the model did (it answered, gave up, hit a
  limit, was cancelled), so the record says what state it left; not when the daemon is stopping or
  an ``interrupt`` request stops it (the task is then ``interrupted``) and not when setup did not finish.
  A postconfig step that fails stops the postconfig, and no check looks: each is ``error``, naming
  the step (:func:`cud.daemon.spec.checks.unlooked`), so the verdict is ``error`` (by either
  ``pass_if``); the task's own state stays what the model's part ended in.
* ``collect`` keeps its files; the verdict (by the spec's ``pass_if``) and the files are recorded
  with the task's end.

Every step, check and collected file is an event of the task (``setup``, ``postconfig``, ``check``,
``collected``), so ``follow`` shows them as they happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cud.daemon.spec.checks import run_check, unlooked
from cud.daemon.spec.desktop import Desktop
from cud.daemon.spec.setup import run_steps
from cud.daemon.spec.verdict import answer_failed, collect, judge
from cud.daemon.tasks.runner import Ending
from cud.errors import SetupFailed
from cud.protocol import ArtifactView, CheckResultView, TaskView
from cud.spec import Spec, parse_spec

if TYPE_CHECKING:
    from cud.daemon.model.clients import ModelClients
    from cud.daemon.seats.seat import Seat
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("run_spec_task", "task_spec")

def task_spec(task: TaskView) -> Spec:
    """The task's spec, typed again from what the store kept (it was checked at submit)."""
    assert task["spec"] is not None
    return parse_spec({"prompt": task["prompt"], **task["spec"]})


async def run_spec_task(seat: Seat, run: TaskRun, client: ModelClients) -> None:
    task = run.task
    spec = task_spec(task)
    files = seat.store.task_files(task["id"])
    desktop = Desktop(seat.targets.display, seat.targets.session_bus, seat.targets.trust)
    session = seat.session

    def record(kind: str, data: dict[str, object]) -> None:
        seat.store.add_event(task["id"], kind, data)

    try:
        run.start_clock()
        try:
            finished = await run.interruptible(run_steps("setup", spec.setup, session, desktop, files, record))
        except SetupFailed as exc:
            run.fail(exc.to_dict())
            return
        if not finished:  # cancelled, stopped or out of time before the model started: nothing to judge
            run.fail()
            return
        ending = await run.play(client)
        if ending.state == "interrupted":
            run.end(ending)
            return
        results: list[CheckResultView] = []
        artifacts: list[ArtifactView] = []

        async def judging() -> None:
            postconfig: SetupFailed | None = None
            try:
                await run_steps("postconfig", spec.postconfig, session, desktop, files, record)
            except SetupFailed as exc:
                postconfig = exc
            for index, check in enumerate(spec.checks):
                result = (unlooked(index, check, postconfig) if postconfig is not None else
                          await run_check(index, check, session, desktop, files, ending.final_message,
                                          judge_user=seat.config.sessions.judge_user))
                record("check", dict(result))
                results.append(result)
            artifacts.extend(await collect(session, spec.collect.files, seat.trajectories, task["id"]))
            if artifacts:
                record("collected", {"files": artifacts})

        if not await run.interruptible(judging()):
            # Stopped while judging (each check is bounded, but a daemon stopping or a person
            # cancelling does not wait for the rest): half a verdict would mislead, so none.
            state = "interrupted" if run.ends_interrupted else "cancelled"
            run.end(Ending(state, ending.final_message, ending.error, run.cancel_reason))
            return
        run.end(ending, verdict=judge(results, ending.state, spec.pass_if,
                                      answer_failed=answer_failed(spec, ending.final_message)),
                artifacts=artifacts if spec.collect.files else None)
    finally:
        await desktop.close()
