"""cuctl, called in-process through main(argv) -> exit code, against the real daemon."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from PIL import Image

import cud
from cud.cuctl.main import main
from cud.protocol import PROTOCOL_VERSION
from tests.support.daemon import Daemon, scenario
from tests.support.recorder import Recorder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_and_its_exit_code(start_daemon, recorder: Recorder, capsys, monkeypatch,
                                         tmp_path: Path) -> None:
    daemon: Daemon = start_daemon(scenario(
        {"safety_checks": [{"code": "c", "message": "type it?"}], "actions": [{"type": "type", "text": "x"}]},
        {"message": "all done"},
    ))
    sock = str(daemon.socket)
    code, out, _ = run(capsys, "ping", "--socket", sock)
    assert code == 0 and "may submit, approve and operate" in out
    monkeypatch.setenv("CUD_SOCKET", sock)  # the default when --socket is absent
    code, out, _ = run(capsys, "--json", "ping")
    assert code == 0 and json.loads(out)["peer"] == {"uid": 0, "name": "root"}

    code, out, _ = run(capsys, "submit", "type x", "--json")
    assert code == 0 and json.loads(out) == {"id": 1}
    approval = daemon.wait_approval(1)
    code, out, _ = run(capsys, "approvals")
    assert code == 0 and "type it?" in out and out.splitlines()[0].split() == ["ID", "TASK", "SEAT", "KIND", "CREATED", "WHAT"]
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
                                              "task": None, "size": [1280, 800], "error": None}]
    code, out, _ = run(capsys, "seats")
    assert code == 0 and out.splitlines()[1].split() == ["default", daemon.display, "idle", "-", "1280x800", "-"]
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
    code, out, err = run(capsys, "--socket", sock, "submit", "fail please", "--wait")
    assert code == 1 and out == "" and "task 1 failed:" in err
    code, _, err = run(capsys, "--socket", sock, "follow", "1")
    assert code == 1 and "task 1 failed" in err
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
