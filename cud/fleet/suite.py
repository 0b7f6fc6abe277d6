"""A suite over the fleet: ``cuctl eval --fleet`` (needs Ray).

The loop is ``cuctl eval``'s (:class:`cud.cuctl.eval_loop.Suite`: the same results.json, progress,
table, JUnit and index); what differs is where a spec-run goes. Every spec-run that is due is
started at once as a fleet task (:func:`cud.fleet.remote.submit_attempt`): Ray queues it until a
node has a free matching seat, so a slow machine holds nothing back. When a task ends, every
attempt the registry numbered for that spec-run is written to results.json: an attempt lost with
its node appears as ``interrupted`` with why ("its Ray node died; retried as attempt 2 on n3"),
the retry after it. A run whose last attempt ended ``error`` (its daemon ended it ``interrupted``,
Ray spent its retries, a check could not look) is run again under ``--retry-errors``, by the same
code as a local suite's (:meth:`Suite._ended`), under a new attempt number and key.

Before the first submit, each node's daemon says its seats (:func:`cud.fleet.nodes.fleet_seats`), and a
spec none of them could take (by the daemon's own rule, :func:`cud.cuctl.eval_loop.meets`) is a refused run,
never started: Ray would hold it for ever. While runs wait for Ray to place them, the suite says why
(:meth:`FleetSuite._wait_reason`), as a local suite does for its queue.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cud.cuctl.eval_loop import Suite, meets, say
from cud.cuctl.report import write_private
from cud.errors import FleetError, NotFound
from cud.fleet import need_ray
from cud.fleet.labels import spec_resources
from cud.fleet.nodes import fleet_nodes, fleet_seats
from cud.fleet.registry import registry
from cud.fleet.remote import reattach, submit_attempt
from cud.seat_needs import SeatNeeds, offer_words
from cud.suite.plan import Planned
from cud.suite.results import Attempt, Results

__all__ = ("FleetSuite",)

ray = need_ray("cuctl eval --fleet")

#: How long one look at the tasks in flight waits for one to end.
WAIT_SECONDS = 0.5
#: How often (at most) the suite asks the registry and Ray which runs wait, and why.
WAIT_LOOK_SECONDS = 5.0


class FleetSuite(Suite):
    """:class:`Suite` with fleet tasks for submits and Ray's ready list for looks; ``on_change`` sees results."""

    def __init__(self, results: Results, specs: dict[str, Planned], folder: Path,
                 on_change: Callable[[Results], None] | None = None) -> None:
        super().__init__(None, results, specs, folder, None, [])  # type: ignore[arg-type]  # no client: the fleet submits
        self.slots = len(self.todo) + len(self.flying) + 1  # Ray queues them: all due are started
        self.refs: dict[Any, Attempt] = {}
        self.on_change = on_change
        for attempt in self.flying:
            self.todo.append(attempt)
        self.flying = []
        # A resumed suite's runs in flight when its driver went away (submitted: no longer "pending"; a fleet
        # suite learns task ids only at the end): their Ray tasks died with the driver, their daemon tasks did
        # not. Each is followed again on its node (cud.fleet.remote.reattach), never run anew.
        self.resumed = {id(a) for a in self.todo if a.state != "pending"}  # by identity: attempts compare by value
        self.reattached: set[Any] = set()  # the refs that follow an attempt again
        self.looked_at = -WAIT_LOOK_SECONDS  # when the runs that wait were last looked for

    def run(self) -> None:
        self.refuse(self._unmet())
        super().run()

    def _unmet(self) -> dict[str, NotFound]:
        """Why each due spec that no seat of any node could take is refused (as each daemon refuses one none of
        its seats meets, at submit); none when some node did not say its seats, or none has joined yet: a spec
        is then started, and waits for a node, saying so."""
        due = sorted({a.spec for a in self.todo})
        if not due:
            return {}
        seats, silent = fleet_seats()
        if silent:
            say("the specs' needs are not checked against the fleet's seats: " + "; ".join(
                f"node {name} did not say its seats ({why})" for name, why in silent.items()))
            return {}
        if not seats:
            say("no fleet node has joined yet: the specs' needs are not checked; each run waits for a node")
            return {}
        offers = "; ".join(offer_words(f"{node}/{s['name']}", s["size"], s.get("tags", ()))
                           for node, views in seats.items() for s in views)
        unmet: dict[str, NotFound] = {}
        for name in due:
            needs = self.specs[name].spec.needs
            if not any(meets(needs, s) for views in seats.values() for s in views):
                unmet[name] = NotFound(f"not submitted: {name} needs {needs.words()}, which no seat of the fleet's "
                                       f"nodes offers; their seats: {offers}", key="fleet", seat=needs.seat,
                                       screen=needs.screen, seat_tags=list(needs.tags), nodes=sorted(seats))
        return unmet

    def _wait_reason(self) -> str | None:
        """Why runs in flight are not under way on a node (the registry has no attempt of theirs begun) while no
        node has a free seat with what they need; looked at every :data:`WAIT_LOOK_SECONDS`."""
        now = time.monotonic()
        if now - self.looked_at < WAIT_LOOK_SECONDS:
            return self.wait_reason
        self.looked_at = now
        if not self.flying:
            return None
        keys = {self._key(a): a for a in self.flying}
        started = set(ray.get(registry().started.remote(list(keys))))
        waiting = [a for key, a in keys.items() if key not in started]
        if not waiting:
            return None
        if not fleet_nodes():
            return f"waiting: {len(waiting)} runs wait for a fleet node, and none has joined (cud fleet join)"
        free = ray.available_resources()
        groups: Counter[SeatNeeds] = Counter(self.specs[a.spec].spec.needs for a in waiting)
        parts = [f"{count} {'run needs' if count == 1 else 'runs need'} {needs.words()}"
                 for needs, count in groups.items()
                 if not all(free.get(label, 0) >= 1 for label in spec_resources(needs))]  # else Ray places it now
        if not parts:
            return None
        return "waiting: no fleet node has a free seat for them now (busy or withdrawn): " + "; ".join(parts)

    def _key(self, attempt: Attempt) -> str:
        return self.results.spec_run_key(attempt.spec, attempt.repeat, attempt.model)  # the registry adds /aN, its attempt

    def _submit(self, attempt: Attempt) -> None:
        planned = self.specs[attempt.spec]
        spec = planned.spec.to_dict()
        if planned.spec.seat is None:
            del spec["seat"]  # to_dict writes "any"; submit takes no seat for that
        model = self.results.model_of(attempt)
        if model:
            spec["model"] = model
        files = {name: base64.b64encode(data).decode("ascii") for name, data in planned.files.items()}
        if attempt not in self.results.attempts:
            self.results.attempts.append(attempt)
        attempt.state = "queued"
        ref = None
        if id(attempt) in self.resumed:
            self.resumed.discard(id(attempt))
            ref = reattach(self._key(attempt), spec, files)
            if ref is not None:
                self.reattached.add(ref)
        if ref is None:
            ref = submit_attempt(self._key(attempt), spec, files)
        self.refs[ref] = attempt
        self.flying.append(attempt)
        self._save()

    def _look(self) -> None:
        if not self.refs:
            return
        ready, rest = ray.wait(list(self.refs), num_returns=1, timeout=WAIT_SECONDS)
        if ready and rest:
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in ready:
            attempt = self.refs.pop(ref)
            self.flying.remove(attempt)
            try:
                outcome = ray.get(ref)
            except ray.exceptions.RayError as exc:  # retries spent (nodes kept dying), or the task itself failed
                if ref in self.reattached:  # following again failed (its node lost now): a new attempt is due
                    self.reattached.discard(ref)
                    self.todo.appendleft(attempt)
                    continue
                attempt.state, attempt.error = "failed", FleetError(_first_line(exc)).to_dict()
                self._ended(attempt)  # an error (kind fleet): retried under --retry-errors, as any
                continue
            final = self._take(attempt, outcome)
            self._ended(final)  # an error (its daemon interrupted it, say) is retried there, as in a local suite

    def _take(self, attempt: Attempt, outcome: dict[str, Any]) -> Attempt:
        """Write the attempts the registry knows of that results.json lacks (lost with a node), then this one."""
        known = {a.attempt for a in self.results.attempts
                 if a.spec == attempt.spec and a.repeat == attempt.repeat and a.model == attempt.model
                 and a is not attempt}
        place = self.results.attempts.index(attempt)
        for entry in outcome["history"]:
            number = entry["attempt"]
            if number in known or number >= outcome["attempt"]:
                continue
            lost = Attempt(attempt.spec, attempt.repeat, number, task_id=entry["task"], seat=entry["node"],
                           state="interrupted", model=attempt.model, retry_errors=attempt.retry_errors,
                           reason=f"its Ray node {entry['node']} was lost mid-task; retried as attempt "
                                  f"{outcome['attempt']} on {outcome['node']}")
            self.results.attempts.insert(place, lost)
            place += 1
        attempt.attempt = outcome["attempt"]
        if "refused" in outcome:
            attempt.state, attempt.error = "refused", outcome["refused"]
            attempt.seat = outcome["node"]
            return attempt
        attempt.task_id = outcome["task"]["id"]
        attempt.update(outcome["task"])
        attempt.seat = f"{outcome['node']}/{attempt.seat}" if attempt.seat else outcome["node"]
        self._keep(attempt, outcome["record"])
        return attempt

    def _keep(self, attempt: Attempt, record: dict[str, Any]) -> None:
        """The report and video the task brought back (an inline record), else where they stay: what
        ``cuctl --host ssh://HOST report ID`` needs to fetch them."""
        name = f"{attempt.seat.replace('/', '-') if attempt.seat else 'node'}-task-{attempt.task_id}"
        if record.get("inline"):
            attempt.report = f"reports/{name}.html"
            write_private(str(self.folder / attempt.report), record["report_html"])
            if record.get("video") is not None:
                attempt.video = f"reports/{name}-{record['video_name']}"
                write_private(str(self.folder / attempt.video), record["video"])
        else:
            attempt.report = f"ssh://{record['host']} task {record['task']}"

    def _keep_record(self, attempt: Attempt) -> None:  # cuctl eval's fetch: the record came with the outcome
        raise AssertionError("a fleet suite's records come back with its tasks")

    def _save(self) -> None:
        self.results.save(self.folder)
        if self.on_change is not None:
            self.on_change(self.results)

    def _ended(self, attempt: Attempt) -> None:
        super()._ended(attempt)
        if self.on_change is not None:
            self.on_change(self.results)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
