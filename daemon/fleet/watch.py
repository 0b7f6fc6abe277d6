"""The fleet watcher (``python -m cud.daemon.fleet.watch``, started by ``cud fleet join``'s agent; needs Ray).

A Ray driver that, every ``--check-seconds``:

- withdraws each seat the daemon shows ``unavailable`` (its display gone, a reset that failed):
  a holder actor pinned to this node (NodeAffinitySchedulingStrategy, not soft) takes that seat's
  resources, so no fleet task is placed on it; Ray 2.60 has no public call to change a live node's
  resources, and a holder is what its scheduler honours. When the seat answers again the holder
  is killed and the resources are free. A busy seat's holder waits until its task ends.
- retires the attempts the registry says were retried elsewhere (``superseded``): a task still
  open on this daemon is interrupted with the retry named ("retried as attempt 2 on n3, task 7");
  one already ended ``interrupted`` (by this agent when the Ray node died, or by the daemon's own
  start-up after the machine was lost) gets the retry added to its reason.

SIGUSR1 drains: every seat gets a holder; once all hold (no fleet task runs here), exit DRAINED.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

from cud.cuctl.client import Client
from cud.daemon.fleet.agent import DRAINED, OPEN_STATES
from cud.errors import CudError
from cud.fleet import NAMESPACE, need_ray
from cud.fleet.nodes import fleet_nodes
from cud.fleet.registry import registry

log = logging.getLogger("cud.fleet")
ray = need_ray("cud fleet join")


@ray.remote(num_cpus=0)
class Holder:
    """Holds one withdrawn seat's resources on its node; does nothing else."""

    def ready(self) -> bool:
        return True


class Watcher:
    def __init__(self, socket: Path, name: str, seats: dict[str, dict[str, float]]) -> None:
        self.socket, self.name, self.seats = socket, name, seats
        self.node_id = ""
        self.holders: dict[str, Any] = {}
        self.draining = False

    def holder_name(self, seat: str) -> str:
        return f"cud_hold:{self.name}:{seat}"

    def start(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.name not in fleet_nodes():
            if time.monotonic() > deadline:
                raise SystemExit(f"cud fleet: node {self.name!r} did not join within {timeout:g} s")
            time.sleep(0.5)
        self.node_id = fleet_nodes()[self.name]
        for seat in self.seats:  # a watcher started again finds the holders its predecessor made
            try:
                self.holders[seat] = ray.get_actor(self.holder_name(seat), namespace=NAMESPACE)
            except ValueError:
                pass

    def withdraw(self, seat: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        log.warning("seat %s withdrawn from the fleet", seat)
        self.holders[seat] = Holder.options(  # type: ignore[attr-defined]  # @ray.remote made it an ActorClass
            name=self.holder_name(seat), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
            resources=self.seats[seat],
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False)).remote()

    def give_back(self, seat: str) -> None:
        log.warning("seat %s back in the fleet", seat)
        ray.kill(self.holders.pop(seat))

    def check_seats(self) -> None:
        try:
            with Client(self.socket) as client:
                seats = {s["name"]: s for s in client.call("seats")}
        except CudError:
            return  # the daemon is away (restarting): its seats are judged when it answers
        for seat in self.seats:
            healthy = seat in seats and seats[seat]["state"] != "unavailable" and not self.draining
            if not healthy and seat not in self.holders:
                self.withdraw(seat)
            elif healthy and seat in self.holders:
                self.give_back(seat)

    def drained(self) -> bool:
        ready, _ = ray.wait([h.ready.remote() for h in self.holders.values()], num_returns=len(self.holders),
                            timeout=0.5)
        return len(ready) == len(self.seats)

    def retire(self) -> None:
        book = registry()
        for entry in ray.get(book.superseded.remote(self.name)):
            retry = entry["retry"]
            reason = (f"retried as attempt {retry['attempt']} on {retry['node']}"
                      + (f", task {retry['task']}" if retry.get("task") is not None else ""))
            try:
                with Client(self.socket) as client:
                    for task in client.call("list", key=entry["key"]):
                        if task["state"] in OPEN_STATES or task["state"] == "interrupted":
                            client.call("interrupt", id=task["id"], reason=reason)
            except CudError as exc:
                log.warning("could not retire %s: %s", entry["key"], exc.message)
                continue
            ray.get(book.retired.remote(entry["run"], entry["attempt"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cud.daemon.fleet.watch")
    parser.add_argument("--address", required=True)
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--seats", required=True, type=json.loads)
    parser.add_argument("--check-seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    watcher = Watcher(args.socket, args.name, args.seats)
    signal.signal(signal.SIGUSR1, lambda *_: setattr(watcher, "draining", True))
    ray.init(address=args.address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING")
    watcher.start()
    while True:
        watcher.check_seats()
        if watcher.draining and watcher.drained():
            return DRAINED
        watcher.retire()
        time.sleep(args.check_seconds)


if __name__ == "__main__":
    sys.exit(main())
