"""A real OpenSSH server on 127.0.0.1, for ``cuctl --host ssh://`` tests: own keys, own config, stopped by pid.

Everything lives in one temp directory: the host key, a client key the server
accepts and one it does not, ``sshd_config``, and an ``ssh_config`` whose
``Host`` aliases the tests pass to ``cuctl --host`` through
``CUD_SSH_COMMAND="ssh -F <it>"``:

* ``cud-test``: this user with the accepted key;
* ``cud-wrong-key``: a key the server does not know;
* ``cud-guest``: :data:`GUEST`, a second login account that only exists while
  the tests run (made with useradd, as root only), to show the daemon sees the
  ssh login user as its peer;
* :meth:`Sshd.add_alias` adds more, each sending its own environment
  (``SetEnv CUD_SOCKET=…``, which this sshd accepts): several "machines".

The venv's cuctl is not on a login's PATH (sshd sets its own, and root's
``.bashrc`` another), so the tests name it with ``CUD_REMOTE_CUCTL``
(:data:`REMOTE_CUCTL`), as a user whose cud lives in a venv would. The guest
may not be able to run the venv's interpreter (pyenv's lives in root's 0700
home), so its cuctl is this source tree run by Debian's ``python3``
(:data:`GUEST_CUCTL`): ``dial-stdio`` needs nothing beyond the standard library.

No system sshd is involved or needed; the server is ``sshd -D -e`` in the
foreground, logging to a file, listening on a free port of 127.0.0.1 only.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon import ROOT
from .vnc import free_port
from .xserver import stop_process

__all__ = ("GUEST", "GUEST_CUCTL", "REMOTE_CUCTL", "SSHD", "Sshd", "add_guest", "remove_guest", "sshd")

SSHD = shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:/sbin") or "/usr/sbin/sshd"
#: The second login account (root only). Its password field is '*': no password
#: works, and sshd (without PAM) does not treat the account as locked as it would '!'.
GUEST = "cud-ssh-guest"
#: The remote cuctl, for CUD_REMOTE_CUCTL: this venv's, on the same machine.
REMOTE_CUCTL = str(Path(sys.executable).parent / "cuctl")
GUEST_CUCTL = f"env PYTHONPATH={ROOT} /usr/bin/python3 -m cud.cuctl.main"


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


class Sshd:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cud-sshd-", dir="/tmp"))
        self.dir.chmod(0o755)  # sshd reads authorized_keys as the login user, the guest too
        self.log = self.dir / "sshd.log"
        self.config = self.dir / "ssh_config"
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            host_key = _keygen(self.dir / "host_key")
            accepted = _keygen(self.dir / "id")
            _keygen(self.dir / "other_id")
        except BaseException:  # the fixture's stop() is never reached: the directory goes here
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        keys = self.dir / "authorized_keys"
        keys.write_text(accepted + "\n")
        keys.chmod(0o644)
        self.port = 0
        self._host_key = host_key

    @property
    def ssh_command(self) -> str:
        """The value for CUD_SSH_COMMAND."""
        return f"ssh -F {self.config}"

    def client_env(self, **extra: str) -> dict[str, str]:
        """The environment of a cuctl on "another machine": this ssh, the venv's remote cuctl, no CUD_SOCKET."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CUD_SSH_COMMAND": self.ssh_command,
               "CUD_REMOTE_CUCTL": REMOTE_CUCTL, **extra}
        env.pop("CUD_SOCKET", None)
        env.pop("CUD_HOST", None)  # a developer's own must not steer the tests' cuctl
        return env

    def start(self, attempts: int = 3) -> Sshd:
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        for _ in range(attempts):  # the free port may be taken between the probe and sshd's bind
            self.port = free_port()
            self._write_configs()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            if self._listening(15.0):
                return self
            stop_process(self.proc)
        raise AssertionError(f"sshd did not start; log:\n{self.log.read_text(errors='replace')}")

    def _listening(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            if f"Server listening on 127.0.0.1 port {self.port}" in self.log.read_text(errors="replace"):
                return True
            time.sleep(0.05)
        return False

    def _write_configs(self) -> None:
        d = self.dir
        (d / "sshd_config").write_text(f"""\
ListenAddress 127.0.0.1
Port {self.port}
HostKey {d / 'host_key'}
PidFile none
AuthorizedKeysFile {d / 'authorized_keys'}
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers root {GUEST} {pwd.getpwuid(os.getuid()).pw_name}
AcceptEnv CUD_SOCKET
X11Forwarding no
AllowTcpForwarding no
LogLevel VERBOSE
""")
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {self._host_key}\n")
        me = pwd.getpwuid(os.getuid()).pw_name
        common = f"""\
  HostName 127.0.0.1
  Port {self.port}
  IdentitiesOnly yes
  UserKnownHostsFile {d / 'known_hosts'}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
"""
        self.config.write_text(
            f"Host cud-test\n  User {me}\n  IdentityFile {d / 'id'}\n{common}\n"
            f"Host cud-wrong-key\n  User {me}\n  IdentityFile {d / 'other_id'}\n{common}\n"
            f"Host cud-guest\n  User {GUEST}\n  IdentityFile {d / 'id'}\n{common}\n")

    def add_alias(self, name: str, **env: str) -> str:
        """Another ``Host`` like ``cud-test`` that also sends ``env`` (``SetEnv``): a second "machine"."""
        sets = "".join(f"  SetEnv {key}={value}\n" for key, value in env.items())
        block = self.config.read_text().split("\n\n")[0]  # cud-test's
        with open(self.config, "a") as config:
            config.write(block.replace("Host cud-test", f"Host {name}", 1) + "\n" + sets + "\n")
        return name

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    """One sshd for a test module; its directory goes even if it fails to start."""
    server = Sshd()
    try:
        yield server.start()
    finally:
        server.stop()


def add_guest(home: Path) -> bool:
    """Make the :data:`GUEST` account (root only); False if this user cannot."""
    if os.geteuid() != 0:
        return False
    try:
        pwd.getpwnam(GUEST)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh",
                        "--password", "*", GUEST], check=True)
    return True


def remove_guest() -> None:
    subprocess.run(["userdel", GUEST], check=False, capture_output=True)
