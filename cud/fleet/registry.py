"""The fleet's registry: a named, detached Ray actor on the head that numbers the attempts of each spec-run.

Needs Ray. A fleet task asks it for its attempt number before it submits (``begin``): Ray
retrying a task whose node died runs the same function again, and the registry is what tells
that run it is attempt 2, so its idempotency key (``RUN/SPEC/REPEAT/a2``) differs from the
lost one's. It keeps where each attempt ran (node, daemon task), so a node's agent that comes back
(cud.fleet.node) learns which of its attempts were retried elsewhere and interrupts them, naming
the retry. It also keeps each detached suite's results (``cuctl fleet status|results JOB``).

It lives on the head (``node:__internal_head__``): workers come and go, the head is the cluster.
"""

from __future__ import annotations

import time
from typing import Any

from cud.fleet import NAMESPACE, need_ray

__all__ = ("REGISTRY", "registry")

REGISTRY = "cud_fleet_registry"
ray = need_ray("the fleet registry")


# Not restarted if its process dies: a registry that came back empty would number attempts from 1 again.
@ray.remote(num_cpus=0)
class Registry:
    def __init__(self) -> None:
        self.runs: dict[str, list[dict[str, Any]]] = {}  # run key -> attempts in order
        self.jobs: dict[str, dict[str, Any]] = {}  # detached suite -> {"results": ..., "files": {...}}

    # -- attempts ---------------------------------------------------------------------------------
    def begin(self, run: str, node: str, ray_task: str) -> int:
        """A new attempt of ``run`` on ``node``: its number (1, 2, ...)."""
        attempts = self.runs.setdefault(run, [])
        attempts.append({"attempt": len(attempts) + 1, "node": node, "ray_task": ray_task, "task": None,
                         "state": "started", "retired": False, "at": time.time()})
        return len(attempts)

    def finish(self, run: str, attempt: int, state: str, task: int | None) -> None:
        entry = self.runs[run][attempt - 1]
        entry["state"], entry["task"] = state, task if task is not None else entry["task"]

    def history(self, run: str) -> list[dict[str, Any]]:
        return list(self.runs.get(run, []))

    def superseded(self, node: str) -> list[dict[str, Any]]:
        """Attempts that ran on ``node``, not retired yet, of runs with a later attempt: what its agent interrupts."""
        found = []
        for run, attempts in self.runs.items():
            for entry in attempts[:-1]:
                if entry["node"] == node and not entry["retired"]:
                    later = attempts[-1]
                    found.append({"run": run, "attempt": entry["attempt"], "key": f"{run}/a{entry['attempt']}",
                                  "retry": {k: later[k] for k in ("attempt", "node", "task")}})
        return found

    def retired(self, run: str, attempt: int) -> None:
        self.runs[run][attempt - 1]["retired"] = True

    # -- detached suites ------------------------------------------------------------------------
    def job_put(self, job: str, results: dict[str, Any], files: dict[str, bytes] | None = None,
                done: bool = False) -> None:
        kept = self.jobs.setdefault(job, {"results": None, "files": {}, "done": False})
        kept["results"], kept["done"] = results, done
        kept["files"].update(files or {})

    def job_get(self, job: str, with_files: bool = False) -> dict[str, Any] | None:
        kept = self.jobs.get(job)
        if kept is None:
            return None
        return {"results": kept["results"], "done": kept["done"], **({"files": kept["files"]} if with_files else {})}


def registry() -> Any:
    """The registry's handle (made on the head the first time a driver asks)."""
    return Registry.options(name=REGISTRY, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                            resources={"node:__internal_head__": 0.001}).remote()
