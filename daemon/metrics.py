"""The daemon's metrics in the Prometheus text format: for ``cuctl metrics`` and a textfile.

prometheus_client makes the registry and the exposition; nothing here formats text.
The registry is private (not the library's global one), so nothing else in the
process (the library's own process and platform collectors) leaks into it.

Two kinds of numbers:

* Counts of what is in the database (tasks per state, queued tasks per seat,
  pending approvals) are read from SQLite at scrape time by :class:`_StateCollector`,
  so they survive a restart of the daemon and can never drift from ``cuctl list``.
* Durations (steps, approval waits) are histograms observed as the store records
  the step and approval events; they live in memory and start from zero with
  each daemon (a counter reset to Prometheus, which ``rate()`` handles).

No TCP listener, ever: Prometheus reads the textfile through node_exporter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

import cud
from cud.daemon.store.database import Store
from cud.daemon.store.writes import iso_to_epoch
from cud.outcome import OUTCOMES, ended_outcome, outcome_of_check
from cud.protocol import FINAL_STATES, TASK_STATES, VERDICTS, EventView
from cud.spec.checks import CHECK_KINDS
from cud.spec.setup import SETUP_KINDS

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from cud.daemon.seats.dispatch import Seats

__all__ = ("Metrics", "UNPINNED")

log = logging.getLogger("cud.metrics")

#: The ``seat`` label of queued tasks that any seat may take.
UNPINNED = "*"
#: Step parts: what the model took, what the display took, and the daemon's own cost.
_PARTS = {"model": "model_ms", "driver": "driver_ms", "daemon": "overhead_ms"}
# Steps: from a few ms of daemon overhead up to a slow model turn of minutes.
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Model requests: a few kB (stored mode, a small screen) up to the API's 50 MB of images.
_REQUEST_BUCKETS = (2**10, 2**14, 2**16, 2**18, 2**19, 2**20, 2**21, 2**22, 2**23, 2**24, 2**25, 2**26)
#: Token kinds of the model's usage, as the step events carry them.
_TOKENS = {"input": "input_tokens", "cached": "cached_tokens", "output": "output_tokens"}
#: The budget events the metrics count, by their ``kind`` label.
_BUDGET_EVENTS = {"budget_warning": "warning", "budget_reached": "reached", "budget_extended": "extended"}
# Approvals: a person answers in seconds to minutes; the default timeout is 600 s.
_WAIT_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class _StateCollector(Collector):
    """What the database and the seats hold right now, read on every scrape."""

    def __init__(self, store: Store, seats: Seats) -> None:
        self._store = store
        self._seats = seats

    def collect(self) -> Iterator[Metric]:
        counts = self._store.task_counts()
        ended = CounterMetricFamily("cud_tasks", "Tasks that ended in each final state (kept in the database; "
                                    "retention pruning lowers it)", labels=["state"])
        current = GaugeMetricFamily("cud_tasks_current", "Tasks in each state that is not final, now", labels=["state"])
        for state in TASK_STATES:
            family = ended if state in FINAL_STATES else current
            family.add_metric([state], counts.get(state, 0))
        yield ended
        yield current
        judged = CounterMetricFamily("cud_tasks_judged", "Tasks a spec's checks judged, by verdict (kept in the "
                                     "database; retention pruning lowers it)", labels=["verdict"])
        verdicts = self._store.verdict_counts()
        for verdict in VERDICTS:
            judged.add_metric([verdict], verdicts.get(verdict, 0))
        yield judged
        outcomes = CounterMetricFamily(
            "cud_task_outcomes", "Tasks that ended, by outcome (cud.outcome: passed, failed: the task's own; "
            "error: cud or the infrastructure could not do its part; kept in the database, retention pruning "
            "lowers it)", labels=["outcome"])
        by_outcome = dict.fromkeys(OUTCOMES, 0)
        for final, judged_as, kind, fault, count in self._store.outcome_inputs():
            by_outcome[ended_outcome(final, judged_as, kind, fault)] += count
        for outcome, number in by_outcome.items():
            outcomes.add_metric([outcome], number)
        yield outcomes
        cost = CounterMetricFamily("cud_cost", "What the tasks the database holds cost, by model and currency "
                                   "(priced by [budget.prices]; exact sums, shown as floats; retention pruning "
                                   "lowers it)", labels=["model", "currency"])
        for (model, currency), amount in sorted(self._store.cost_by_model().items()):
            cost.add_metric([model, currency], float(amount))
        yield cost
        pending = GaugeMetricFamily("cud_approvals_pending", "Approvals waiting for a decision")
        pending.add_metric([], self._store.pending_approval_count())
        yield pending
        up = GaugeMetricFamily("cud_seat_up", "1 if the seat's display answers (idle or busy), 0 if unavailable",
                               labels=["seat"])
        depth = GaugeMetricFamily("cud_queue_depth", "Queued tasks pinned to each seat; seat=\"*\": any seat's",
                                  labels=["seat"])
        queued = self._store.queued_by_seat()
        for seat in self._seats:
            up.add_metric([seat.name], 0 if seat.state == "unavailable" else 1)
            depth.add_metric([seat.name], queued.get(seat.name, 0))
        depth.add_metric([UNPINNED], queued.get(None, 0))
        yield up
        yield depth


class Metrics:
    """The registry of one daemon, fed by the store's events."""

    def __init__(self, store: Store, seats: Seats) -> None:
        self._store = store
        self.registry = CollectorRegistry(auto_describe=False)
        Info("cud_build", "The daemon's version", registry=self.registry).info({"version": cud.__version__})
        self.registry.register(_StateCollector(store, seats))
        self._steps = Histogram("cud_step_duration_seconds", "Time of each step, by who spent it",
                                ["part"], buckets=_STEP_BUCKETS, registry=self.registry)
        self._waits = Histogram("cud_approval_wait_seconds", "Time from an approval's request to its decision, "
                                "time-out or cancel", buckets=_WAIT_BUCKETS, registry=self.registry)
        self._request_bytes = Histogram("cud_model_request_bytes", "Bytes sent to the model per step (every "
                                        "attempt's body)", buckets=_REQUEST_BUCKETS, registry=self.registry)
        self._images = Counter("cud_model_images", "Images sent to the model", registry=self.registry)
        self._tokens = Counter("cud_model_tokens", "Tokens the model counted, by kind (cached is part of input)",
                               ["kind"], registry=self.registry)
        self._checks = Counter("cud_spec_checks", "Checks of task specs run, by kind and result (passed, failed, error: "
                               "it could not look)",
                               ["kind", "result"], registry=self.registry)
        self._setup = Counter("cud_spec_setup_steps", "Setup steps of task specs run, by kind and result (ok, "
                              "failed)", ["kind", "result"], registry=self.registry)
        self._postconfig = Counter("cud_spec_postconfig_steps", "Postconfig steps of task specs run (after the "
                                   "model, before the checks), by kind and result (ok, failed)", ["kind", "result"],
                                   registry=self.registry)
        self._budget = Counter("cud_budget_events", "Budget events (docs/budgets.md), by kind (warning, reached, "
                               "extended) and budget (max_cost, max_input_tokens, max_output_tokens, daily_cost)",
                               ["kind", "budget"], registry=self.registry)
        for part in _PARTS:  # every part and kind from the start, so a rate() has its zero
            self._steps.labels(part)
        for kind in _TOKENS:
            self._tokens.labels(kind)
        for check in CHECK_KINDS:
            for outcome in OUTCOMES:
                self._checks.labels(check, outcome)
        for step in SETUP_KINDS:
            for result in ("ok", "failed"):
                self._setup.labels(step, result)
                self._postconfig.labels(step, result)
        store.subscribe(self._on_event)  # for the daemon's life: metrics and store end together

    def _on_event(self, event: EventView) -> None:
        # Called by the store after each committed transaction, on the event loop: quick, no I/O but SQLite.
        data = event["data"]
        if event["kind"] == "step":
            for part, key in _PARTS.items():
                self._steps.labels(part).observe(max(0.0, float(data.get(key, 0.0))) / 1000)
            if data.get("requests"):
                self._request_bytes.observe(max(0, int(data.get("request_bytes", 0))))
                self._images.inc(max(0, int(data.get("images", 0))))
                for kind, key in _TOKENS.items():
                    self._tokens.labels(kind).inc(max(0, int(data.get(key, 0))))
        elif event["kind"] in _BUDGET_EVENTS:
            self._budget.labels(_BUDGET_EVENTS[event["kind"]], str(data.get("budget"))).inc()
        elif event["kind"] == "check":
            self._checks.labels(str(data["kind"]), outcome_of_check(data)).inc()
        elif event["kind"] in ("setup", "postconfig"):
            steps = self._setup if event["kind"] == "setup" else self._postconfig
            steps.labels(str(data["kind"]), "ok" if data["ok"] else "failed").inc()
        elif event["kind"] == "approval_decided":
            with contextlib.suppress(Exception):  # a metric must never break the decision it follows
                approval = self._store.approval(int(data["approval_id"]))
                if approval["decided_at"]:
                    waited = iso_to_epoch(approval["decided_at"]) - iso_to_epoch(approval["created_at"])
                    self._waits.observe(max(0.0, waited))

    def text(self) -> str:
        return generate_latest(self.registry).decode("utf-8")

    async def write_every(self, path: Path, interval: float) -> None:
        """Write the textfile now and then every ``interval`` seconds until cancelled."""
        while True:
            try:
                # The text is made on the loop (the store's SQLite connection belongs to it);
                # the file is written in a thread, so a slow disk never stalls the loop.
                await asyncio.to_thread(write_atomically, path, self.text().encode("utf-8"))
            except OSError as exc:
                log.warning("cannot write the metrics to %s: %s", path, exc.strerror or exc)
            await asyncio.sleep(interval)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old file or the new one, never a part.

    The temporary file is in the same directory (os.replace is atomic only within
    one file system) and its name does not end in ``.prom``, which node_exporter
    would read half-written.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            # Readable by node_exporter's user despite the daemon's umask 077: counts and seat names only.
            os.fchmod(fh.fileno(), 0o644)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
