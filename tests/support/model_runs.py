"""What the daemon tests of every model API do alike: a task run with its approvals decided, the API's errors as
the task records them, and a priced model stopped at its budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cud.errors import CudError
from tests.support.daemon import Daemon

__all__ = ("check_api_errors", "check_max_cost", "run_approving")


def run_approving(daemon: Daemon, model: str, prompt: str = "do it",
                  deny: Callable[[dict[str, Any]], bool] = lambda a: False,
                  decided: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    """Submit a task (approval "actions") and approve every approval it asks for until it ends, but deny those
    ``deny`` picks; each approval decided is added to ``decided``."""
    task_id = daemon.call("submit", prompt=prompt, model=model, approval="actions", **fields)["id"]
    done = threading.Event()

    def decide() -> None:
        while not done.is_set():
            for pending in daemon.call("approvals"):
                if pending["task_id"] == task_id:
                    try:
                        daemon.call("deny" if deny(pending) else "approve", id=pending["id"])
                    except CudError:
                        continue  # taken meanwhile
                    if decided is not None:
                        decided.append(pending)
            done.wait(0.05)

    approver = threading.Thread(target=decide, daemon=True)
    approver.start()
    try:
        return daemon.wait_state(task_id, "succeeded", "failed", "stuck", "budget_exceeded", timeout=120)
    finally:
        done.set()
        approver.join(10)


def check_api_errors(daemon: Daemon, prefix: str) -> None:
    """The models ``PREFIX-bad`` (an HTTP 400 saying "bad request here"), ``-busy`` (one 429, then "after the
    retry") and ``-down`` (500s) end their tasks as the Responses API's errors end them, their retries recorded."""
    bad = run_approving(daemon, f"{prefix}-bad")
    assert bad["state"] == "failed" and bad["error"]["kind"] == "api" and bad["error"]["details"] == {"status": 400}
    assert "bad request here" in bad["error"]["message"]
    busy = run_approving(daemon, f"{prefix}-busy")
    assert busy["state"] == "succeeded" and busy["final_message"] == "after the retry"
    retries = [e["data"] for e in daemon.events(busy["id"]) if e["kind"] == "model_retry"]
    assert [(r["status"], r["retrying"]) for r in retries] == [(429, True)]
    down = run_approving(daemon, f"{prefix}-down")
    assert down["state"] == "failed" and down["error"]["details"] == {"status": 500}
    retries = [e["data"] for e in daemon.events(down["id"]) if e["kind"] == "model_retry"]
    assert [(r["status"], r["retrying"]) for r in retries] == [(500, True), (500, True), (500, False)]


def check_max_cost(daemon: Daemon, requests: Callable[[], int], model: str) -> None:
    """``model``, priced at $1 an answer, stops at a max_cost of 2: two answers, and the third request (counted by
    ``requests``) never goes out."""
    before = requests()
    priced = run_approving(daemon, model, max_cost="2")
    assert priced["state"] == "budget_exceeded" and priced["cost"]["amount"] == "2", priced
    assert requests() - before == 2
