"""``cud fleet join``: the agent that keeps this machine's daemon in a Ray fleet (docs/fleet-reference.md).

It runs two children and outlives both:

- ``ray start --address HEAD --block``: this machine's Ray node, whose workers inherit
  ``CUD_FLEET_SOCKET`` (the daemon's socket) and ``CUD_FLEET_NODE`` (this node's name), and whose
  resources are the seats' (cud.fleet.labels) as the daemon shows them at join;
- the watcher (``python -m cud.daemon.fleet.watch``), a Ray driver that withdraws unavailable seats
  and returns recovered ones, and retires attempts the fleet retried elsewhere. It is a child of
  its own because a Ray driver attached to a raylet that dies exits with it: the agent must not.

When the Ray node dies (its raylet killed, the head gone), every task of the fleet still open on
this daemon has lost the Ray task that followed it, and Ray retries that task elsewhere: the agent
interrupts each at once (so no spec is judged twice), then joins again. SIGTERM stops both
children by pid and exits 0; SIGUSR1 (``cud fleet leave``) drains: no new fleet tasks, the running
ones finish, then the node leaves and the agent exits 0.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cud.cuctl.client import Client, all_tasks
from cud.daemon.fleet.config import FleetConfig
from cud.errors import ConfigError, CudError
from cud.fleet.labels import NODE_ENV, SOCKET_ENV, node_resources, seat_resources

__all__ = ("Agent", "FLEET_KEY", "pid_file")

log = logging.getLogger("cud.fleet")

#: A fleet task's key: RUN/SPEC/REPEAT/aN (cud.fleet.suite); the agent retires only these.
FLEET_KEY = re.compile(r".+/[0-9]+/a[0-9]+")
OPEN_STATES = ("queued", "running", "awaiting_approval", "paused")
#: Exit status of the watcher when it has drained the node (every seat withdrawn and idle).
DRAINED = 3
#: Pause before joining again after the Ray node died.
REJOIN_SECONDS = 1.0


def pid_file(socket: Path) -> Path:
    """Where the agent keeps its pid, beside the daemon's socket (``cud fleet leave`` signals it)."""
    return socket.with_name(socket.name + ".fleet.pid")


class Agent:
    def __init__(self, socket: Path, fleet: FleetConfig) -> None:
        if not fleet.address:
            raise ConfigError("cud fleet join needs the head's address: --address HOST:PORT or [fleet] address",
                              key="fleet.address")
        self.socket, self.fleet = socket, fleet
        self.stopping = self.draining = False
        self.ray: subprocess.Popen[bytes] | None = None
        self.watcher: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "draining", True))
        marker = pid_file(self.socket)
        marker.write_text(f"{os.getpid()}\n")
        try:
            resources = self._resources()
            while not self.stopping:
                self._start(resources)
                code = self._watch()
                if code == DRAINED or self.stopping:
                    break
                log.warning("the Ray node stopped; interrupting this daemon's open fleet tasks, joining again")
                self._stop_children()
                self._interrupt_orphans()
                time.sleep(REJOIN_SECONDS)
        finally:
            self._stop_children()
            marker.unlink(missing_ok=True)
        return 0

    def _resources(self) -> dict[str, float]:
        with Client(self.socket) as client:
            seats = client.call("seats")
        if not seats:
            raise ConfigError("the daemon has no seat to offer the fleet", key="seats")
        self.seats = {s["name"]: seat_resources(s, self.fleet.tags) for s in seats}
        return node_resources(self.seats.values(), self.fleet.name)

    def _env(self) -> dict[str, str]:
        return {**os.environ, SOCKET_ENV: str(self.socket), NODE_ENV: self.fleet.name, "RAY_USAGE_STATS_ENABLED": "0"}

    def _start(self, resources: dict[str, float]) -> None:
        ray = str(Path(sys.executable).with_name("ray"))
        self.ray = subprocess.Popen(
            [ray, "start", "--address", self.fleet.address or "", "--num-cpus", "0", "--resources",
             json.dumps(resources), "--block", "--disable-usage-stats", *self.fleet.ray_args],
            env=self._env(), stdin=subprocess.DEVNULL)
        self.watcher = subprocess.Popen(
            [sys.executable, "-m", "cud.daemon.fleet.watch", "--address", self.fleet.address or "",
             "--socket", str(self.socket), "--name", self.fleet.name, "--seats", json.dumps(self.seats),
             "--check-seconds", str(self.fleet.check_seconds)],
            env=self._env(), stdin=subprocess.DEVNULL)

    def _watch(self) -> int | None:
        """Until the Ray node stops (None), the watcher drained it (DRAINED), or the agent is stopped."""
        assert self.ray is not None and self.watcher is not None
        told = False
        while not self.stopping:
            if self.draining and not told:
                self.watcher.send_signal(signal.SIGUSR1)
                told = True
            if self.ray.poll() is not None:
                return None
            code = self.watcher.poll()
            if code == DRAINED:
                return DRAINED
            if code is not None:  # it failed: start another (the Ray node is fine)
                log.warning("the fleet watcher exited with %s; starting it again", code)
                time.sleep(REJOIN_SECONDS)
                self.watcher = subprocess.Popen(self.watcher.args, env=self._env(), stdin=subprocess.DEVNULL)
                told = False
            time.sleep(0.2)
        return None

    def _stop_children(self) -> None:
        for child in (self.watcher, self.ray):
            if child is not None and child.poll() is None:
                child.terminate()  # by pid; `ray start --block` stops its node's processes on SIGTERM
        for child in (self.watcher, self.ray):
            if child is None:
                continue
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _interrupt_orphans(self) -> None:
        """Interrupt every open fleet task here: the Ray task that followed it died with the node and is retried."""
        try:
            with Client(self.socket) as client:
                for task in all_tasks(client):  # every page: an orphan may be older than the newest
                    key = task.get("key") or ""
                    if task["state"] in OPEN_STATES and FLEET_KEY.fullmatch(key):
                        number = int(key.rsplit("/a", 1)[1])
                        reason = (f"its Ray node ({self.fleet.name}) died mid-task; the fleet retries it as attempt "
                                  f"{number + 1}")
                        try:
                            client.call("interrupt", id=task["id"], reason=reason)
                        except CudError as exc:  # it ended meanwhile
                            log.info("task %s: %s", task["id"], exc.message)
        except CudError as exc:
            log.warning("could not retire this daemon's fleet tasks: %s", exc.message)
