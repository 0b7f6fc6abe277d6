"""One daemon per state directory, with real daemons: a second is refused and touches nothing,
``kill -9`` leaves no stale lock, and however the directory is spelled exactly one runs on it.

The lock is decided at start-up, so these daemons share one Xvfb (module-scoped ``xvfb``) and
one scripted model, and only the first tests submit work.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.daemon.service import SHUTDOWN_GRACE
from cud.daemon.store.state_lock import LOCK_FILE
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, start_xvfb

#: Under approval = "actions" the click waits for an approval; then the task ends.
ASKS = scenario({"actions": [{"type": "click", "button": "left", "x": 40, "y": 40}]}, {"message": "clicked"})


@pytest.fixture(scope="module")
def xvfb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[XServer]:
    """One display for the module's daemons (this overrides conftest's per-test one)."""
    server = start_xvfb(tmp_path_factory.mktemp("x"))
    yield server
    server.stop()


def refused(daemon: Daemon, timeout: float = 60.0) -> str:
    """Wait for a daemon expected to be refused to exit; its exit status must be 2. Returns its log."""
    assert daemon.proc is not None
    try:
        code = daemon.proc.wait(timeout)
    finally:
        daemon.stop()
    assert code == 2, f"exit status {code}; log:\n{daemon.log_text()}"
    return daemon.log_text()


def holder_named(holder: Daemon) -> str:
    """How a refusal names the daemon holding the directory."""
    assert holder.proc is not None
    return (f"(pid {holder.proc.pid} on host {os.uname().nodename!r}, socket {str(holder.socket)!r}); "
            "stop it, or give this one its own --state-dir")


def test_a_second_daemon_is_refused_and_the_first_ones_waiting_task_is_untouched(start_daemon) -> None:
    first: Daemon = start_daemon(ASKS, approval="actions")
    task_id = first.call("submit", prompt="click it")["id"]
    approval = first.wait_approval(task_id)
    # Another socket, the same directory (spelled through a symlink, as another admin might).
    (first.dir / "alias").symlink_to(first.state_dir)
    second = Daemon(first.display, first.model.base_url, workdir=first.dir, socket=first.dir / "s2",
                    state_dir="alias")
    second.log = first.dir / "second.log"
    second.spawn()
    log = refused(second)
    assert log == ("cud: another daemon is already using the state directory "
                   f"'alias' ('{first.state_dir}') {holder_named(first)}\n")
    assert not second.socket.exists()

    # Through cuctl: the task still waits, its approval is still pending, the seat is still its.
    assert json_out(cuctl(first.socket, "show", str(task_id), "--json"))["state"] == "awaiting_approval"
    assert [a["id"] for a in json_out(cuctl(first.socket, "approvals", "--json"))] == [approval["id"]]
    [seat] = json_out(cuctl(first.socket, "seats", "--json"))
    assert (seat["state"], seat["task"]) == ("busy", task_id)
    assert "marked interrupted" not in first.log_text()
    approved = cuctl(first.socket, "approve", str(approval["id"]))
    assert approved.returncode == 0, approved.stderr
    assert first.wait_state(task_id, "succeeded")["final_message"] == "clicked"

    # SIGTERM still stops it within its own grace period, with a task waiting for an approval.
    waiting = first.call("submit", prompt="click again")["id"]
    first.wait_approval(waiting)
    assert first.proc is not None
    first.proc.terminate()
    assert first.proc.wait(SHUTDOWN_GRACE) == 0, first.log_text()[-3000:]
    first.proc = None
    assert not first.socket.exists()


def test_after_kill_9_a_new_daemon_takes_the_directory_at_once(start_daemon) -> None:
    first: Daemon = start_daemon(ASKS, approval="actions")
    task_id = first.call("submit", prompt="click it")["id"]
    approval = first.wait_approval(task_id)
    dead_pid = first.proc.pid if first.proc else None
    first.kill9()
    assert f'"pid": {dead_pid}' in (first.state_dir / LOCK_FILE).read_text()  # what it wrote stays ...

    after = start_daemon(ASKS, approval="actions", workdir=first.dir)  # ... and does not hold anyone back
    assert after.proc is not None
    assert f'"pid": {after.proc.pid}' in (first.state_dir / LOCK_FILE).read_text()
    task = after.task(task_id)
    assert task["state"] == "interrupted"
    assert task["reason"] == "the daemon stopped while the task was running (found at start-up)"
    assert f"tasks [{task_id}] were running when the daemon last stopped; marked interrupted" in after.log_text()
    assert after.call("approvals") == []
    gone = cuctl(after.socket, "approve", str(approval["id"]))
    assert gone.returncode == 2 and "no longer pending" in gone.stderr
    [seat] = after.call("seats")
    assert (seat["state"], seat["task"]) == ("idle", None)


# -- exactly one daemon per real directory, however it is spelled ----------------------------------

SPELLINGS = ("plain", "symlink", "dotdot", "relative")


@dataclass(frozen=True)
class Plan:
    """Two daemons started at once; ``targets`` name each one's real directory ("one" or "two")."""

    spellings: tuple[str, str]
    targets: tuple[str, str]
    exists: bool  # whether the real directory is there before they start (else the daemons make it)
    seed: int  # the names and working directories


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    spellings = (draw(st.sampled_from(SPELLINGS)), draw(st.sampled_from(SPELLINGS)))
    return Plan(spellings, ("one", draw(st.sampled_from(("one", "one", "two")))), draw(st.booleans()),
                draw(st.integers(0, 2**32)))


def spell(kind: str, real: Path, cwd: Path, root: Path, rng: random.Random) -> str:
    """``real`` (a state dir under ``root``, maybe not made yet) as the daemon in ``cwd`` is told it."""
    if kind == "plain":
        return str(real)
    if kind == "symlink":  # to the parent, which exists: a link to a directory not yet made cannot be made through
        link = root / f"link-{rng.randrange(10**6)}"
        link.symlink_to(real.parent)
        return str(link / real.name)
    if kind == "dotdot":  # up from somewhere else in the tree, and back down
        there = rng.choice([cwd, real.parent, root])
        return str(there) + "/.." * len(there.relative_to(root).parts) + "/" + str(real.relative_to(root))
    return os.path.relpath(real, cwd)  # "relative", from the daemon's own working directory


@pytest.fixture(scope="module")
def idle_model() -> Iterator[ScriptedModel]:
    model = ScriptedModel(scenario({"message": "unused"}))
    model.start()
    yield model
    model.stop()


def locked(lock_file: Path) -> bool:
    """Whether some process holds the lock (probed the way a daemon takes it; released at once if not)."""
    fd = os.open(lock_file, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@settings(max_examples=10, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans())
def test_exactly_one_daemon_runs_per_real_directory(plan: Plan, xvfb: XServer, idle_model: ScriptedModel) -> None:
    """Both are started at once. The lock is decided at start-up, so each example stops there:
    per directory, the one its lock file names holds it and lives on, every other exits 2
    naming it (the two tests above run a holder through whole tasks)."""
    rng = random.Random(plan.seed)
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="cud-", dir="/tmp")))
    daemons: list[Daemon] = []
    try:
        reals = {name: root / name / "state" for name in ("one", "two")}
        for real in reals.values():
            real.parent.mkdir()
            if plan.exists:
                real.mkdir()
        for n, (kind, target) in enumerate(zip(plan.spellings, plan.targets, strict=True)):
            cwd = rng.choice([root, root / "one", root / "two"]) / f"w{n}"  # its own: socket and log
            cwd.mkdir()
            spelled = spell(kind, reals[target], cwd, root, rng)
            daemons.append(Daemon(xvfb.display, idle_model.base_url, workdir=cwd, state_dir=spelled))
        for daemon in daemons:
            daemon.spawn()

        for target in set(plan.targets):
            contenders = [d for d, t in zip(daemons, plan.targets, strict=True) if t == target]
            lock_file = reals[target] / LOCK_FILE

            def holder(contenders: list[Daemon] = contenders, lock_file: Path = lock_file) -> Daemon | None:
                text = lock_file.read_text() if lock_file.exists() else ""
                return next((d for d in contenders if d.proc and f'"pid": {d.proc.pid},' in text), None)

            winner = wait_until(holder, 60, f"a daemon to lock {reals[target]}")
            for loser in (d for d in contenders if d is not winner):
                log = refused(loser)
                assert log.startswith(f"cud: another daemon is already using the state directory '{loser.args[3]}'")
                assert f"{reals[target]}') " in log or f"'{reals[target]}' " in log, log
                assert log.endswith(f" {holder_named(winner)}\n"), log
                assert not loser.socket.exists()
            assert winner.proc is not None and winner.proc.poll() is None, winner.log_text()
            assert locked(lock_file)
            assert lock_file.read_text().endswith(f'"socket": "{winner.socket}"}}\n')
    finally:
        for daemon in daemons:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
