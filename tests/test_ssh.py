"""cuctl --host ssh://: every command through a real OpenSSH server on 127.0.0.1 to ``cuctl dial-stdio``.

The daemon is the real one on a private Xvfb with the scripted model; sshd is
the tests' own (tests/support/sshd.py), and cuctl reaches it the way a user's
would, with ``CUD_SSH_COMMAND="ssh -F <the test's ssh_config>"``. What cuctl
prints over ssh is compared with what it prints on the daemon's own machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.browser import CHROMIUM, Browser
from tests.support.console import Console
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.recorder import wait_until
from tests.support.sshd import GUEST, GUEST_CUCTL, Sshd, add_guest, remove_guest
from tests.support.vnc import free_port

CLICKS = scenario({"message": "Two clicks.", "actions": [{"type": "click", "button": "left", "x": 40, "y": 30}]},
                  {"actions": [{"type": "double_click", "x": 90, "y": 60}]}, {"message": "Clicked twice."})
IDLE = scenario({"message": "Nothing to do."})
#: The login the tests' ssh config uses for cud-test: whoever runs the tests.
ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture(scope="module")
def guest(sshd: Sshd) -> Iterator[str]:
    if not add_guest(sshd.dir):
        pytest.skip(f"adding the second login account {GUEST!r} needs root")
    yield GUEST
    remove_guest()


def remote(sshd: Sshd, host: str, *args: str, env: dict[str, str] | None = None,
           timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """cuctl --host HOST ARGS, as a user on another machine runs it (no --socket, no CUD_SOCKET)."""
    return subprocess.run([sys.executable, "-m", "cud.cuctl.main", "--host", host, *args],
                          env=sshd.client_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def url(daemon: Daemon, alias: str = "cud-test") -> str:
    return f"ssh://{alias}{quote(str(daemon.socket))}"


def tree(top: Path) -> dict[str, object]:
    """An export's files by name; the manifest without the moment it was written."""
    files: dict[str, object] = {str(p.relative_to(top)): p.read_bytes() for p in top.rglob("*") if p.is_file()}
    manifest = json.loads(files["manifest.json"])  # type: ignore[arg-type]
    del manifest["exported_at"]
    files["manifest.json"] = manifest
    return files


def one_line_reason(result: subprocess.CompletedProcess[str]) -> str:
    """An ssh-side failure: exit 2, nothing on stdout, one line on stderr and no traceback."""
    assert result.returncode == 2, result
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cuctl: "), result.stderr
    return lines[0]


def test_submit_wait_list_and_metrics_over_ssh(sshd: Sshd, start_daemon) -> None:
    daemon = start_daemon(IDLE)
    host = url(daemon)
    done = remote(sshd, host, "submit", "--wait", "say nothing")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Nothing to do.\n"
    listed = json_out(remote(sshd, host, "list", "--json"))
    assert listed == json_out(cuctl(daemon.socket, "list", "--json"))
    assert [(t["state"], t["submitter"]["name"]) for t in listed] == [("succeeded", ME)]
    # The same socket named with --socket instead of in the URL.
    assert json_out(remote(sshd, "ssh://cud-test", "--socket", str(daemon.socket), "ping", "--json"))["peer"] == {
        "uid": os.getuid(), "name": ME}
    families = {f.name: f for f in text_string_to_metric_families(remote(sshd, host, "metrics").stdout)}
    succeeded = [s.value for s in families["cud_tasks"].samples
                 if s.name == "cud_tasks_total" and s.labels == {"state": "succeeded"}]
    assert succeeded == [1.0]


def test_follow_live_approve_report_and_export_over_ssh(sshd: Sshd, start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon(CLICKS, approval="actions")
    host = url(daemon)
    task_id = json_out(remote(sshd, host, "submit", "--json", "click twice"))["id"]
    follow = subprocess.Popen([sys.executable, "-m", "cud.cuctl.main", "--host", host, "follow", str(task_id)],
                              env=sshd.client_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        for _ in range(2):  # approved from "another machine" while the follow streams
            approval = daemon.wait_approval(task_id)
            approved = remote(sshd, host, "approve", str(approval["id"]))
            assert approved.returncode == 0, approved.stderr
            wait_until(lambda a=approval: all(p["id"] != a["id"] for p in daemon.call("approvals")), 30,
                       f"approval {approval['id']} to be taken")
        out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, err
    assert daemon.task(task_id)["state"] == "succeeded"
    assert out.splitlines() == cuctl(daemon.socket, "follow", str(task_id)).stdout.splitlines()
    decided = [e["data"]["by"] for e in daemon.events(task_id) if e["kind"] == "approval_decided"]
    assert decided == [{"uid": os.getuid(), "name": ME}] * 2

    # The record with every screenshot: byte for byte what the daemon's own machine gets.
    there, here = tmp_path / "there", tmp_path / "here"
    assert remote(sshd, host, "export", str(task_id), "-o", str(there)).returncode == 0
    assert cuctl(daemon.socket, "export", str(task_id), "-o", str(here)).returncode == 0
    files = tree(here)
    shots = sum(name.endswith(".png") for name in files)
    assert shots >= 3 and tree(there) == files
    page = remote(sshd, host, "report", str(task_id), "-o", "-")
    assert page.returncode == 0, page.stderr
    assert page.stdout == cuctl(daemon.socket, "report", str(task_id), "-o", "-").stdout
    assert page.stdout.count("data:image/png;base64,") >= shots


def test_a_socket_path_with_spaces_and_quotes_arrives_intact(sshd: Sshd, start_daemon, short_tmp: Path) -> None:
    odd = short_tmp / "it's a \"dir\" $HOME;`x`"
    odd.mkdir()
    daemon = start_daemon(IDLE, workdir=odd)
    assert str(daemon.socket).count(" ") == 3
    for args in (["--host", url(daemon)], ["--host", "ssh://cud-test", "--socket", str(daemon.socket)]):
        result = remote(sshd, args[1], *args[2:], "ping")
        assert result.returncode == 0, result.stderr
        assert f"answers {ME}" in result.stdout


def test_the_daemon_sees_the_ssh_login_user(sshd: Sshd, guest: str, start_daemon) -> None:
    refusing = start_daemon(IDLE)
    # The guest may reach the socket file; the daemon itself must say no (SO_PEERCRED).
    os.chmod(refusing.dir, 0o711)
    os.chmod(refusing.socket, 0o666)
    as_guest = {"CUD_REMOTE_CUCTL": GUEST_CUCTL}
    refused = remote(sshd, url(refusing, "cud-guest"), "submit", "do something", env=as_guest)
    reason = one_line_reason(refused)
    assert f"user {guest!r}" in reason and "may not use this daemon: not in [access]" in reason, reason
    assert refusing.call("list") == []

    admitting = start_daemon(IDLE, config=f'[access]\nsubmit_users = ["{guest}"]\n')
    os.chmod(admitting.dir, 0o711)
    os.chmod(admitting.socket, 0o666)
    host = url(admitting, "cud-guest")
    me = json_out(remote(sshd, host, "ping", "--json", env=as_guest))
    assert me["peer"]["name"] == guest and me["may_submit"] and not me["may_approve"]
    task_id = json_out(remote(sshd, host, "submit", "--json", "as the guest", env=as_guest))["id"]
    assert admitting.wait_state(task_id, "succeeded")["submitter"]["name"] == guest


def test_unreachable_host_wrong_key_and_missing_remote_cuctl_fail_in_one_line(sshd: Sshd, start_daemon) -> None:
    daemon = start_daemon(IDLE)
    closed_port = free_port()  # nobody listens there
    reason = one_line_reason(remote(sshd, f"ssh://127.0.0.1:{closed_port}{daemon.socket}", "ping"))
    assert f"ssh: connect to host 127.0.0.1 port {closed_port}: Connection refused" in reason, reason

    reason = one_line_reason(remote(sshd, url(daemon, "cud-wrong-key"), "ping"))
    assert "Permission denied (publickey)" in reason, reason

    reason = one_line_reason(remote(sshd, url(daemon), "ping", env={"CUD_REMOTE_CUCTL": "cuctl-not-installed"}))
    assert "no 'cuctl-not-installed' on the remote PATH" in reason and "not found" in reason, reason

    reason = one_line_reason(remote(sshd, "ssh://cud-test/no/such/cud.sock", "ping"))
    assert "cannot connect to the daemon at '/no/such/cud.sock': No such file or directory" in reason, reason

    # Whatever the far side prints reaches the terminal without its control characters.
    noisy = "sh -c 'printf \"\\033]0;title\\007\\033[31mboom\\n\" >&2; exit 3'"
    reason = one_line_reason(remote(sshd, url(daemon), "ping", env={"CUD_REMOTE_CUCTL": noisy}))
    assert reason.endswith("boom") and "\x1b" not in reason and "\x07" not in reason, repr(reason)

    reason = one_line_reason(remote(sshd, url(daemon), "ping", env={"CUD_SSH_COMMAND": "ssh-not-installed -F x"}))
    assert "cannot run 'ssh-not-installed'" in reason, reason
    assert daemon.call("list") == []


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chromium = Browser(tmp_path)
    yield chromium
    chromium.close()


def _runs_ssh_with(pid: str, sshd: Sshd) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile
        return False
    return argv[:1] == [b"ssh"] and str(sshd.config).encode() in argv


def _sessions(sshd: Sshd) -> int:
    return sshd.log.read_text(errors="replace").count("Starting session:")


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM}")
def test_the_console_serves_here_and_approves_there(sshd: Sshd, start_daemon, short_tmp: Path,
                                                     browser: Browser) -> None:
    daemon = start_daemon(CLICKS, approval="actions")
    task_id = daemon.call("submit", prompt="click twice")["id"]
    approval = daemon.wait_approval(task_id)
    console = Console(daemon.socket, short_tmp, host=url(daemon), env=sshd.client_env())
    try:
        watched = browser.open(console.url, width=1400, height=1000)
        page = watched.page
        page.wait_for_selector("#status.ok")
        card = page.locator(f'article.approval[data-id="{approval["id"]}"]')
        card.wait_for()
        assert f"task {task_id}" in card.inner_text()
        page.wait_for_function("""() => [...document.querySelectorAll("img.live")]
                                  .some(i => i.complete && i.naturalWidth === 1280)""")  # the remote seat's screen
        # Connections are kept between the page's requests: a few more seconds of polling the
        # state and the screen (four requests a second) open next to no new ssh session.
        before = _sessions(sshd)
        for _ in range(3):
            with page.expect_response(lambda r: r.url.endswith("/api/state")):
                pass
        assert _sessions(sshd) - before <= 2, sshd.log.read_text(errors="replace")[-3000:]
        for _ in range(2):  # one approval per batch of actions
            approval = daemon.wait_approval(task_id)
            card = page.locator(f'article.approval[data-id="{approval["id"]}"]')
            card.get_by_role("button", name="Approve", exact=True).click()
            card.wait_for(state="detached")
        assert daemon.wait_state(task_id, "succeeded")["final_message"] == "Clicked twice."
        decided = [e["data"]["by"]["name"] for e in daemon.events(task_id) if e["kind"] == "approval_decided"]
        assert decided == [ME, ME]
        assert watched.report.problems() == [] and watched.report.foreign(console.origin) == []
        watched.close()
    finally:
        assert console.stop() == 0, console.log_text()
    assert "Traceback" not in console.log_text()
    # Every ssh the console started ended with it.
    assert [pid for pid in os.listdir("/proc") if pid.isdigit() and _runs_ssh_with(pid, sshd)] == []


def test_ssh_connection_sharing_from_the_users_config_works(sshd: Sshd, start_daemon, short_tmp: Path) -> None:
    # ControlMaster/ControlPersist, as a user may set them for many cuctl calls to one VM:
    # the first ssh becomes the master and stays behind, the next ones ride on it.
    daemon = start_daemon(IDLE)
    control = ["-o", f"ControlPath={short_tmp}/%C"]
    shared = {"CUD_SSH_COMMAND": f"{sshd.ssh_command} -o ControlMaster=auto {' '.join(control)} "
                                 "-o ControlPersist=60"}
    connections = sshd.log.read_text(errors="replace").count("Connection from")
    master: int | None = None
    try:
        for prompt in ("first", "second"):
            done = remote(sshd, url(daemon), "submit", "--wait", prompt, env=shared)
            assert done.returncode == 0 and done.stdout == "Nothing to do.\n", done.stderr
        assert sshd.log.read_text(errors="replace").count("Connection from") == connections + 1
        check = subprocess.run(["ssh", "-F", str(sshd.config), *control, "-O", "check", "cud-test"],
                               capture_output=True, text=True, timeout=30)
        running = re.search(r"Master running \(pid=(\d+)\)", check.stderr)
        assert running, check
        master = int(running[1])
    finally:
        subprocess.run(["ssh", "-F", str(sshd.config), *control, "-O", "exit", "cud-test"], capture_output=True,
                       timeout=30)
        if master is not None and Path(f"/proc/{master}").exists():  # -O exit did not do it: by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(master, signal.SIGTERM)
    assert master is not None
    wait_until(lambda: not Path(f"/proc/{master}").exists(), 30, "the ssh master to exit")
    assert [t["prompt"] for t in daemon.call("list")] == ["first", "second"]
