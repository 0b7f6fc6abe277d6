"""The System V IPC objects a seat's user left: shared memory segments, semaphore sets and message queues.

They outlive every process (``ipcmk -M 4096`` makes one that stays until someone removes it),
so a task could leave state in them for the next one. The session shares the machine's IPC
namespace on purpose: an X client's MIT-SHM segments are attached by the X server, which a
private IPC namespace would break. So the reset removes every object whose owner or creator is
the seat's user, read from ``/proc/sysvipc``; an object another user attached (the X server)
goes once it detaches. POSIX message queues (``mq_open``) are not listed there and are left:
docs/sessions.md says so.
"""

from __future__ import annotations

import ctypes
import errno
import os

from cud.errors import SessionError

__all__ = ("remove_ipc_of",)

_IPC_RMID = 0
#: The file in /proc/sysvipc, and the columns of its header that hold the owner's and the creator's uid.
_KINDS = {"shm": ("shmid", "segment"), "sem": ("semid", "semaphore set"), "msg": ("msqid", "message queue")}

_libc = ctypes.CDLL(None, use_errno=True)


def _owned(kind: str, uid: int) -> list[int]:
    """The ids of ``kind``'s objects (``shm``, ``sem``, ``msg``) owned or created by ``uid``."""
    try:
        with open(f"/proc/sysvipc/{kind}", encoding="ascii") as table:
            header = table.readline().split()
            rows = [line.split() for line in table]
    except FileNotFoundError:  # a kernel without System V IPC
        return []
    at = {name: header.index(name) for name in (_KINDS[kind][0], "uid", "cuid")}
    return [int(row[at[_KINDS[kind][0]]]) for row in rows
            if str(uid) in (row[at["uid"]], row[at["cuid"]])]


def _remove(kind: str, ident: int) -> int:
    if kind == "shm":
        return int(_libc.shmctl(ident, _IPC_RMID, None))
    if kind == "sem":
        return int(_libc.semctl(ident, 0, _IPC_RMID))
    return int(_libc.msgctl(ident, _IPC_RMID, None))


def remove_ipc_of(uid: int, seat: str) -> int:
    """Remove every System V IPC object of ``uid``; how many went. SessionError naming one that stays."""
    removed = 0
    for kind, (_column, what) in _KINDS.items():
        for ident in _owned(kind, uid):
            if _remove(kind, ident) != 0:
                code = ctypes.get_errno()
                if code in (errno.EINVAL, errno.EIDRM):  # gone meanwhile
                    continue
                raise SessionError(f"seat {seat!r}: the {what} {ident} of its user could not be removed: "
                                   f"{os.strerror(code)}", seat=seat, ipc=kind, id=ident)
            removed += 1
    return removed
