"""A race harness: a process of a seat's user that swaps two names in its home, atomically, as fast as it can.

``renameat2(RENAME_EXCHANGE)`` trades the two entries in one step, so each name always exists
and is, at any moment, either of the two things (a directory and a symlink out, say). Whatever
the daemon does in two steps on that name (an ``lstat``, then an ``open`` or a ``readlink``)
meets the other thing half the time the swap lands between them. The process runs as the
seat's user (the one who could do this for real), is bounded in time by itself and is
stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from cud.daemon.session.user import SeatUser

__all__ = ("swapping",)

#: Seconds the swapper runs at most, should the test that started it never stop it.
LIFETIME = 300

_SCRIPT = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd, a, b = int(sys.argv[1]), os.fsencode(sys.argv[2]), os.fsencode(sys.argv[3])
end = time.monotonic() + float(sys.argv[4])
print("swapping", flush=True)
while time.monotonic() < end:
    for _ in range(1000):
        if libc.renameat2(fd, a, fd, b, 2) != 0:  # RENAME_EXCHANGE
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
"""


@contextlib.contextmanager
def swapping(user: SeatUser, folder: Path, one: str, other: str) -> Iterator[None]:
    """While the block runs, ``one`` and ``other`` in ``folder`` (both existing; ``folder`` the user's) trade places.

    The folder is handed over open (the tests' temporary directories above it are root's alone)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        proc = subprocess.Popen(["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--",
                                 "/usr/bin/python3", "-c", _SCRIPT, str(fd), one, other, str(LIFETIME)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(fd,))
    finally:
        os.close(fd)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # it has started swapping
        assert line == "swapping\n", f"the swapper did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        yield
        assert proc.poll() is None, f"the swapper stopped: {proc.stderr.read() if proc.stderr else ''}"
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
