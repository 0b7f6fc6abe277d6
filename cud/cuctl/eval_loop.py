"""The loop of ``cuctl eval`` (and of a fleet's suite): submit while a seat is free, follow what is in flight,
write results.json as things change, say why a run waits, and wait out a daemon that went away."""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path
from typing import Any

from cud.budget import format_amount
from cud.cuctl.chunks import Chunks
from cud.cuctl.client import Client, RemoteError, check_own_task
from cud.cuctl.export import fetch_record
from cud.cuctl.output import printable, short
from cud.cuctl.progress import WaitNotice, live_terminal
from cud.cuctl.report import write_private
from cud.errors import AccessDenied, BudgetExceeded, ConnectionFailed, CudError, NotFound
from cud.protocol import SeatView
from cud.record.html import render
from cud.seat_needs import SeatNeeds
from cud.spec.wire import file_pieces, submit_fields
from cud.suite.budget import SuiteBudget
from cud.suite.plan import Planned
from cud.suite.results import Attempt, Results

__all__ = ("POLL_SECONDS", "RECONNECT_SECONDS", "Suite", "meets", "say")

#: How often the tasks in flight are looked at.
POLL_SECONDS = 0.5
#: How long the suite waits for a daemon that went away (killed, restarted) before it stops (exit 2).
RECONNECT_SECONDS = 120.0


def say(line: str) -> None:
    """A note of ``cuctl eval`` on stderr, on a line of its own."""
    print(printable(f"cuctl eval: {line}"), file=sys.stderr, flush=True)


def meets(needs: SeatNeeds, seat: SeatView) -> bool:
    """Whether ``seat`` (as ``seats`` shows it) will do: the daemon's own rule (``SeatNeeds.met_by``), for
    ``--seats`` and for each node's seats of a fleet (cud.fleet.suite)."""
    return needs.met_by(seat["name"], seat["size"], seat.get("tags", ()))


class Suite:
    """The loop: submit while a seat is free, look at what is in flight, write results.json as things change."""

    def __init__(self, client: Client, results: Results, specs: dict[str, Planned], folder: Path,
                 chosen: list[str] | None, seats: list[SeatView]) -> None:
        self.client, self.results, self.specs, self.folder = client, results, specs, folder
        self.chosen, self.slots = chosen, len(seats)
        self.offers = {s["name"]: s for s in seats}  # what each seat offered at the start: its screen and tags
        cap = results.suite.get("max_cost")
        self.budget = None if cap is None else SuiteBudget(cap)
        self.started = time.monotonic()
        self.live = live_terminal(sys.stderr)
        self.waiting = WaitNotice(say)
        self.wait_reason: str | None = None  # why a run waits now (the status line shows it)
        self.held: dict[int, str] = {}  # task id -> why the daemon holds it although a seat may be free
        self.total = len(results.spec_runs())
        self.todo: collections.deque[Attempt] = collections.deque()
        self.flying: list[Attempt] = []
        for run in results.spec_runs():
            last = run.last
            if last.judged:
                continue
            if last.task_id is not None and not last.ended:
                self.flying.append(last)  # submitted before (a resumed suite): follow it, never submit it again
            elif last.ended:
                self.todo.append(last.next())  # it ended error, and may be retried
            else:
                self.todo.append(last)
        self.done_before = self.total - len(self.todo) - len(self.flying)

    def refuse(self, impossible: dict[str, NotFound]) -> None:
        """Record the runs of specs none of the seats could take as refused, never submitted (docs/suites.md)."""
        for attempt in [a for a in self.todo if a.spec in impossible]:
            self.todo.remove(attempt)
            self._refused(attempt, impossible[attempt.spec])

    def _refused(self, attempt: Attempt, why: CudError) -> None:
        """An attempt not submitted, and why: refused, judged, failed, as one the daemon refuses."""
        attempt.state, attempt.error = "refused", why.to_dict()
        if attempt not in self.results.attempts:
            self.results.attempts.append(attempt)
        self._ended(attempt)

    def run(self) -> None:
        while self.todo or self.flying:
            try:
                self._fill()
                self._look()
                self._wait()
            except ConnectionFailed as exc:
                self._reconnect(exc)
                continue
            self._progress()
            if self.flying:
                time.sleep(POLL_SECONDS)
        if self.live:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    # -- submitting -----------------------------------------------------------------------------
    def _fill(self) -> None:
        while self.todo and len(self.flying) < self.slots:
            attempt = self._next()
            if attempt is None:
                return
            if self.budget is not None:
                spec_cost = self.specs[attempt.spec].spec.max_cost
                grant = self.budget.grant(self.results.attempts, min(self.slots - len(self.flying),
                                                                     len(self.todo) + 1), spec_cost)
                if grant is None:
                    self.todo.appendleft(attempt)
                    if not self.flying:  # nothing in flight gives any back: the rest is not run
                        self._not_run()
                    return
                attempt.grant = format_amount(grant)
            self._submit(attempt)

    def _not_run(self) -> None:
        assert self.budget is not None
        why = f"not submitted: the suite's {self.budget.words(self.results.attempts)}"
        while self.todo:
            self._refused(self.todo.popleft(), BudgetExceeded(why))

    def _next(self) -> Attempt | None:
        """The first attempt to submit that has a free seat (with --seats, each run is pinned to one)."""
        for attempt in self.todo:
            if self._seat_for(attempt) is not False:
                self.todo.remove(attempt)
                return attempt
        return None

    def _seat_for(self, attempt: Attempt) -> str | None | bool:
        """The seat to pin it to (None: the daemon picks), or False when none of ours is free."""
        if not self.chosen:
            return None
        busy = {a.seat for a in self.flying}
        needs = self.specs[attempt.spec].spec.needs
        free = [s for s in self.chosen if s not in busy and meets(needs, self.offers[s])]
        return free[0] if free else False

    def _submit(self, attempt: Attempt) -> None:
        planned = self.specs[attempt.spec]
        fields: dict[str, Any] = submit_fields(planned.spec, planned.files)
        model = self.results.model_of(attempt)
        if model:
            fields["model"] = model  # --model: as cuctl submit --spec --model
        if attempt.grant is not None:
            fields["max_cost"] = attempt.grant  # the spec's own, or less (cud.suite.budget)
        fields["key"] = self.results.key_of(attempt)  # made again after a lost reply: the same task
        seat = self._seat_for(attempt)
        if isinstance(seat, str):
            fields["seat"] = attempt.seat = seat
        if attempt not in self.results.attempts:
            self.results.attempts.append(attempt)
        try:
            # Another user's task under our key (a daemon from before keys were per submitter) is refused.
            task = check_own_task(self._call_submit(attempt, planned, fields), fields["key"], self.client.uid)
            attempt.task_id = task["id"]
            attempt.state = "queued"
        except ConnectionFailed:
            self.todo.appendleft(attempt)  # not known to be submitted: submitted again (same key) once it is back
            raise
        except (RemoteError, AccessDenied) as exc:  # refused (rights, a seat without a session): it would be again
            attempt.state, attempt.error = "refused", exc.to_dict()
            self._ended(attempt)
            return
        self.flying.append(attempt)
        self.results.save(self.folder)

    def _call_submit(self, attempt: Attempt, planned: Planned, fields: dict[str, Any]) -> dict[str, Any]:
        """``submit``'s reply (its ``task``, ``existing``)."""
        try:
            reply: dict[str, Any] = self.client.upload("submit", file_pieces(planned.files), **fields)
            return reply
        except RemoteError as exc:
            limit = exc.details.get("limit")
            if attempt.grant is None or exc.details.get("field") != "max_cost" or limit is None:
                raise
        # The grant was above the daemon's own ceiling (its config key max_cost): the ceiling it is.
        attempt.grant = fields["max_cost"] = str(limit)
        reply = self.client.upload("submit", file_pieces(planned.files), **fields)
        return reply

    # -- watching -------------------------------------------------------------------------------
    def _look(self) -> None:
        for attempt in list(self.flying):
            assert attempt.task_id is not None
            task = self.client.call("show", id=attempt.task_id)
            state = attempt.state
            attempt.update(task)
            if task.get("held"):
                self.held[attempt.task_id] = task["held"]
            else:
                self.held.pop(attempt.task_id, None)
            if attempt.state != state and not attempt.ended:
                self.results.save(self.folder)  # queued -> running: a reader of results.json sees it
            if attempt.ended:
                self._keep_record(attempt)  # if the daemon goes away here, it stays in flight: looked at again
                self.flying.remove(attempt)
                self._ended(attempt)

    def _wait(self) -> None:
        """Say why runs wait (on the status line, or in a line of its own at once, on a change, every minute)."""
        self.wait_reason = self._wait_reason()
        if not self.live:
            self.waiting.update(self.wait_reason)

    def _wait_reason(self) -> str | None:
        """Why runs of ours are queued in the daemon (None: none is, or a seat that would do is free: it
        starts now): the day's cap, or each seat that would take it unavailable (and why) or busy."""
        queued = [a for a in self.flying if a.state == "queued"]
        if not queued:
            return None
        seats: list[SeatView] = self.client.call("seats")
        whys = []
        for attempt in queued:
            needs = self.specs[attempt.spec].spec.needs
            fit = [s for s in seats if (s["name"] == attempt.seat if self.chosen else meets(needs, s))]
            if attempt.task_id in self.held:
                why = self.held[attempt.task_id]
            elif fit and all(s["state"] != "idle" for s in fit):
                why = "; ".join(_seat_words(s) for s in fit)
            else:
                continue  # a seat that would do is idle: it is handed the task now
            whys.append(f"{_run_words(attempt)} (task {attempt.task_id}) is queued: {why}")
        if not whys:
            return None
        more = f" (and {len(whys) - 3} more queued)" if len(whys) > 3 else ""
        return "waiting: " + " · ".join(whys[:3]) + more

    def _keep_record(self, attempt: Attempt) -> None:
        """The task's report (``cuctl report``) and video (``cuctl video``), fetched through the same connection."""
        task_id = attempt.task_id
        page = render(fetch_record(self.client, task_id)).encode()  # type: ignore[arg-type]  # set: the attempt ran
        attempt.report = f"reports/task-{task_id}.html"
        write_private(str(self.folder / attempt.report), page)
        chunks = Chunks("video")
        try:
            result = self.client.call("video", chunks, id=task_id)
        except RemoteError:
            return  # no video (none configured, or the recorder failed): the report says why
        attempt.video = f"reports/task-{task_id}.{result['format']}"
        write_private(str(self.folder / attempt.video), chunks.join(result))

    def _ended(self, attempt: Attempt) -> None:
        """An attempt ended: one that ended ``error`` with retries left is due again (never a failed one)."""
        if attempt.ended and not attempt.judged:
            self.todo.appendleft(attempt.next())
        self.results.save(self.folder)
        if not self.live:
            line = (f"[{self._done()}/{self.total}] {_run_words(attempt)}"
                    + (f" (attempt {attempt.attempt})" if attempt.attempt > 1 else "")
                    + f": {attempt.outcome}" + (", retrying" if attempt.ended and not attempt.judged else "")
                    + (f", task {attempt.task_id}" if attempt.task_id else "")
                    + (f" {attempt.state}" if attempt.outcome == "error" and attempt.state != "refused" else "")
                    + (f" on {attempt.seat}" if attempt.seat else "")
                    + (f", score {attempt.score:.2f}" if attempt.score is not None else "")
                    # A refusal would be the same again: why it was refused is what the reader needs.
                    + (f": refused: {attempt.error['message']}" if attempt.state == "refused" and attempt.error
                       else ""))
            print(printable(line), file=sys.stderr, flush=True)

    def _done(self) -> int:
        return sum(1 for r in self.results.spec_runs() if r.last.judged)

    def _progress(self) -> None:
        if not self.live:
            return
        runs = self.results.spec_runs()
        done = [r.last for r in runs if r.last.judged]
        passing = sum(1 for a in done if a.outcome == "passed")
        errors = sum(1 for a in done if a.outcome == "error")
        new = len(done) - self.done_before
        elapsed = time.monotonic() - self.started
        eta = "?" if new <= 0 else _clock(elapsed / new * (self.total - len(done)))
        line = (f"eval: {len(done)}/{self.total} done · {passing} passing · {len(done) - passing - errors} failing · "
                f"{errors} error · {len(self.flying)} running · {_clock(elapsed)} elapsed · ETA {eta}"
                + (f" · {self.wait_reason}" if self.wait_reason else ""))
        sys.stderr.write("\r\x1b[K" + short(line, 200))
        sys.stderr.flush()

    def _reconnect(self, lost: CudError) -> None:
        """The daemon went away: keep what is known, then dial again until it answers or time runs out."""
        self.results.save(self.folder)
        if self.live:
            sys.stderr.write("\r\x1b[K")
        print(f"cuctl eval: {lost.message}; waiting up to {RECONNECT_SECONDS:.0f} s for it to come back "
              f"(results so far in {self.folder / 'results.json'})", file=sys.stderr, flush=True)
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                client = Client(self.client.dialer)
                client.call("ping")
            except ConnectionFailed:
                if time.monotonic() > deadline:
                    raise ConnectionFailed(f"{lost.message}, and did not come back within {RECONNECT_SECONDS:.0f} s; "
                                           f"resume with: cuctl eval --resume {self.folder}") from None
                time.sleep(1.0)
                continue
            self.client.close()
            self.client = client
            print("cuctl eval: the daemon answers again; going on", file=sys.stderr, flush=True)
            return


def _run_words(attempt: Attempt) -> str:
    """A spec-run as the notes name it: ``SPEC #REPEAT``, and ``on MODEL`` in a suite of several models."""
    return f"{attempt.spec} #{attempt.repeat + 1}" + (f" on {attempt.model}" if attempt.model else "")


def _seat_words(seat: SeatView) -> str:
    """A seat that would take a waiting run, and why it does not now."""
    if seat["state"] == "unavailable":
        return f"seat {seat['name']} is unavailable" + (f" ({seat['error']})" if seat.get("error") else "")
    if seat["state"] == "busy" and seat.get("task") is not None:
        return f"seat {seat['name']} is busy with task {seat['task']}"
    return f"seat {seat['name']} is {seat['state']}"


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"
