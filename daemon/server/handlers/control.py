"""``pause``, ``resume`` and ``act``: a person stops a task at a boundary, acts on its seat, hands back.

A pause lands where the SDK's loop asks before the screenshot that ends an action
batch (:meth:`cud.daemon.tasks.checkpoint.Checkpoint.admit`); until then the task is ``running`` with a
``pause_requested`` event. Who may: pausing and resuming as for ``cancel`` (the
task's submitter, or an approver); acting on the seat needs approve rights, and
goes through the same driver, checks and key table as the model's actions.
"""

from __future__ import annotations

from typing import Any

from cud.daemon.server.handlers.base import Context
from cud.daemon.tasks.runner import TaskRun
from cud.errors import WrongState
from cud.protocol import ActRequest, PauseRequest, ResumeRequest, TaskView

__all__ = ()


def _run(ctx: Context, task_id: int, what: str) -> TaskRun:
    """The running task the peer may control, or a clear refusal."""
    daemon = ctx.daemon
    task = daemon.store.task(task_id)  # NotFound first
    daemon.access_rights.require_own_task(ctx.peer, task, what)
    run = daemon.seats.run_of(task_id)
    if run is None:
        raise WrongState(f"task {task_id} is {task['state']}; only a running task can be paused or resumed",
                         id=task_id, state=task["state"])
    return run


async def pause(ctx: Context, request: PauseRequest) -> TaskView:
    run, peer = _run(ctx, request["id"], "pause"), ctx.peer
    if run.paused_by is None and run.pause_requested_by is None:
        ctx.daemon.store.control(request["id"], "pause_requested", peer.uid, peer.name, audit="pause")
        run.request_pause({"uid": peer.uid, "name": peer.name})
    return ctx.daemon.access_rights.task_for(peer, ctx.daemon.store.task(request["id"]))


async def resume(ctx: Context, request: ResumeRequest) -> TaskView:
    run, peer, task_id = _run(ctx, request["id"], "resume"), ctx.peer, request["id"]
    if run.paused_by is None and run.pause_requested_by is None:
        raise WrongState(f"task {task_id} is not paused (it is {ctx.daemon.store.task(task_id)['state']})",
                         id=task_id)
    # A pause that has not landed yet is simply withdrawn; a landed one moves back to running.
    state = "running" if run.paused_by is not None else None
    ctx.daemon.store.control(task_id, "resumed", peer.uid, peer.name, state=state, audit="resume")
    run.resume()
    return ctx.daemon.access_rights.task_for(peer, ctx.daemon.store.task(task_id))


async def act(ctx: Context, request: ActRequest) -> dict[str, Any]:
    daemon, peer, task_id = ctx.daemon, ctx.peer, request["id"]
    daemon.access_rights.require_approve(peer, "act on a task's seat")
    run = _run(ctx, task_id, "act on")
    if run.paused_by is None:
        raise WrongState(f"task {task_id} is not paused; pause it before acting on its seat "
                         f"({run.seat.name})", id=task_id)
    ms = await run.human_act(dict(request["action"]), {"uid": peer.uid, "name": peer.name})
    return {"id": task_id, "seat": run.seat.name, "action": request["action"], "ms": round(ms, 3)}
