"""The socket under abuse: strangers, garbage, oversized and half-open connections.

Everything here targets our own daemon's socket only, with a bounded number of
connections and a bounded time.
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.daemon.server.unix_socket import FIRST_REQUEST_TIMEOUT
from cud.protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.recorder import wait_until

IDLE = scenario({"message": "hi"}, look_first=False)


def raw(path: Path, data: bytes, *, read: bool = True, timeout: float = 10.0) -> list[dict]:
    """Send bytes, half-close, and read every line the daemon answers until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may close first on an oversized message; its reply is still readable
        if not read:
            return []
        out = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    return [json.loads(line) for line in out.splitlines()]


def test_a_user_not_in_access_is_refused_even_on_an_open_socket(start_daemon) -> None:
    daemon: Daemon = start_daemon(IDLE)
    nobody = pwd.getpwnam("nobody")
    # Open everything up "by mistake": the daemon must still refuse by SO_PEERCRED.
    os.chmod(daemon.dir, 0o711)
    os.chmod(daemon.socket, 0o666)
    setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    result = cuctl(daemon.socket, "submit", "do something", prefix=setpriv)
    assert result.returncode == 2
    assert "user 'nobody' (uid 65534) may not use this daemon" in result.stderr
    assert daemon.call("list") == []  # nothing was queued
    assert cuctl(daemon.socket, "ping", prefix=setpriv).returncode == 2
    assert "refused connection from nobody" in daemon.log_text()


def test_configured_submitters_may_submit_but_not_approve(start_daemon) -> None:
    daemon: Daemon = start_daemon(
        scenario({"safety_checks": [{"code": "c", "message": "m"}], "actions": [{"type": "wait"}]},
                 {"message": "done"}),
        config='[access]\nsubmit_users = ["nobody"]\n',
    )
    os.chmod(daemon.dir, 0o711)
    os.chmod(daemon.socket, 0o666)
    nobody = pwd.getpwnam("nobody")
    setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    submitted = cuctl(daemon.socket, "submit", "wait a bit", "--json", prefix=setpriv)
    assert submitted.returncode == 0, submitted.stderr
    task_id = json.loads(submitted.stdout)["id"]
    assert daemon.task(task_id)["submitter"] == {"uid": nobody.pw_uid, "name": "nobody"}
    approval = daemon.wait_approval(task_id)
    refused = cuctl(daemon.socket, "approve", str(approval["id"]), prefix=setpriv)
    assert refused.returncode == 2 and "may not approve actions" in refused.stderr
    assert daemon.call("approve", id=approval["id"])["decided_by"] == {"uid": 0, "name": "root"}
    daemon.wait_state(task_id, "succeeded")


def test_malformed_oversized_and_unknown_messages_get_errors_and_the_daemon_lives(start_daemon) -> None:
    daemon = start_daemon(IDLE)
    answers = raw(daemon.socket, b"not json\n{\"v\": 2, \"type\": \"nope\"}\n{\"v\": 9}\n"
                                 b"{\"v\": 2, \"type\": \"ping\"}\n")
    kinds = [a["error"]["kind"] if not a["ok"] else "ok" for a in answers]
    assert kinds == ["protocol", "protocol", "protocol", "ok"]  # framing survives bad lines
    assert "unknown request type 'nope'" in answers[1]["error"]["message"]
    assert "unsupported protocol version 9" in answers[2]["error"]["message"]

    # A client of protocol 1 (cud 0.1) is answered in its own version, so it can show why.
    old = raw(daemon.socket, b'{"v": 1, "type": "ping"}\n{"v": 1, "type": "submit", "prompt": "p"}\n')
    assert [(a["v"], a["ok"], a["error"]["kind"]) for a in old] == [(1, False, "protocol")] * 2
    assert "this client speaks protocol version 1 and the daemon" in old[0]["error"]["message"]
    assert f"speaks {PROTOCOL_VERSION}: use the cuctl that came with the daemon" in old[0]["error"]["message"]

    big = raw(daemon.socket, b'{"v": 2, "type": "submit", "prompt": "' + b"x" * (MAX_MESSAGE_BYTES + 10) + b'"}\n')
    assert len(big) == 1 and f"exceeds the {MAX_MESSAGE_BYTES}-byte limit" in big[0]["error"]["message"]
    assert daemon.call("list") == []
    assert daemon.call("ping")["may_submit"] is True


def test_half_open_and_silent_clients_do_not_block_others(start_daemon) -> None:
    daemon = start_daemon(IDLE)
    stuck = []
    try:
        for _ in range(20):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(daemon.socket))
            sock.sendall(b'{"v": 2, "type": "pi')  # never finished
            stuck.append(sock)
        never_reads = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        never_reads.connect(str(daemon.socket))
        never_reads.setblocking(False)
        try:  # enough pings that the answers fill the socket buffers while nobody reads them
            never_reads.send(b'{"v":1,"type":"ping"}\n' * 20000)
        except BlockingIOError:
            pass
        stuck.append(never_reads)
        for _ in range(5):
            assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION
    finally:
        for sock in stuck:
            sock.close()
    assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION


def _half_open(path: Path, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        socks.append(sock)
        sock.connect(str(path))
        sock.sendall(b'{"v": 2, "type": "pi')  # half a request, never finished
    return socks


def test_a_thousand_idle_half_open_connections_never_lock_out_a_newcomer(start_daemon) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    daemon = start_daemon(IDLE, config="max_connections = 300\n")
    nobody = pwd.getpwnam("nobody")
    os.chmod(daemon.dir, 0o711)
    os.chmod(daemon.socket, 0o666)
    stuck: list[socket.socket] = []
    try:
        # One uid (root, like a leaking monitoring script) holds far more than every slot.
        stuck = _half_open(daemon.socket, 1000)
        for _ in range(3):
            assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION  # the same uid, served at once
        # So is another user, through a real cuctl; the slots of the idle ones were given up.
        setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
        other = cuctl(daemon.socket, "ping", prefix=setpriv)
        assert other.returncode == 2 and "may not use this daemon" in other.stderr  # refused by [access], not by load
        assert "dropping an idle connection of uid 0" in daemon.log_text()
        # Dropped connections are closed (EOF), not left hanging on the client side.
        dropped = 0
        for sock in stuck[:100]:
            sock.settimeout(10)
            try:
                dropped += sock.recv(1) == b""
            except ConnectionResetError:
                dropped += 1
        assert dropped == 100
    finally:
        for sock in stuck:
            sock.close()
    assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION


def test_a_connection_that_sends_no_complete_request_is_dropped(start_daemon) -> None:
    daemon = start_daemon(IDLE)
    [sock] = _half_open(daemon.socket, 1)
    with sock:
        sock.settimeout(FIRST_REQUEST_TIMEOUT + 20)
        assert sock.recv(1) == b""  # closed by the daemon, long before the 30 s idle timeout


def test_a_busy_connection_is_never_dropped_for_a_newcomer(start_daemon) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}], "delay": 3600}, {"message": "never"}),
                          config="max_connections = 6\n")  # 4 slots of 6 per uid
    task_id = daemon.call("submit", prompt="slow")["id"]
    follows = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
    try:
        for sock in follows:  # three clients following the task: requests in progress, the uid's share
            sock.connect(str(daemon.socket))
            sock.sendall(json.dumps({"v": PROTOCOL_VERSION, "type": "follow", "id": task_id}).encode() + b"\n")
            sock.settimeout(10)
            assert sock.recv(1)  # the stream has begun
        stuck = _half_open(daemon.socket, 10)  # each evicts the one before it
        for sock in stuck:
            sock.close()
        assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION
        for sock in follows:
            sock.setblocking(False)
            try:
                assert sock.recv(65536) != b""  # still open: not dropped
            except BlockingIOError:
                pass
        # A fourth follow fills the uid's share; a fifth finds no idle connection to drop, and the
        # refusal names the config key that sets the slots.
        follows.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        follows[-1].connect(str(daemon.socket))
        follows[-1].sendall(json.dumps({"v": PROTOCOL_VERSION, "type": "follow", "id": task_id}).encode() + b"\n")
        follows[-1].settimeout(10)
        assert follows[-1].recv(1)
        # (A ping may first take the slot of a closed connection the daemon has not yet let go of.)
        refused = wait_until(lambda: (r := cuctl(daemon.socket, "ping")).returncode != 0 and r, 20, "a refused ping")
        assert refused.returncode == 2 and ("too many connections in progress (a user may hold 4 of the daemon's 6: "
                                            "its config key 'max_connections'") in refused.stderr, refused.stderr
        # No cancel now: the uid's share stays full until the daemon writes to the closed follows.
        # The daemon's stop ends the task.
    finally:
        for sock in follows:
            sock.close()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory):
    """One daemon for the hypothesis run (starting one per example would take minutes)."""
    from cud.scripted import ScriptedModel
    from tests.support.xserver import start_xvfb

    server = start_xvfb(tmp_path_factory.mktemp("x"))
    model = ScriptedModel(IDLE)
    daemon = Daemon(server.display, model.start())
    try:
        yield daemon.start()
    finally:
        daemon.cleanup()
        model.stop()
        server.stop()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frames=st.lists(st.binary(max_size=512) | st.text(max_size=200).map(str.encode), min_size=1, max_size=5))
def test_hostile_bytes_never_stop_the_daemon(shared_daemon: Daemon, frames: list[bytes]) -> None:
    answers = raw(shared_daemon.socket, b"\n".join(frames) + b"\n")
    for answer in answers:
        assert answer["v"] in (1, PROTOCOL_VERSION) and isinstance(answer["ok"], bool)  # 1: an old client's reply
        if not answer["ok"]:
            assert answer["error"]["kind"] in ("protocol", "not_found", "access_denied", "approval")
    assert shared_daemon.proc is not None and shared_daemon.proc.poll() is None


def test_the_daemon_still_answers_after_the_fuzzing(shared_daemon: Daemon) -> None:
    assert shared_daemon.call("ping")["protocol"] == PROTOCOL_VERSION
    assert stat.S_ISSOCK(os.stat(shared_daemon.socket).st_mode)
