"""A network (and pid) namespace for a test's Ray cluster: everything in it binds and dials 127.0.0.1 only.

One holder process per namespace, made with ``unshare --net --pid --fork --mount-proc``; every
other process is started inside it with ``nsenter --target PID --net --pid --mount``. The holder
is the namespace's init: when it dies, the kernel ends every process in the namespace, so
stopping it by pid stops them all (Ray's raylets, GCS, workers, the daemons, Xvfb), and
:meth:`Netns.stop` then checks that none is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .recorder import wait_until

__all__ = ("CONNECT", "Netns", "children", "own_network")

_CLONE_NEWNET = 0x40000000
#: A probe for a seat's network, run by python3 in the session: connects to 127.0.0.1:PORT (argv[1]); prints how
#: that ended (errno's name, or "connected").
CONNECT = ("import errno, socket, sys\n"
           "try:\n"
           "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10).close()\n"
           "    print('connected')\n"
           "except OSError as exc:\n"
           "    print(errno.errorcode.get(exc.errno, repr(exc)))\n")


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (by /proc, as the host sees them)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _in_namespace(pid: int, netns: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == netns
    except OSError:
        return False


class Netns:
    """``start()`` makes it; ``popen(cmd)`` runs a command inside; ``stop()`` ends all of it."""

    def __init__(self) -> None:
        self.holder: subprocess.Popen[bytes] | None = None
        self.init_pid = 0
        self.net = ""

    def start(self) -> Netns:
        # The holder's init brings lo up, then sleeps: it is pid 1 of the new pid namespace.
        self.holder = subprocess.Popen(
            ["unshare", "--net", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
             "ip link set lo up && exec sleep infinity"],
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.init_pid = wait_until(lambda: next(iter(children(self.holder.pid)), None), 10,
                                   "the namespace's init")

        def lo_up() -> bool:
            done = subprocess.run(self.prefix() + ["ip", "-o", "link", "show", "lo"], capture_output=True, text=True)
            return "UP" in done.stdout.split(">")[0]

        wait_until(lo_up, 10, "lo to be up in the namespace")
        self.net = os.readlink(f"/proc/{self.init_pid}/ns/net")
        return self

    def prefix(self) -> list[str]:
        return ["nsenter", "--target", str(self.init_pid), "--net", "--pid", "--mount"]

    def popen(self, cmd: Sequence[str], *, log: Path, env: dict[str, str] | None = None,
              cwd: str | Path | None = None, pass_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
        """``cmd`` inside, its output appended to ``log``."""
        with open(log, "ab") as out:
            return subprocess.Popen(self.prefix() + list(cmd), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, pass_fds=pass_fds)

    def run(self, cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120.0,
            cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.prefix() + list(cmd), env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    @staticmethod
    def inner_pid(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
        """The host pid of the command nsenter started (nsenter forks it into the pid namespace and waits)."""
        return int(wait_until(lambda: next(iter(children(proc.pid)), None), timeout, "nsenter's child"))

    def pids(self) -> list[int]:
        """Every process in the namespace, as host pids (found by their network namespace)."""
        return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _in_namespace(int(p.name), self.net)]

    def stop(self) -> list[str]:
        """End everything; the command lines of processes still there after 20 s (a test fails on any)."""
        if self.holder is None:
            return []
        try:
            os.kill(self.init_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.holder.wait(timeout=30)
        deadline = time.monotonic() + 20
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = []
        for pid in self.pids():
            try:
                left.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "))
            except OSError:
                pass
        self.holder = None
        return left


@contextlib.contextmanager
def own_network() -> Iterator[None]:
    """The calling thread (pytest's main thread) in a network namespace of its own, its loopback up, for as long as
    the block runs: the processes it starts meanwhile (a daemon, its X server, its seats) and the sockets it makes
    are there, and nothing a test listens on is on the machine's own loopback. Back in the first one afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    first = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.unshare(_CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
            yield
        finally:
            if libc.setns(first, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the first network namespace")
    finally:
        os.close(first)
