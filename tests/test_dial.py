"""The pieces of ``cuctl --host`` on their own: the URL, the ssh command line, and ``cuctl dial-stdio``.

The command line is checked by handing its remote part to a real ``sh -c``, as
sshd does, so "quoted for the remote shell" means what a shell makes of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cud.cuctl.ssh import CONNECT_TIMEOUT, SshDialer, SshTarget
from cud.errors import ConfigError
from cud.protocol import encode, request
from tests.support.daemon import ROOT, Daemon, cuctl, scenario

IDLE = scenario({"message": "Nothing to do."})


@pytest.mark.parametrize("url, host, user, port, socket", [
    ("ssh://vm1", "vm1", None, None, None),
    ("ssh://vm1/", "vm1", None, None, None),
    ("ssh://ana@vm1:2222/run/cud/cud.sock", "vm1", "ana", 2222, "/run/cud/cud.sock"),
    ("ssh://[::1]:22/tmp/s", "::1", None, 22, "/tmp/s"),
    ("ssh://vm1/tmp/it%27s%20a%20%22dir%22/s", "vm1", None, None, "/tmp/it's a \"dir\"/s"),
])
def test_urls_that_parse(url: str, host: str, user: str | None, port: int | None, socket: str | None) -> None:
    target = SshTarget.parse(url)
    assert (target.host, target.user, target.port, target.socket) == (host, user, port, socket)


@pytest.mark.parametrize("url, why", [
    ("vm1", "the only scheme is ssh://"),
    ("tcp://vm1:2375", "the only scheme is ssh://"),
    ("ssh://", "no host"),
    ("ssh://ana:secret@vm1", "no password in the URL"),
    ("ssh://vm1:99999", "the port must be a number from 1 to 65535"),
    ("ssh://vm1:0", "the port must be a number from 1 to 65535"),
    ("ssh://vm1:ssh", "the port must be a number from 1 to 65535"),
    ("ssh://-oProxyCommand=x", "a host cannot start with '-'"),
    ("ssh://vm1/s?x=1", "no ?query or #fragment"),
    ("ssh://vm1/s#top", "no ?query or #fragment"),
])
def test_bad_urls_are_refused_naming_the_value(url: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        SshTarget.parse(url)
    assert why in raised.value.message and repr(url) in raised.value.message


def test_a_socket_given_twice_or_a_bad_ssh_command_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="the socket is given twice"):
        SshDialer.from_url("ssh://vm1/a", "/b")
    monkeypatch.setenv("CUD_SSH_COMMAND", "ssh -o 'unclosed")
    with pytest.raises(ConfigError, match=r"\$CUD_SSH_COMMAND is not a command line"):
        SshDialer.from_url("ssh://vm1", None)
    monkeypatch.setenv("CUD_SSH_COMMAND", "   ")
    with pytest.raises(ConfigError, match=r"\$CUD_SSH_COMMAND names no command"):
        SshDialer.from_url("ssh://vm1", None)


def test_the_remote_command_reaches_the_remote_shell_word_for_word() -> None:
    odd = "/tmp/it's a \"dir\" $HOME;`touch /tmp/pwned`\\ & *"
    target = SshTarget.parse("ssh://ana@vm1:2222")
    target.socket = odd
    argv = target.argv(["ssh", "-F", "my config"], ["/opt/cud/bin/cuctl"])
    cut = argv.index("--")
    assert argv[:cut] == ["ssh", "-F", "my config", "-T", "-l", "ana", "-p", "2222",
                          "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
    assert argv[cut + 1] == "vm1"
    # ssh joins the words after the host with spaces and the remote shell splits them again.
    remote_line = " ".join(argv[cut + 2:])
    split = subprocess.run(["sh", "-c", f'set -- {remote_line}; for w in "$@"; do printf "%s\\0" "$w"; done'],
                           check=True, capture_output=True, text=True).stdout.split("\0")[:-1]
    assert split == ["/opt/cud/bin/cuctl", "dial-stdio", "--socket", odd]


def _dial_stdio(daemon: Daemon, **popen: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "dial-stdio", "--socket", str(daemon.socket)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, **popen)  # type: ignore[call-overload]


def test_dial_stdio_passes_the_half_close_on_and_still_relays_the_answer(start_daemon) -> None:
    daemon = start_daemon(IDLE)
    relay = _dial_stdio(daemon, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Two requests, then the end of stdin at once: both answers still come back, then the relay ends.
    out, err = relay.communicate(encode(request("ping")) + encode(request("list")), timeout=30)
    assert relay.returncode == 0, err
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["ok"] and first["result"]["peer"]["uid"] == os.getuid()
    assert second == {**second, "ok": True, "result": []}


def test_dial_stdio_ends_when_nobody_reads_its_output(start_daemon) -> None:
    daemon = start_daemon(IDLE)
    relay = _dial_stdio(daemon, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert relay.stdout is not None and relay.stdin is not None
    relay.stdout.close()  # the ssh session went away; stdin stays open, so only the output tells
    try:
        assert relay.wait(timeout=30) == 0
    finally:
        relay.stdin.close()
        if relay.poll() is None:
            relay.kill()
            relay.wait()
        relay.stderr.close()  # type: ignore[union-attr]


def test_dial_stdio_refuses_host_and_names_a_missing_socket(short_tmp) -> None:
    missing = short_tmp / "none"
    for args, needle in ((["--host", "ssh://vm1", "dial-stdio"], "drop --host 'ssh://vm1'"),
                         (["dial-stdio"], f"cannot connect to the daemon at {str(missing)!r}: No such file or directory")):
        result = cuctl(missing, *args, timeout=30)
        assert result.returncode == 2 and needle in result.stderr and result.stdout == "", result
