"""cuctl, called in-process through main(argv) -> exit code, against the real daemon."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image

import cud
from cud.cuctl.main import main
from cud.cuctl.tasks import TaskEventWords, describe_event
from cud.phrases.text import cut
from cud.protocol import PROTOCOL_VERSION
from tests.support.daemon import Daemon, scenario
from tests.support.recorder import Recorder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_on_terminal(columns: int, *argv: str) -> tuple[int, str]:
    """main(argv) with its stdout on a real terminal (a pty) ``columns`` wide; the exit code and what it showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    shown = bytearray()
    saved = sys.stdout
    try:
        with open(slave, "w", encoding="utf-8", closefd=True) as terminal:
            sys.stdout = terminal
            try:
                code = main(list(argv))
            finally:
                sys.stdout = saved
        while select.select([master], [], [], 1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed and all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    return code, shown.decode().replace("\r\n", "\n")


def test_every_command_and_its_exit_code(start_daemon, recorder: Recorder, capsys, monkeypatch,
                                         tmp_path: Path) -> None:
    daemon: Daemon = start_daemon(scenario(
        {"safety_checks": [{"code": "c", "message": "About to type it."}], "actions": [{"type": "type", "text": "x"}]},
        {"message": "all done"},
    ))
    sock = str(daemon.socket)
    code, out, _ = run(capsys, "ping", "--socket", sock)
    assert code == 0 and "may submit, approve and operate" in out
    monkeypatch.setenv("CUD_SOCKET", sock)  # the default when --socket is absent
    code, out, _ = run(capsys, "--json", "ping")
    assert code == 0 and json.loads(out)["peer"] == {"uid": 0, "name": "root"}

    code, out, _ = run(capsys, "submit", "type x", "--json")
    assert code == 0 and json.loads(out) == {"id": 1, "existing": False}
    approval = daemon.wait_approval(1)
    code, out, _ = run(capsys, "approvals")
    assert code == 0 and out.splitlines()[0].split() == ["ID", "TASK", "SEAT", "KIND", "CREATED", "WHAT"]
    # Why (the check's sentence, its full stop left out before the ':'), then what, with what it touches.
    what = out.splitlines()[1].split("Z  ", 1)[1]
    assert what == "About to type it: type 'x' into an unknown target", what
    # On a terminal the WHAT column is cut, after a whole word, so that each line fits.
    code, shown = run_on_terminal(90, "approvals")
    lines = shown.splitlines()
    assert code == 0 and len(lines) == 2 and all(len(line) <= 90 for line in lines), lines
    cell = lines[1].split("Z  ", 1)[1]
    assert cell.endswith("…") and what.startswith(cell[:-1]) and what[len(cell) - 1] == " ", (cell, what)
    code, out, _ = run(capsys, "approve", str(approval["id"]))
    assert code == 0 and out.strip() == f"approval {approval['id']} approved (task 1)"
    code, out, _ = run(capsys, "follow", "1")
    assert code == 0
    assert "waiting for approval" in out and "approved by root" in out and "ended succeeded: all done" in out
    code, out, _ = run(capsys, "show", "1", "--json")
    task = json.loads(out)
    assert code == 0 and {"id", "state", "prompt", "model", "steps", "final_message", "error", "created_at",
                          "started_at", "finished_at", "seat", "pinned"} <= set(task)
    assert (task["seat"], task["pinned"]) == ("default", False)
    code, out, _ = run(capsys, "show", "1")
    assert code == 0 and "state:         succeeded" in out and "seat:          default" in out
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0 and [t["id"] for t in json.loads(out)] == [1]
    code, out, _ = run(capsys, "list")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["1", "succeeded", "default"]
    code, out, _ = run(capsys, "seats", "--json")
    assert code == 0 and json.loads(out) == [{"name": "default", "display": daemon.display, "state": "idle",
                                              "task": None, "size": [1280, 800], "tags": [], "network": "host",
                                              "allowed": [], "private_tmp": False, "home_path": None, "error": None,
                                              "driver_pid": None}]  # the driver on a thread of the daemon
    code, out, _ = run(capsys, "seats")
    assert code == 0 and out.splitlines()[1].split() == ["default", daemon.display, "idle", "-", "1280x800", "-", "host",
                                                             "-"]
    code, out, _ = run(capsys, "follow", "1", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and lines[-1]["state"] == "succeeded" and lines[0]["kind"] == "queued"

    shot = tmp_path / "screen.png"
    code, out, _ = run(capsys, "screenshot", "-o", str(shot), "--json", "--seat", "default")
    assert code == 0 and json.loads(out)["width"] == 1280
    with Image.open(shot) as image:
        assert image.size == (1280, 800) and image.format == "PNG"

    code, out, _ = run(capsys, "cancel", "1")
    assert code == 0 and "already ended (succeeded)" in out


def test_failures_map_to_exit_codes_with_reasons_on_stderr(start_daemon, capsys, tmp_path: Path) -> None:
    daemon: Daemon = start_daemon(scenario({"http_error": 400}))
    sock = str(daemon.socket)
    # The model's API refused cud's request: cud could not do its part, an error (3), not the task's failure (1).
    code, out, err = run(capsys, "--socket", sock, "submit", "fail please", "--wait")
    assert code == 3 and out == "" and "task 1 failed:" in err
    code, _, err = run(capsys, "--socket", sock, "follow", "1")
    assert code == 3 and "task 1 failed" in err
    code, _, err = run(capsys, "--socket", sock, "show", "42")
    assert code == 2 and err.strip() == "cuctl: no task with id 42"
    code, _, err = run(capsys, "--socket", sock, "deny", "7")
    assert code == 2 and "no approval with id 7" in err
    code, _, err = run(capsys, "--socket", str(tmp_path / "absent.sock"), "ping")
    assert code == 2 and "cannot connect to the daemon" in err
    code, _, err = run(capsys, "--socket", sock, "show", "not-a-number")
    assert code == 2 and "invalid int value" in err
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--approval", "never")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--seat", "nope")
    assert code == 2 and err.strip() == "cuctl: no seat named 'nope'; this daemon's seats: default"
    code, _, err = run(capsys, "--socket", sock, "screenshot", "--seat", "nope", "-o", str(tmp_path / "x.png"))
    assert code == 2 and "no seat named 'nope'" in err and not (tmp_path / "x.png").exists()
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--seat", "no/slash")
    assert code == 2 and "'seat' must be a seat name" in err
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--max-steps", "0")
    assert code == 2 and "'max_steps' must be an integer from 1" in err
    # Above the daemon's own limits: the refusal names the config key that sets each.
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--max-steps", "10000")
    assert code == 2 and err.strip() == ("cuctl: 'submit' field 'max_steps' is 10000, above the daemon's limit of 50 "
                                         "(its config key 'max_steps')")
    code, _, err = run(capsys, "--socket", sock, "submit", "x", "--max-duration", "7200")
    assert code == 2 and err.strip() == ("cuctl: 'submit' field 'max_duration' is 7200 s, above the daemon's limit of "
                                         "3600 s (its config key 'max_duration')")
    code, _, err = run(capsys)
    assert code == 2 and "required" in err


def test_a_daemon_of_an_older_protocol_is_named_with_what_to_upgrade(short_tmp: Path, capsys) -> None:
    # A daemon of protocol 1 (cud 0.1) answers a newer request with its own version's error.
    path = short_tmp / "old.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def old_daemon() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b'{"v":1,"ok":false,"error":{"kind":"protocol","message":"unsupported protocol version 2; '
                         b'this side speaks 1","details":{}}}\n')

    thread = threading.Thread(target=old_daemon, daemon=True)
    thread.start()
    try:
        code, out, err = run(capsys, "--socket", str(path), "ping")
    finally:
        thread.join(10)
        server.close()
    assert code == 2 and out == ""
    assert f"speaks protocol version 1 and this cuctl (cud {cud.__version__}) speaks {PROTOCOL_VERSION}" in err
    assert "upgrade the daemon, or use the cuctl that came with it" in err


def test_a_socket_that_cannot_be_reached_says_why_and_how_to_name_one(short_tmp: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(short_tmp)
    monkeypatch.delenv("SANDBOX_DIR", raising=False)
    how = "; name the daemon's socket with --socket PATH or CUD_SOCKET=PATH"
    code, out, err = run(capsys, "--socket", str(short_tmp / "absent.sock"), "list")
    assert code == 2 and out == ""
    assert err.startswith(f"cuctl: cannot connect to the daemon at '{short_tmp}/absent.sock': "
                          f"No such file or directory{how}"), err
    # A path that is there but no socket says what it is, not "Connection refused".
    (short_tmp / "plain").write_text("")
    for path, what in ((short_tmp, "a directory"), (short_tmp / "plain", "a regular file")):
        code, _, err = run(capsys, "--socket", str(path), "list")
        assert code == 2 and f"at '{path}': it is {what}, not a socket{how}" in err, err
    # A socket nobody listens on (a daemon that died leaves one), named by $CUD_SOCKET.
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(short_tmp / "dead.sock"))
    try:
        monkeypatch.setenv("CUD_SOCKET", str(short_tmp / "dead.sock"))
        code, _, err = run(capsys, "list")
        assert code == 2 and (f"at '{short_tmp}/dead.sock': nothing listens on that socket (a daemon that stopped "
                              f"may have left it) ($CUD_SOCKET names it){how}") in err, err
        # With a sandbox up (its record of the daemon and its socket, as sandbox-up leaves them in
        # $SANDBOX_DIR), the error names the sandbox's socket as a newcomer would type it here.
        (short_tmp / "sb" / "run").mkdir(parents=True)
        (short_tmp / "sb" / "run" / "daemon.json").write_text("{}")
        sandbox = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sandbox.bind(str(short_tmp / "sb" / "cud.sock"))
        try:
            monkeypatch.setenv("SANDBOX_DIR", str(short_tmp / "sb"))
            code, _, err = run(capsys, "list")
            assert code == 2 and err.rstrip().endswith(f"{how} (a sandbox's daemon listens on 'sb/cud.sock')"), err
            # ...but not when the socket that failed is the sandbox's own.
            code, _, err = run(capsys, "--socket", "sb/cud.sock", "list")
            assert code == 2 and err.rstrip().endswith(how), err
        finally:
            sandbox.close()
    finally:
        dead.close()


@settings(max_examples=500, deadline=None)
@given(text=st.text(st.sampled_from("ab ü—,.;:\n\t€日"), max_size=120), width=st.integers(1, 100))
@example(text='Done: I typed "Hello from cud — ✓ ü €" into the demo app and pressed Enter.', width=60)
@example(text="https://example.com/a/path/with/no/spaces/in/it/at/all", width=20)
def test_cut_keeps_whole_words_and_says_it_cut(text: str, width: int) -> None:
    shown = cut(text, width)
    assert len(shown) <= width
    if len(text) <= width:
        assert shown == text
        return
    kept = shown[:-1]
    assert shown.endswith("…") and text.startswith(kept)
    assert kept == kept.rstrip(" \t\n,;:")  # no separator before the "…"
    last_space = max((i for i, c in enumerate(text[:width - 1]) if c.isspace()), default=-1)
    if not text[width - 1].isspace() and last_space >= width / 2:
        # The word the cut fell in is left out whole: what follows the kept part is a separator.
        assert text[len(kept)] in " \t\n,;:", (text, shown)


def test_an_error_from_a_command_is_prefixed_once_with_cuctl(start_daemon, tmp_path: Path) -> None:
    """main() adds ``cuctl: `` to every error; the messages do not carry a ``cuctl eval: `` of their own."""
    daemon: Daemon = start_daemon(scenario())
    nope = tmp_path / "nope"
    for argv, said in ((["eval", str(nope)], f"{str(nope)!r} is neither a spec file nor a folder of them"),
                       (["cp", "x", "task/1:out.txt"], "'task/1:out.txt': a task's collected files are kept")):
        done = subprocess.run([sys.executable, "-m", "cud.cuctl.main", "--socket", str(daemon.socket), *argv],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith(f"cuctl: {said}"), (argv, done.stderr)


def test_follow_words_a_reset_event_as_cuctl_reset_does_not_as_a_dict() -> None:
    event = {"at": "2026-12-05T12:00:01.5+00:00", "task_id": 5, "kind": "reset",
             "data": {"seat": "default", "processes": 3, "x_clients": 1, "home_entries": 12, "seconds": 0.4213}}
    assert describe_event(event) == ("[12:00:01] task 5 seat default: reset in 0.42 s (3 processes and 1 X clients "
                                     "ended, 12 entries in the home)")


def test_an_unknown_cost_is_said_once_on_a_step_line_and_its_reason_not_again() -> None:
    unknown = {"amount": None, "currency": None, "unknown": "no price for model 'gpt-5.4'"}
    step = {"at": "2026-12-05T12:00:01+00:00", "task_id": 5, "kind": "step",
            "data": {"step": 2, "total_ms": 900, "model_ms": 800, "driver_ms": 50, "overhead_ms": 50,
                     "input_tokens": 10, "cached_tokens": 0, "output_tokens": 5, "cost": unknown, "total_cost": unknown}}
    first, later = describe_event(step), describe_event(step, reason_said=True)
    assert first.endswith("; cost unknown (no price for model 'gpt-5.4')") and first.count("no price") == 1, first
    assert later.endswith("; cost unknown"), later


def test_one_tasks_event_words_say_the_unknown_costs_reason_on_its_first_step_line_only() -> None:
    unknown = {"amount": None, "currency": None, "unknown": "no price for model 'gpt-5.4'"}
    def step(n: int) -> dict[str, Any]:
        return {"at": "2026-12-05T12:00:01+00:00", "task_id": 5, "kind": "step",
                "data": {"step": n, "total_ms": 900, "model_ms": 800, "driver_ms": 50, "overhead_ms": 50,
                         "input_tokens": 10, "cached_tokens": 0, "output_tokens": 5, "cost": unknown,
                         "total_cost": unknown}}
    queued = {"at": "2026-12-05T12:00:00+00:00", "task_id": 5, "kind": "queued", "data": {"by": {"name": "qa"}}}
    words = TaskEventWords()
    lines = [words.describe(e) for e in (queued, step(1), step(2), step(3))]
    assert [line.count("no price") for line in lines] == [0, 1, 0, 0], lines
    assert TaskEventWords().describe(step(2)).count("no price") == 1  # a new task says it again
