"""Make a seat's namespaces, or run one command in them: a program of its own, run as root.

The daemon runs this file by its path (``python -I -S nsexec.py``), never imports it: a mount
namespace can only be made or entered by a process with one thread (the daemon has many), and
subprocess gives no safe place between fork and exec (``preexec_fn`` is unsafe with threads).
Standard library only, so ``-S`` (no site-packages) starts it in a few milliseconds.

``make SPEC``: unshare a mount namespace (and a network one, with ``"network": "none"``), cover
each private directory with a tmpfs of its own, bind in what the session needs from under them
(the X socket, the bus socket, the runtime directories' base, the home) and the home at
``home_path``; print ``ready`` and wait for stdin to close, so the daemon can open
``/proc/PID/ns/*`` meanwhile. Every source is opened with ``O_PATH|O_NOFOLLOW`` before the tmpfs
covers it, checked (device and inode) where the daemon gave them, and bound from its descriptor:
nothing here follows a link a seat's user planted.

``enter MNT NET UID GID GROUPS CWD ERRFD -- ARGV...``: join the namespaces (descriptors ``MNT``
and ``NET``, ``-`` for none), become the user, then enter ``CWD`` as the user (never as root: a
name the user swapped for a link leads only where the user may go), and exec ``ARGV``. Why it
could not start is written to ``ERRFD`` (close-on-exec: the daemon reads nothing when the exec
worked), as subprocess reports it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import socket
import stat
import struct
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 0x1, 0x2, 0x4, 0x20
MS_BIND, MS_REC, MS_SLAVE = 0x1000, 0x4000, 0x80000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(None if source is None else os.fsencode(source), os.fsencode(target),
                       None if fstype is None else fstype.encode(), ctypes.c_ulong(flags),
                       None if data is None else data.encode()), f"mount on {target}")


def _open_source(path: str, identity: list[int] | None) -> tuple[int, os.stat_result]:
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(fd)
    if identity is not None and [info.st_dev, info.st_ino] != identity:
        raise OSError(errno.ESTALE, f"{path} is no longer the one the daemon checked")
    return fd, info


def _make_target(target: str, is_dir: bool) -> None:
    """The mount point, made by root in a tmpfs this namespace just made (nothing of a user's is there yet)."""
    parent = os.path.dirname(target)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if is_dir:
        if not os.path.isdir(target):
            os.mkdir(target, 0o755)
    elif not os.path.lexists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0))[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def make(spec: dict[str, Any]) -> None:
    os.umask(0o022)  # the daemon's own umask (077, say) would make the mount points' parents unreachable to the user
    _check(_libc.unshare(CLONE_NEWNS | (CLONE_NEWNET if spec["network"] == "none" else 0)), "unshare")
    # Slave: the host's later mounts still reach the session; nothing mounted here reaches the host.
    _mount(None, "/", None, MS_REC | MS_SLAVE)
    sources = [(_open_source(src, identity), target, readonly) for src, target, identity, readonly in spec["binds"]]
    for place in spec["private"]:
        _mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['size']}")
    for top in spec["covers"]:  # the parent of home_path: the host's entries there are not the session's
        _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for (fd, info), target, readonly in sources:
        _make_target(target, stat.S_ISDIR(info.st_mode))
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        if readonly:  # connecting to a socket there still works: only opening files for writing is refused
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if spec["network"] == "none":
        _loopback_up()


def enter(args: list[str]) -> None:
    mnt, net, uid, gid, groups, cwd, errfd = args[:7]
    argv = args[8:]
    for fd in (mnt, net, errfd):  # none of them reaches the command
        if fd != "-":
            os.set_inheritable(int(fd), False)
    try:
        _check(_libc.setns(int(mnt), CLONE_NEWNS), "entering the seat's mount namespace")
        if net != "-":
            _check(_libc.setns(int(net), CLONE_NEWNET), "entering the seat's network namespace")
        os.setgroups([int(g) for g in groups.split(",") if g])
        os.setregid(int(gid), int(gid))
        os.setreuid(int(uid), int(uid))
        os.chdir(cwd)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(int(errfd), json.dumps([exc.errno or 0, exc.strerror or str(exc)]).encode())
        os._exit(127)


def main() -> None:
    if sys.argv[1] == "enter":
        enter(sys.argv[2:])
        return
    try:
        make(json.loads(sys.argv[2]))
    except OSError as exc:
        print(f"error {exc.strerror or exc}", flush=True)
        sys.exit(1)
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
