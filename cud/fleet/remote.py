"""One fleet task: a spec-run's attempt, run by Ray on a node with a free matching seat (needs Ray).

The task reads the node's daemon socket from ``CUD_FLEET_SOCKET`` (``cud fleet join`` starts
its Ray node with it, so every worker of that node has it) and hands the spec to
:func:`cud.fleet.attempt.run_attempt` with the key ``RUN/SPEC/REPEAT/aN``, N from the registry.
Ray retries the task when its node dies (``max_retries``); the retry asks the registry again and
is attempt N+1. A suite resumed after its driver went away follows its runs' last attempts again
on their nodes (:func:`reattach`): the same key, so the same daemon task. A daemon that refuses
(rights, a seat it lacks) is an answer, not a crash: the task returns the refusal, and is not
retried. Model text travels as data in the returned dict.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from cud.errors import CudError
from cud.fleet import need_ray
from cud.fleet.attempt import run_attempt
from cud.fleet.labels import NODE_ENV, SOCKET_ENV, node_marker, spec_resources
from cud.fleet.nodes import fleet_nodes
from cud.fleet.registry import registry
from cud.seat_needs import SeatNeeds

__all__ = ("MAX_RETRIES", "node_name", "reattach", "submit_attempt", "run_spec")

ray = need_ray("a fleet task")

#: Ray runs a task again at most this often when its node dies mid-task (then the suite sees it fail).
MAX_RETRIES = 3


def node_name() -> str:
    return os.environ.get(NODE_ENV) or socket.gethostname()


@ray.remote(num_cpus=0)
def run_spec(run: str, spec: dict[str, Any], files: dict[str, str], attempt: int | None = None) -> dict[str, Any]:
    """The next attempt of ``run``; or, given ``attempt``, that one again (its key re-attaches on its node)."""
    where = os.environ.get(SOCKET_ENV)
    if not where:
        raise RuntimeError(f"this Ray node was not started by 'cud fleet join' (no {SOCKET_ENV})")
    node = node_name()
    book = registry()
    if attempt is None:
        attempt = ray.get(book.begin.remote(run, node, ray.get_runtime_context().get_task_id()))
    key = f"{run}/a{attempt}"
    try:
        outcome = run_attempt(where, spec=spec, files=files, key=key, seat=spec.get("seat"))
    except CudError as exc:  # the daemon refused (a right, a seat): the suite reports why
        ray.get(book.finish.remote(run, attempt, "refused", None))
        return {"attempt": attempt, "node": node, "key": key, "refused": exc.to_dict(),
                "history": ray.get(book.history.remote(run))}
    task = dict(outcome.task)
    ray.get(book.finish.remote(run, attempt, task["state"], task["id"]))
    return {"attempt": attempt, "node": node, "host": outcome.host, "key": key, "task": task,
            "reattached": outcome.reattached, "record": _record(outcome.record),
            "history": ray.get(book.history.remote(run))}


def _record(record: Any) -> dict[str, Any]:
    """The record as a plain dict (bytes inline, or the reference ``cuctl`` fetches it by)."""
    if isinstance(record, dict):
        return record
    fields = getattr(record, "__dataclass_fields__", None)
    return {k: getattr(record, k) for k in fields} if fields else {"ref": repr(record)}


def submit_attempt(run: str, spec: dict[str, Any], files: dict[str, str]) -> Any:
    """Start the fleet task of one spec-run (``spec`` as Spec.to_dict writes it): its ObjectRef, placed on a node
    with a free seat of each label the spec needs (its seat's name, screen, tags)."""
    return run_spec.options(resources=spec_resources(SeatNeeds.of(spec)), max_retries=MAX_RETRIES,
                            retry_exceptions=False).remote(run, spec, files)


def reattach(run: str, spec: dict[str, Any], files: dict[str, str]) -> Any:
    """Follow again the last attempt of a spec-run whose driver went away (``cuctl eval --resume``), on the
    node that has it: its ObjectRef; None when there is none to follow (no attempt, or its node is gone),
    and a new attempt is what is due. Not retried: a node lost now costs the run a new attempt, as ever."""
    history = ray.get(registry().history.remote(run))
    if not history or history[-1]["node"] not in fleet_nodes():
        return None
    last = history[-1]
    # The seat it holds is free in Ray's books (its Ray task died with the driver): taken again here.
    wanted = {**spec_resources(SeatNeeds.of(spec)), node_marker(last["node"]): 0.001}
    return run_spec.options(resources=wanted, max_retries=0, retry_exceptions=False).remote(run, spec, files,
                                                                                            last["attempt"])
