"""A real systemd (the system manager, PID 1 of its own PID namespace) for tests of the seats' session units.

systemd is not PID 1 on the test machine, so the tests start one: ``/lib/systemd/systemd
--system`` in new PID, mount and cgroup namespaces (``unshare``), in a cgroup of its own made
under the machine's cgroup2 hierarchy, which it mounts as its ``/sys/fs/cgroup``. Its unit
directory is a temporary one bound over ``/lib/systemd/system`` in its mount namespace only:
empty sysinit/basic/shutdown targets, Debian's ``dbus.socket``/``dbus.service`` (a system bus of
its own, at ``/run/dbus/system_bus_socket`` in its private ``/run``), and whatever the test puts
there (the project's ``cud-session@.service`` and drop-ins). Outside the namespace its bus is
``unix:path=/proc/PID/root/run/dbus/system_bus_socket``. It shares the machine's ``/tmp``, users
and X sockets, so a seat's home, display and commands are the same on both sides.

Needs root (CAP_SYS_ADMIN): the tests run as root. At the end systemd is SIGKILLed by pid (PID 1
of a namespace: every process in it dies with it) and its cgroup is removed; if the tests are
killed first, the kernel kills it (parent-death signals), though its empty cgroup then stays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .recorder import wait_until

__all__ = ("PrivateSystemd", "private_systemd")

_TARGET = "cud-test.target"
_UNITS = {
    "sysinit.target": "[Unit]\nDescription=sysinit (empty, for the tests)\n",
    "basic.target": "[Unit]\nDescription=basic (empty, for the tests)\n",
    "shutdown.target": "[Unit]\nDescription=shutdown (empty, for the tests)\nDefaultDependencies=no\n",
    _TARGET: "[Unit]\nDescription=what the tests' systemd starts\nWants=dbus.socket dbus.service\n",
}
_DEBIAN_UNITS = Path("/usr/lib/systemd/system")


def _cgroup2_root() -> Path:
    """Where the machine's cgroup2 hierarchy is mounted (unified, or hybrid's /sys/fs/cgroup/unified)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _dev, where, kind, *_rest = line.split()
        if kind == "cgroup2":
            return Path(where)
    raise RuntimeError("no cgroup2 hierarchy is mounted: the tests' systemd needs one")


@dataclass
class PrivateSystemd:
    pid: int
    units: Path
    cgroup: Path

    @property
    def bus_address(self) -> str:
        """Its system bus, reached from outside its mount namespace."""
        return f"unix:path=/proc/{self.pid}/root/run/dbus/system_bus_socket"

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["nsenter", "-t", str(self.pid), "-m", "-p", "systemctl", "--no-pager", *args],
                              capture_output=True, text=True, timeout=60)

    def reload(self) -> None:
        done = self.systemctl("daemon-reload")
        assert done.returncode == 0, done.stderr


def _bus_answers(pid: int) -> bool:
    path = f"/proc/{pid}/root/run/dbus/system_bus_socket"
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        return True
    return False


def _child_of(pid: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        words = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return int(words[0]) if words else None
    return None


def _remove_cgroup(path: Path) -> None:
    """Its sub-groups first; each can go once its processes have (they were killed)."""
    def empty() -> bool:
        for top, dirs, _files in os.walk(path, topdown=False):
            for name in dirs:
                with contextlib.suppress(OSError):  # EBUSY while its last processes are being reaped
                    os.rmdir(Path(top, name))
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return not path.exists()
    wait_until(empty, timeout=20, what=f"the cgroup {path} of the tests' systemd to empty")


@contextlib.contextmanager
def private_systemd() -> Iterator[PrivateSystemd]:
    units = Path(tempfile.mkdtemp(prefix="cud-systemd-units-"))
    units.chmod(0o755)
    cgroup = _cgroup2_root() / f"cud-test-systemd-{os.getpid()}-{os.urandom(3).hex()}"
    cgroup.mkdir()
    for name, text in _UNITS.items():
        (units / name).write_text(text)
    for name in ("dbus.socket", "dbus.service"):
        shutil.copy(_DEBIAN_UNITS / name, units / name)
    # If the tests die without cleaning up (kill -9), the kernel ends unshare (--pdeathsig) and so
    # systemd (--kill-child), and with it every process of its namespace: nothing is left running.
    script = (f'echo $$ > {cgroup}/cgroup.procs && exec setpriv --pdeathsig KILL unshare --kill-child=KILL --pid '
              f'--fork --mount --mount-proc --cgroup --propagation private sh -c "mount -t tmpfs tmpfs /run && '
              f'umount -l /sys/fs/cgroup && '
              f'mount -t cgroup2 none /sys/fs/cgroup && mount --bind {units} /lib/systemd/system && '
              f'mount -t tmpfs tmpfs /etc/systemd/system && exec /lib/systemd/systemd --system '
              f'--unit={_TARGET} --log-target=null"')
    outer = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                                                 "container": "cud-test"})
    pid = None
    try:
        pid = wait_until(lambda: outer.poll() is None and _child_of(outer.pid), timeout=20,
                         what="the tests' systemd to start")
        wait_until(lambda: _bus_answers(pid), timeout=30, what="the tests' systemd's system bus")
        yield PrivateSystemd(pid, units, cgroup)
    finally:
        if pid is not None:
            # Its units' PrivateTmp= directories are in the machine's /tmp and /var/tmp (systemd-private-*): only a
            # stop removes them, never the SIGKILL below.
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(["nsenter", "-t", str(pid), "-m", "-p", "systemctl", "stop", "cud-*"],
                               capture_output=True, timeout=60)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if outer.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(outer.pid, signal.SIGKILL)
        shutil.rmtree(units, ignore_errors=True)
        outer.wait(timeout=30)
        _remove_cgroup(cgroup)
