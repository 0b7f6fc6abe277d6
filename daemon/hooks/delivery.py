"""The notification dispatcher: the one place that turns the daemon's events into [[notify]] hooks.

The store tells it about approvals and ends of tasks (after each commit, as it tells
the metrics); the seats tell it when a display stops or starts answering. Each event
is queued for every hook that asked for it and the caller returns at once: nothing
here runs on the path of a task.

Each hook has its own bounded queue and its own workers (``concurrency``), so a slow
or dead receiver holds back only its own later deliveries, never a task or another
hook. An attempt is bounded by the hook's ``timeout`` (a command is killed, with its
process group; a request abandoned); a failed one is tried again ``retries`` times,
after ``backoff`` seconds doubled each time. A full queue drops the new event. All of
it is logged and counted (``cud_notify_*`` in the metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Mapping
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from cud.daemon.hooks.config import EVENTS, HookConfig, ntfy_split, read_header_value
from cud.daemon.hooks.events import EventMaker, command_env, ntfy_body, slack_body
from cud.daemon.store.database import Store
from cud.protocol import EventView

__all__ = ("MAX_BACKOFF", "Notifications", "QUEUE_SIZE")

log = logging.getLogger("cud.hooks")

#: Events waiting per hook; past this a hook is far behind (or dead) and new events are dropped.
QUEUE_SIZE = 256
#: The longest wait between two attempts, whatever the backoff doubled to.
MAX_BACKOFF = 300.0
#: What is kept of a failed command's stderr for the log.
STDERR_BYTES = 2048
#: HTTP answers that may go away on their own; any other 4xx is the hook's mistake and is not retried.
_RETRY_STATUS = {408, 425, 429}
#: The daemon's own environment that a hook must not inherit.
_PRIVATE_ENV = ("OPENAI_API_KEY", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                "LISTEN_FDNAMES", "CREDENTIALS_DIRECTORY")


class _Failed(Exception):
    """One attempt failed; ``retry`` says whether another one could go differently."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class _Hook:
    """One [[notify]] hook at run time: its config, its queue, its workers, its secret."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self.workers: list[asyncio.Task[None]] = []
        self.headers: dict[str, str] = {"Content-Type": "application/json"}
        if config.secret_header is not None and config.secret_file is not None:
            self.headers[config.secret_header] = read_header_value(config.secret_file, f"{config.name} secret")
        self.url = config.webhook
        self.topic: str | None = None
        if config.format == "ntfy" and config.webhook is not None:
            # ntfy takes JSON at its root URL with the topic inside; people write the topic's URL.
            self.url, self.topic = ntfy_split(config.webhook)


class Notifications:
    def __init__(self, hooks: tuple[HookConfig, ...], store: Store, maker: EventMaker,
                 env: Mapping[str, str] | None = None) -> None:
        self._store = store
        self._maker = maker
        self._hooks = [_Hook(config) for config in hooks]
        env = os.environ if env is None else env
        self._env = {k: v for k, v in env.items() if k not in _PRIVATE_ENV}
        self._session: aiohttp.ClientSession | None = None
        self._wanted = {event for hook in self._hooks for event in hook.config.events}
        labels = ["hook", "event"]
        self.delivered = Counter("cud_notify_delivered", "Notifications a hook took (exit 0, HTTP 2xx)", labels,
                                 registry=None)
        self.failed = Counter("cud_notify_failed", "Notifications given up on after every attempt failed", labels,
                              registry=None)
        self.retried = Counter("cud_notify_retries", "Attempts made again after one failed", labels, registry=None)
        self.dropped = Counter("cud_notify_dropped", "Notifications dropped because the hook's queue was full",
                               labels, registry=None)
        for hook in self._hooks:  # every series from the start, so a rate() has its zero
            for event in hook.config.events:
                for counter in (self.delivered, self.failed, self.retried, self.dropped):
                    counter.labels(hook.config.name, event)
        if self._hooks:
            store.subscribe(self._on_store_event)

    def register(self, registry: CollectorRegistry) -> None:
        for counter in (self.delivered, self.failed, self.retried, self.dropped):
            registry.register(counter)

    # -- life ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the workers; events emitted before this (at start-up) wait in the queues."""
        if any(hook.config.webhook is not None for hook in self._hooks):
            # No cookies and no redirects: a receiver answers, it does not steer.
            self._session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                                  timeout=aiohttp.ClientTimeout(total=None))
        for hook in self._hooks:
            hook.workers = [asyncio.create_task(self._work(hook), name=f"notify {hook.config.name} {n}")
                            for n in range(hook.config.concurrency)]

    async def close(self, grace: float) -> None:
        """Let queued notifications go out for up to ``grace`` seconds, then stop the rest."""
        if any(hook.workers for hook in self._hooks):
            joins = [asyncio.ensure_future(hook.queue.join()) for hook in self._hooks]
            _done, pending = await asyncio.wait(joins, timeout=grace)
            for join in pending:
                join.cancel()
        workers = [worker for hook in self._hooks for worker in hook.workers]
        for worker in workers:
            worker.cancel()  # a running command is killed on the way out (see _run_command)
        if workers:
            await asyncio.wait(workers, timeout=5)
        left = sum(hook.queue.qsize() for hook in self._hooks)
        if left:
            log.warning("%d notification(s) were still queued when the daemon stopped", left)
        if self._session is not None:
            await self._session.close()

    # -- events in ------------------------------------------------------------------------------
    def _on_store_event(self, event: EventView) -> None:
        # Called after every commit, on the loop, by the write that caused it: never raise into it.
        kind = event["kind"]
        if kind not in ("approval_requested", "end", "budget_warning"):
            return
        try:
            task = self._store.task(event["task_id"])
            if kind == "budget_warning":
                if "budget_warning" in self._wanted:
                    self.emit(self._maker.budget_event(task, event["data"]))
                return
            if kind == "approval_requested":
                if "approval_requested" in self._wanted:
                    approval = self._store.approval(int(event["data"]["approval_id"]))
                    self.emit(self._maker.approval_event(approval, task))
                return
            if "task_finished" in self._wanted:
                self.emit(self._maker.task_event("task_finished", task))
            if task["state"] in ("failed", "budget_exceeded", "stuck") and "task_failed" in self._wanted:
                self.emit(self._maker.task_event("task_failed", task))
        except Exception:  # a notification must never undo or break what it reports
            log.exception("cannot make the notification of task %s's %s event", event["task_id"], kind)

    def seat_changed(self, name: str, where: str, up: bool, error: str | None) -> None:
        """A seat's display stopped answering (``up`` False) or answers again."""
        event = "seat_recovered" if up else "seat_unavailable"
        if event in self._wanted:
            self.emit(self._maker.seat_event(event, name, where, error))

    def emit(self, event: dict[str, Any]) -> None:
        assert event["event"] in EVENTS
        for hook in self._hooks:
            if event["event"] not in hook.config.events:
                continue
            try:
                hook.queue.put_nowait(event)
            except asyncio.QueueFull:
                self.dropped.labels(hook.config.name, event["event"]).inc()
                log.warning("notify hook %s is %d notifications behind; dropped this %s", hook.config.name,
                            QUEUE_SIZE, event["event"])

    # -- delivery -----------------------------------------------------------------------------
    async def _work(self, hook: _Hook) -> None:
        while True:
            event = await hook.queue.get()
            try:
                await self._deliver(hook, event)
            except Exception:  # a bug here must not end the worker
                log.exception("notify hook %s failed unexpectedly", hook.config.name)
            finally:
                hook.queue.task_done()

    async def _deliver(self, hook: _Hook, event: dict[str, Any]) -> None:
        config, name = hook.config, event["event"]
        body = json.dumps(event, ensure_ascii=False).encode("utf-8")
        for attempt in range(config.retries + 1):
            if attempt:
                self.retried.labels(config.name, name).inc()
                await asyncio.sleep(min(config.backoff * 2 ** (attempt - 1), MAX_BACKOFF))
            try:
                async with asyncio.timeout(config.timeout):
                    if config.command is not None:
                        await self._run_command(hook, event, body)
                    else:
                        await self._post(hook, event, body)
            except TimeoutError:
                why, retry = f"no answer within {config.timeout:g} s", True
            except _Failed as exc:
                why, retry = str(exc), exc.retry
            except (OSError, aiohttp.ClientError) as exc:
                why, retry = f"{type(exc).__name__}: {exc}", True
            else:
                self.delivered.labels(config.name, name).inc()
                return
            last = attempt == config.retries or not retry
            log.warning("notify hook %s, %s (attempt %d of %d): %s%s", config.name, name, attempt + 1,
                        config.retries + 1, why, "; giving up" if last else "")
            if last:
                break
        self.failed.labels(config.name, name).inc()

    async def _run_command(self, hook: _Hook, event: dict[str, Any], body: bytes) -> None:
        config = hook.config
        assert config.command is not None
        proc = await asyncio.create_subprocess_exec(
            *config.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={**self._env, **config.env, **command_env(event)},
            start_new_session=True,  # its own group: a timeout kills what it started too
        )
        try:
            assert proc.stdin is not None and proc.stderr is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read stdin
                proc.stdin.write(body)
                await proc.stdin.drain()
                proc.stdin.close()
            stderr = await _drain(proc.stderr)
            code = await proc.wait()
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                # Reaped even when cancelled: a hook never outlives the attempt as a zombie.
                await asyncio.shield(proc.wait())
        if code != 0:
            said = stderr.decode("utf-8", "replace").strip()
            raise _Failed(f"{config.command[0]} exited with {code}" + (f": {said}" if said else ""))

    async def _post(self, hook: _Hook, event: dict[str, Any], body: bytes) -> None:
        assert self._session is not None and hook.url is not None
        if hook.config.format == "ntfy":
            assert hook.topic is not None
            body = json.dumps(ntfy_body(event, hook.topic), ensure_ascii=False).encode("utf-8")
        elif hook.config.format == "slack":
            body = json.dumps(slack_body(event), ensure_ascii=False).encode("utf-8")
        async with self._session.post(hook.url, data=body, headers=hook.headers, allow_redirects=False) as response:
            if 200 <= response.status < 300:
                return
            retry = response.status >= 500 or response.status in _RETRY_STATUS
            raise _Failed(f"{hook.url} answered HTTP {response.status} {response.reason or ''}".rstrip(), retry=retry)


async def _drain(stream: asyncio.StreamReader) -> bytes:
    """Read a pipe to its end (so the writer never blocks on it), keeping only its start."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < STDERR_BYTES:
            kept += chunk[: STDERR_BYTES - len(kept)]
    return bytes(kept)
