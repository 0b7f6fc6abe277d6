"""What the fleet's registry keeps (cud.fleet.registry makes it a Ray actor): the attempts of each spec-run,
and each detached suite's results. No Ray here.

The registry lives as long as the cluster's head, which may be months, and every suite adds to it: a
run's attempts (a few hundred bytes each) and a detached suite's reports (megabytes). So it forgets,
by rules that cost nothing a suite still needs:

* a run is dropped :data:`KEEP_RUN_SECONDS` after its last attempt ended, once every superseded
  attempt of it was retired (its node came back and interrupted it); a suite resumed after that
  runs it anew (``cuctl eval --resume`` re-attaches by what the registry remembers);
* a detached suite's results and reports are kept until :data:`KEEP_DONE_JOBS` newer suites have
  finished (``cuctl fleet results JOB`` fetches them as often as asked until then).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ("Book", "KEEP_DONE_JOBS", "KEEP_RUN_SECONDS")

KEEP_RUN_SECONDS = 7 * 24 * 3600.0
KEEP_DONE_JOBS = 20
#: How often (at most) ``begin`` looks for runs to forget.
PRUNE_SECONDS = 3600.0


class Book:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.runs: dict[str, list[dict[str, Any]]] = {}  # run key -> attempts in order
        self.jobs: dict[str, dict[str, Any]] = {}  # detached suite -> {"results", "files", "done", "done_at"}
        # Every node's watcher asks for its superseded attempts each second: kept by node, so the answer
        # costs what that node has to retire, not every run the registry remembers.
        self.unretired: dict[str, set[tuple[str, int]]] = {}  # node -> (run, attempt) superseded, not retired
        self.pruned_at = clock()

    # -- attempts ---------------------------------------------------------------------------------
    def begin(self, run: str, node: str, ray_task: str) -> int:
        """A new attempt of ``run`` on ``node``: its number (1, 2, ...)."""
        now = self.clock()
        if now - self.pruned_at >= PRUNE_SECONDS:
            self.prune(now)
        attempts = self.runs.setdefault(run, [])
        for entry in attempts:  # all superseded by this one
            if not entry["retired"]:
                self.unretired.setdefault(entry["node"], set()).add((run, entry["attempt"]))
        attempts.append({"attempt": len(attempts) + 1, "node": node, "ray_task": ray_task, "task": None,
                         "state": "started", "retired": False, "at": now, "ended_at": None})
        return len(attempts)

    def finish(self, run: str, attempt: int, state: str, task: int | None) -> None:
        entry = self.runs[run][attempt - 1]
        entry["state"], entry["task"] = state, task if task is not None else entry["task"]
        entry["ended_at"] = self.clock()

    def history(self, run: str) -> list[dict[str, Any]]:
        return list(self.runs.get(run, []))

    def started(self, runs: list[str]) -> list[str]:
        """Which of ``runs`` have their last attempt under way on a node (begun, not finished): the others still
        wait for Ray to place them (the suite says why)."""
        return [run for run in runs if self.runs.get(run) and self.runs[run][-1]["state"] == "started"]

    def superseded(self, node: str) -> list[dict[str, Any]]:
        """Attempts that ran on ``node``, not retired yet, of runs with a later attempt: what its agent interrupts."""
        found = []
        for run, attempt in sorted(self.unretired.get(node, ())):
            later = self.runs[run][-1]
            found.append({"run": run, "attempt": attempt, "key": f"{run}/a{attempt}",
                          "retry": {k: later[k] for k in ("attempt", "node", "task")}})
        return found

    def retired(self, run: str, attempt: int) -> None:
        entry = self.runs[run][attempt - 1]
        entry["retired"] = True
        self.unretired.get(entry["node"], set()).discard((run, attempt))

    def prune(self, now: float) -> None:
        """Forget the runs that are over: the last attempt ended long enough ago, every earlier one retired."""
        self.pruned_at = now
        over = [run for run, attempts in self.runs.items()
                if attempts[-1]["ended_at"] is not None and now - attempts[-1]["ended_at"] >= KEEP_RUN_SECONDS
                and all(entry["retired"] for entry in attempts[:-1])]
        for run in over:
            del self.runs[run]

    # -- detached suites ------------------------------------------------------------------------
    def job_put(self, job: str, results: dict[str, Any], files: dict[str, bytes] | None = None,
                done: bool = False) -> None:
        kept = self.jobs.setdefault(job, {"results": None, "files": {}, "done": False, "done_at": None})
        kept["results"], kept["done"] = results, done
        kept["files"].update(files or {})
        if done:
            kept["done_at"] = self.clock()
            finished = sorted((j for j, k in self.jobs.items() if k["done"]), key=lambda j: self.jobs[j]["done_at"])
            for old in finished[:-KEEP_DONE_JOBS]:
                del self.jobs[old]

    def job_get(self, job: str, with_files: bool = False) -> dict[str, Any] | None:
        kept = self.jobs.get(job)
        if kept is None:
            return None
        return {"results": kept["results"], "done": kept["done"], **({"files": kept["files"]} if with_files else {})}
