"""Run one program as a user with its resources bounded: a program of its own, run as root.

The daemon runs this file by its path (``python -I -S bounded.py``), never imports it: subprocess
gives no safe place between fork and exec to set a child's limits (``preexec_fn`` is unsafe with
the daemon's threads), and setting them from outside (``prlimit``) on another user's process needs
CAP_SYS_RESOURCE, which a container may not grant. Standard library only, so ``-S`` starts it in
a few milliseconds. :mod:`cud.daemon.spec.metric` runs OSWorld's metrics' judge through it.

``LIMITS UID GID GROUPS ERRFD -- ARGV...``: set each limit of ``LIMITS`` (JSON, ``{"RLIMIT_CPU": 61,
…}``, soft and hard alike) but ``RLIMIT_NPROC``, become the user (``UID`` ``-``: stay who it is, as a
daemon that is not root must), then set ``RLIMIT_NPROC``, and exec ``ARGV``. ``RLIMIT_NPROC`` comes
after the user: lowered before, the change of user may mark the process as over it (Linux does, for
a root without CAP_SYS_RESOURCE and CAP_SYS_ADMIN) and the exec would fail; after, it only stops
the program from starting any process or thread of its own. Why
it could not start is written to ``ERRFD`` (close-on-exec: the daemon reads nothing when the exec
worked), as nsexec.py does.
"""

from __future__ import annotations

import json
import os
import resource
import sys


def main(args: list[str]) -> None:
    limits, uid, gid, groups, errfd = args[:5]
    argv = args[6:]
    os.set_inheritable(int(errfd), False)
    try:
        wanted = {name: int(value) for name, value in json.loads(limits).items()}
        for name, value in wanted.items():
            if name != "RLIMIT_NPROC":
                resource.setrlimit(getattr(resource, name), (value, value))
        if uid != "-":
            os.setgroups([int(g) for g in groups.split(",") if g])
            os.setregid(int(gid), int(gid))
            os.setreuid(int(uid), int(uid))
        if "RLIMIT_NPROC" in wanted:
            resource.setrlimit(resource.RLIMIT_NPROC, (wanted["RLIMIT_NPROC"], wanted["RLIMIT_NPROC"]))
        os.execv(argv[0], argv)
    except (OSError, ValueError) as exc:
        code = exc.errno if isinstance(exc, OSError) else 0
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        os.write(int(errfd), json.dumps([code or 0, why]).encode())
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
