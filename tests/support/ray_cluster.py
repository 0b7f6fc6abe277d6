"""A real Ray fleet for the tests, all inside one network namespace (tests/support/netns.py).

A head (``ray start --head``, its dashboard on 127.0.0.1 for the job API) and worker machines,
each with its own Xvfb seats, its own cud daemon on a Unix socket, and ``cud fleet join``;
one scripted model server (``python -m cud.scripted``) on the namespace's 127.0.0.1 for all.
Every process is started inside the namespace and ends with it (``Fleet.stop``, which reports
any that outlived it). Several nodes share 127.0.0.1, so each worker's Ray ports are its own.

A machine may be given a user (``"user"``): its daemon still runs as root, but its node (``cud fleet
join``, its Ray node and the fleet tasks) runs as that user, as ``cud-fleet.service`` runs it, reaching
the daemon through a link to its socket in the node's own directory (tests/support/user_namespace.py
says how that user reaches this Python).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cud.cuctl.client import Client
from cud.daemon.session.user import SeatUser
from cud.errors import CudError

from .daemon import ROOT
from .netns import Netns, children
from .recorder import wait_until
from .xserver import display_choice, read_display_number

__all__ = ("Fleet", "Machine", "HEAD_PORT", "ADDRESS")

HEAD_PORT = 6379
ADDRESS = f"127.0.0.1:{HEAD_PORT}"
VENV_BIN = Path(sys.executable).parent
#: Small object stores: a suite moves reports, not data sets, and the machine is shared.
STORE = str(80 * 1024 * 1024)


def _ports(index: int) -> list[str]:
    """Worker ``index``'s own Ray ports (all nodes share 127.0.0.1 in the namespace)."""
    base = 52000 + 100 * index
    return ["--dashboard-agent-listen-port", str(base), "--dashboard-agent-grpc-port", str(base + 1),
            "--metrics-export-port", str(base + 2), "--runtime-env-agent-port", str(base + 3),
            "--node-manager-port", str(base + 4), "--object-manager-port", str(base + 5),
            "--min-worker-port", str(base + 10), "--max-worker-port", str(base + 99),
            "--object-store-memory", STORE]


@dataclass
class Machine:
    """One worker machine: its seats' Xvfb, its daemon and its ``cud fleet join``."""

    name: str
    dir: Path
    displays: dict[str, str]
    xvfb: dict[str, subprocess.Popen[bytes]]
    config: str
    daemon: subprocess.Popen[bytes] | None = None
    agent: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The node's user (None: root); its daemon runs as root all the same.
    user: SeatUser | None = None
    #: Each seat's ``[[seats]] tags``, by seat name (none unless given).
    seat_tags: dict[str, list[str]] = field(default_factory=dict)

    @property
    def socket(self) -> Path:
        return self.dir / "s"

    def call(self, kind: str, **fields: Any) -> Any:
        with Client(self.socket) as client:
            return client.call(kind, **fields)

    def log(self, what: str) -> str:
        path = self.dir / f"{what}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


class Fleet:
    def __init__(self, scenarios: dict[str, dict[str, Any]]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cud-fleet-", dir="/tmp"))
        self.dir.chmod(0o755)
        self.ns = Netns()
        self.scenarios = scenarios
        self.machines: dict[str, Machine] = {}
        self.model_url = ""
        self.env = {**{k: v for k, v in os.environ.items() if k not in ("CUD_SOCKET", "CUD_HOST", "NOTIFY_SOCKET")},
                    "PYTHONPATH": str(ROOT), "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
                    "RAY_USAGE_STATS_ENABLED": "0", "OPENAI_API_KEY": "sk-test-cud-secret-key-0123456789"}

    # -- starting -------------------------------------------------------------------------------
    def start(self, machines: dict[str, dict[str, Any]]) -> Fleet:
        """``machines``: name -> {"seats": N, "config": extra daemon TOML (before the seats),
        "seat_prefix": the seats' names before their number ("s"), "user": the node's SeatUser,
        "seat_tags": {seat name: its [[seats]] tags}}."""
        self.ns.start()
        self._model()
        head = self.ns.run([str(VENV_BIN / "ray"), "start", "--head", "--port", str(HEAD_PORT), "--num-cpus", "1",
                            "--dashboard-host", "127.0.0.1", "--object-store-memory", STORE,
                            "--disable-usage-stats", "--temp-dir", str(self.dir / "ray")], env=self.env, timeout=180)
        assert head.returncode == 0, f"ray start --head failed: {head.stdout[-2000:]}{head.stderr[-2000:]}"
        for name, how in machines.items():
            self.add(name, **how)
        for machine in self.machines.values():
            self.wait_joined(machine)
        return self

    def add(self, name: str, seats: int = 2, config: str = "", seat_prefix: str = "s",
            user: SeatUser | None = None, seat_tags: dict[str, list[str]] | None = None) -> Machine:
        """Another machine: its seats, its daemon, and its node joining (``wait_joined`` waits for it)."""
        machine = self._machine(name, seats, config, seat_prefix)
        machine.user, machine.seat_tags = user, seat_tags or {}
        self.start_daemon(machine)
        self.join(machine, len(self.machines))
        return machine

    def _model(self) -> None:
        folder = self.dir / "scenarios"
        folder.mkdir()
        for name, scenario in self.scenarios.items():
            (folder / f"{name}.json").write_text(json.dumps(scenario))
        port_file = self.dir / "model.port"
        self.model = self.ns.popen([sys.executable, "-m", "cud.scripted", "--scenario", str(folder / "default.json"),
                                    "--scenarios", str(folder), "--port-file", str(port_file), "-q"],
                                   env=self.env, log=self.dir / "model.log")
        wait_until(port_file.exists, 60, "the scripted model's port")
        self.model_url = f"http://127.0.0.1:{port_file.read_text().strip()}/v1"

    def start_xvfb(self, machine_dir: Path, display: str | None = None) -> tuple[str, subprocess.Popen[bytes]]:
        log = machine_dir / "xvfb.log"
        if display is not None:  # the same number again (a seat that comes back)
            proc = self.ns.popen(["Xvfb", display, "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-noreset"],
                                 log=log)
            return display, proc
        read_fd, write_fd = os.pipe()
        proc = self.ns.popen(["Xvfb", *display_choice(write_fd, isolated=True), "-screen", "0", "1024x768x24",
                              "-nolisten", "tcp", "-noreset"], log=log, pass_fds=(write_fd,))
        os.close(write_fd)
        try:
            return read_display_number(read_fd, proc, log), proc
        finally:
            os.close(read_fd)

    def _machine(self, name: str, seats: int, config: str, seat_prefix: str = "s") -> Machine:
        place = self.dir / name
        place.mkdir(mode=0o755)
        displays, servers = {}, {}
        for number in range(1, seats + 1):
            displays[f"{seat_prefix}{number}"], servers[f"{seat_prefix}{number}"] = self.start_xvfb(place)
        machine = Machine(name, place, displays, servers, config)
        self.machines[name] = machine
        return machine

    def start_daemon(self, machine: Machine) -> None:
        seats = "".join(f'[[seats]]\nname = "{n}"\ndisplay = "{d}"\ntags = {json.dumps(machine.seat_tags.get(n, []))}\n'
                        for n, d in machine.displays.items())
        (machine.dir / "cud.toml").write_text(f'model = "scripted:default"\n{machine.config}\n{seats}')
        env = {**self.env, "OPENAI_BASE_URL": self.model_url}
        machine.daemon = self.ns.popen(
            [sys.executable, "-m", "cud.daemon.main", "run", "--config", str(machine.dir / "cud.toml"), "--socket",
             str(machine.socket), "--state-dir", str(machine.dir / "state")],
            env=env, cwd=machine.dir, log=machine.dir / "daemon.log")

        def answers() -> bool:
            if machine.daemon is not None and machine.daemon.poll() is not None:
                raise AssertionError(f"{machine.name}'s daemon exited: {machine.log('daemon')}")
            try:
                machine.call("ping")
                return True
            except CudError:
                return False

        wait_until(answers, 60, f"{machine.name}'s daemon")
        if machine.user is not None:  # the daemon's socket is 0660: its group is the way in, as group cud's is
            os.chown(machine.socket, -1, machine.user.gid)

    def join(self, machine: Machine, index: int) -> None:
        machine.extra["index"] = index

        def fleet_join(socket: Path, *ray_args: str) -> list[str]:
            return [sys.executable, "-m", "cud.daemon.main", "fleet", "join", "--address", ADDRESS, "--config",
                    str(machine.dir / "cud.toml"), "--socket", str(socket), "--name", machine.name, "--",
                    *_ports(index), *ray_args]

        user = machine.user
        if user is None:
            machine.agent = self.ns.popen(fleet_join(machine.socket), env=self.env, cwd=machine.dir,
                                          log=machine.dir / "agent.log")
            return
        # As cud-fleet.service: the node's own directory (its pid file, Ray's session) with a link to the
        # daemon's socket, where the daemon's own directory is not the node user's to write.
        own = machine.dir / "node"
        own.mkdir(mode=0o700, exist_ok=True)
        os.chown(own, user.uid, user.gid)
        link = own / "cud.sock"
        link.unlink(missing_ok=True)
        link.symlink_to(machine.socket)
        staging = Path(tempfile.mkdtemp(dir=self.dir))
        machine.agent = self.ns.popen(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "tests.support.user_namespace",
             "--uid", str(user.uid), "--gid", str(user.gid), "--staging", str(staging), "--",
             *fleet_join(link, "--temp-dir", str(own / "ray"))],
            env={**self.env, "HOME": str(own)}, cwd=own, log=machine.dir / "agent.log")

    def wait_joined(self, machine: Machine, timeout: float = 180.0) -> None:
        try:
            wait_until(lambda: machine.agent is None or machine.agent.poll() is not None or machine.name in self.nodes(),
                       timeout, f"{machine.name} to join the fleet")
            assert machine.agent is not None and machine.agent.poll() is None, "its agent exited"
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its agent's log:\n{machine.log('agent')}") from None

    # -- looking ---------------------------------------------------------------------------------
    def python(self, code: str, timeout: float = 180.0) -> Any:
        """Run ``code`` as a Ray driver in the namespace; what it prints last, as JSON."""
        prelude = f"import json, ray\nray.init(address={ADDRESS!r}, namespace='cud', logging_level='WARNING')\n"
        done = self.ns.run([sys.executable, "-c", prelude + code], env=self.env, timeout=timeout)
        assert done.returncode == 0, f"driver failed: {done.stderr[-3000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])

    def nodes(self) -> list[str]:
        return self.python("from cud.fleet.nodes import fleet_nodes\nprint(json.dumps(sorted(fleet_nodes())))")

    def available(self, *resources: str) -> tuple[float, ...]:
        """What of ``resources`` the cluster has free now (one driver, one view)."""
        return tuple(self.python(f"free = ray.available_resources()\n"
                                 f"print(json.dumps([free.get(r, 0.0) for r in {list(resources)!r}]))"))

    def cuctl(self, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        return self.ns.run([sys.executable, "-m", "cud.cuctl.main", *args], env=self.env, timeout=timeout,
                           cwd=self.dir)

    def cuctl_popen(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        return self.ns.popen([sys.executable, "-m", "cud.cuctl.main", *args], env=self.env, cwd=self.dir,
                             log=log)

    def tasks(self, prefix: str) -> dict[str, list[dict[str, Any]]]:
        """Every daemon's tasks whose key starts with ``prefix``, by machine, whoever submitted them.

        Not ``list``'s ``key_prefix``: that matches the caller's own keys only (a key names a task only
        for its submitter), and a node may run as a user of its own (w4); root, an approver, sees
        every task's key in the whole list."""
        return {name: [t for t in m.call("list") if (t["key"] or "").startswith(prefix)]
                for name, m in self.machines.items()}

    # -- faults ------------------------------------------------------------------------------------
    def raylet(self, machine: Machine) -> int:
        """The host pid of the machine's raylet (a child of its ``ray start --block``)."""
        assert machine.agent is not None
        agent = Netns.inner_pid(machine.agent)

        def find() -> int | None:
            for start in children(agent):
                for pid in children(start):
                    try:
                        if "raylet/raylet" in Path(f"/proc/{pid}/cmdline").read_text():
                            return pid
                    except OSError:
                        pass
            return None

        return int(wait_until(find, 60, f"{machine.name}'s raylet"))

    def kill_daemon(self, machine: Machine) -> None:
        assert machine.daemon is not None
        os.kill(Netns.inner_pid(machine.daemon), signal.SIGKILL)
        machine.daemon.wait(timeout=30)
        machine.daemon = None

    def kill_machine(self, machine: Machine) -> None:
        """The machine lost (a VM gone): its daemon, its agent and its Ray node, every process of them at once."""
        assert machine.daemon is not None and machine.agent is not None
        found, todo = [], [machine.daemon.pid, machine.agent.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children(pid)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in (machine.daemon, machine.agent):
            proc.wait(timeout=30)
        machine.daemon = machine.agent = None

    def kill_xvfb(self, machine: Machine, seat: str) -> None:
        os.kill(Netns.inner_pid(machine.xvfb[seat]), signal.SIGKILL)
        machine.xvfb[seat].wait(timeout=30)

    def restart_xvfb(self, machine: Machine, seat: str) -> None:
        """The seat's display again, on its number: a server that exits at once found the number not
        yet free (the lock or socket the killed one left), which are removed before the next try."""
        display = machine.displays[seat]
        number = display.lstrip(":")
        for _attempt in range(3):
            proc = self.start_xvfb(machine.dir, display)[1]
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                machine.xvfb[seat] = proc
                return
            for stale in (Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")):
                stale.unlink(missing_ok=True)  # the server this test killed left them
        raise AssertionError(f"Xvfb {display} did not start again: {(machine.dir / 'xvfb.log').read_text()[-2000:]}")

    # -- stopping ----------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """End the namespace and all in it; the command lines of any process that outlived it."""
        left = self.ns.stop()
        for proc in [self.model, *(p for m in self.machines.values() for p in (m.daemon, m.agent, *m.xvfb.values()))]:
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    left.append(f"nsenter {proc.pid}")
        shutil.rmtree(self.dir, ignore_errors=True)
        return left
