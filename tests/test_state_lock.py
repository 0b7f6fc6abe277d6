"""The state directory's lock itself (daemon/store/state_lock.py): separate opens, a forked child,
an exec'd child, a killed holder, a planted symlink, and the filesystem it refuses.

``flock`` locks belong to an open file description, so two ``acquire`` calls in one process
contend exactly as two daemons do. The filesystem check is compared with util-linux's
``findmnt`` on real mounts, and the network case is a real sshfs mount over the tests' own sshd.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.daemon.store.state_lock import LOCK_FILE, StateLock, filesystem_type
from cud.errors import ConfigError
from tests.support.daemon import ROOT
from tests.support.sshd import Sshd

SOCKET = Path("/run/cud-test/a.sock")


@pytest.fixture
def state(short_tmp: Path) -> Path:
    return short_tmp / "state"


def holder_record(state_dir: Path) -> dict:
    return json.loads((state_dir / LOCK_FILE).read_text())


def test_a_second_open_in_the_same_process_is_refused_naming_the_holder(state: Path, short_tmp: Path) -> None:
    first = StateLock.acquire(state, SOCKET)
    try:
        assert holder_record(state) == {"pid": os.getpid(), "host": socket.gethostname(), "socket": str(SOCKET)}
        (short_tmp / "link").symlink_to(state)
        with pytest.raises(ConfigError) as refused:
            StateLock.acquire(short_tmp / "link", Path("/run/cud-test/b.sock"))
        message = refused.value.message
        assert f"'{short_tmp / 'link'}' ('{state}')" in message
        assert f"pid {os.getpid()} on host {socket.gethostname()!r}, socket '{SOCKET}'" in message
        assert refused.value.details["pid"] == os.getpid() and refused.value.details["socket"] == str(SOCKET)
        assert holder_record(state)["socket"] == str(SOCKET)  # the refused one wrote nothing
    finally:
        first.release()
    second = StateLock.acquire(short_tmp / "link", Path("b.sock"))  # relative: recorded absolute
    try:
        assert holder_record(state)["socket"] == str(Path.cwd() / "b.sock")
    finally:
        second.release()
    assert sorted(p.name for p in state.iterdir()) == [LOCK_FILE]  # the file stays; nothing else was made


def _in_child(action) -> int:
    """Run ``action`` in a forked child; its exit status (0 if it returned, 2 on ConfigError)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            action()
            code = 0
        except ConfigError as exc:
            code = 2 if exc.details.get("pid") == os.getppid() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_is_refused_while_the_parent_holds_it_and_takes_it_after(state: Path) -> None:
    held = StateLock.acquire(state, SOCKET)
    # 2: refused, naming this process (its parent) as the holder.
    assert _in_child(lambda: StateLock.acquire(state, Path("/run/cud-test/child.sock"))) == 2
    held.release()
    assert _in_child(lambda: StateLock.acquire(state, Path("/run/cud-test/child.sock"))) == 0
    assert holder_record(state)["socket"] == "/run/cud-test/child.sock"  # the child did hold it


def test_an_exec_child_does_not_keep_the_lock(state: Path) -> None:
    held = StateLock.acquire(state, SOCKET)
    # close_fds=False: only close-on-exec keeps the descriptor (and so the lock) out of the child.
    child = subprocess.Popen(["sleep", "300"], close_fds=False)
    try:
        held.release()
        StateLock.acquire(state, SOCKET).release()
    finally:
        child.kill()
        child.wait()


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(state: Path) -> None:
    script = ("import sys, pathlib; from cud.daemon.store.state_lock import StateLock; "
              "StateLock.acquire(pathlib.Path(sys.argv[1]), pathlib.Path('/run/cud-test/dead.sock')); "
              "print('locked', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", script, str(state)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(ConfigError, match=f"pid {holder.pid} .*socket '/run/cud-test/dead.sock'"):
            StateLock.acquire(state, SOCKET)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.stdout.close()
    assert holder_record(state)["pid"] == holder.pid  # what the dead one wrote is still there ...
    StateLock.acquire(state, SOCKET).release()  # ... but the lock went with it
    assert holder_record(state)["pid"] == os.getpid()


def test_a_symlink_planted_as_the_lock_file_is_not_followed(state: Path, short_tmp: Path) -> None:
    state.mkdir()
    target = short_tmp / "elsewhere"
    target.write_text("keep me\n")
    (state / LOCK_FILE).symlink_to(target)
    with pytest.raises(ConfigError, match=f"cannot open the state directory's lock file '{state / LOCK_FILE}'"):
        StateLock.acquire(state, SOCKET)
    assert target.read_text() == "keep me\n"


def findmnt_type(path: Path) -> str:
    """findmnt's answer; of mounts stacked on one point it lists each, the top one last."""
    return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", str(path)], capture_output=True, text=True,
                          check=True).stdout.split()[-1]


def test_the_filesystem_type_is_the_one_findmnt_reports(short_tmp: Path) -> None:
    spaced = short_tmp / "a mount\tpoint"  # mountinfo escapes both
    spaced.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(spaced)], check=True)
    try:
        (spaced / "inside").mkdir()
        (short_tmp / "link").symlink_to(spaced / "inside")
        paths = [Path("/"), Path("/proc"), Path("/dev/shm"), short_tmp, spaced, spaced / "inside",
                 Path(os.path.realpath(short_tmp / "link"))]
        for path in paths:
            assert filesystem_type(path) == findmnt_type(path), path
        assert filesystem_type(spaced / "inside") == "tmpfs" != filesystem_type(short_tmp)
    finally:
        subprocess.run(["umount", str(spaced)], check=True)


@pytest.fixture
def sshfs_mount(sshd: Sshd) -> Iterator[tuple[Path, Path]]:
    """(the directory, its sshfs mount): a real network filesystem, through the tests' sshd on 127.0.0.1."""
    remote = Path(tempfile.mkdtemp(prefix="cud-remote-", dir="/tmp"))
    mount = Path(tempfile.mkdtemp(prefix="cud-sshfs-", dir="/tmp"))
    # sftp_server: the tests' sshd has no sftp subsystem configured; sshfs runs the server itself.
    subprocess.run(["sshfs", "-F", str(sshd.config), "-o", "sftp_server=/usr/lib/openssh/sftp-server",
                    f"cud-test:{remote}", str(mount)], check=True, timeout=60)
    try:
        yield remote, mount
    finally:
        subprocess.run(["fusermount3", "-u", str(mount)], check=True)
        mount.rmdir()
        shutil.rmtree(remote)


def test_a_state_dir_on_a_network_filesystem_is_refused_by_cud_run(sshfs_mount: tuple[Path, Path],
                                                                      short_tmp: Path) -> None:
    remote, mount = sshfs_mount
    assert filesystem_type(mount) == "fuse.sshfs"
    # Why it is refused: a lock taken on the files themselves is not seen through the mount.
    (remote / "probe").write_text("")
    direct = os.open(remote / "probe", os.O_RDWR)
    through = os.open(mount / "probe", os.O_RDWR)
    try:
        fcntl.flock(direct, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(through, fcntl.LOCK_EX | fcntl.LOCK_NB)  # granted: flock does not cross sshfs
    finally:
        os.close(direct)
        os.close(through)
    (remote / "probe").unlink()

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test"}
    result = subprocess.run([sys.executable, "-m", "cud.daemon.main", "run", "--state-dir", str(mount / "state"),
                             "--socket", str(short_tmp / "s"), "--display", ":0"],
                            env=env, capture_output=True, text=True, timeout=60, cwd=short_tmp)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"cud: the state directory '{mount / 'state'}' is on a fuse.sshfs filesystem, which other machines can "
        "share: the daemon's lock and SQLite's WAL hold on a local filesystem only; choose a local directory "
        "(--state-dir, state_dir)\n")
    assert list(remote.iterdir()) == [] and not (short_tmp / "s").exists()  # nothing was made, not even the dir
