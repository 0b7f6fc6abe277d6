"""The fleet examples: GNU parallel fans a file of prompts out over two "machines" reached by ssh.

Two real daemons, each on its own Xvfb with its own scripted model, stand for two
VMs; the tests' sshd on 127.0.0.1 reaches both (tests/support/sshd.py). The
first example is ``examples/fleet/fan-out`` (cuctl --host, run here); the second
the one-liner of docs/fleets.md, where parallel's ``--sshlogin`` runs cuctl on each machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from cud.scripted import ScriptedModel
from tests.support.daemon import ROOT, Daemon, scenario
from tests.support.sshd import REMOTE_CUCTL, Sshd
from tests.support.xserver import start_xvfb

FAN_OUT = ROOT / "examples" / "fleet" / "fan-out"
LOOK_AND_ANSWER = scenario({"actions": [{"type": "wait"}]}, {"message": "Looked twice."})
PROMPTS = ["open the mail", "it's a \"quoted\" prompt", "costs $5; `date` & more", "-starts with a dash",
           "Grüße ½", "last one"]


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[list[Daemon]]:
    """Two daemons, each with its own display and model; whatever started is stopped, in reverse."""
    stops: list[Callable[[], object]] = []
    daemons: list[Daemon] = []
    try:
        for n in range(2):
            (tmp_path / f"x{n}").mkdir()
            xvfb = start_xvfb(tmp_path / f"x{n}")
            stops.append(xvfb.stop)
            model = ScriptedModel(LOOK_AND_ANSWER)
            stops.append(model.stop)
            daemon = Daemon(xvfb.display, model.start())
            stops.append(daemon.cleanup)
            daemons.append(daemon.start())
        yield daemons
    finally:
        for stop in reversed(stops):
            stop()


def _env(sshd: Sshd) -> dict[str, str]:
    return sshd.client_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # this venv's cuctl


def _ran(daemons: list[Daemon]) -> dict[str, tuple[int, dict]]:
    """Every task of every daemon by prompt: (which daemon, the task)."""
    out: dict[str, tuple[int, dict]] = {}
    for n, daemon in enumerate(daemons):
        for task in daemon.call("list"):
            assert task["prompt"] not in out, f"{task['prompt']!r} ran twice"
            out[task["prompt"]] = (n, task)
    return out


def _one_at_a_time(tasks: list[dict]) -> bool:
    """No task was submitted to the machine before the one before it had ended (the daemon itself
    would run them one after another anyway: what counts is when fan-out handed them over)."""
    spans = sorted((t["created_at"], t["finished_at"]) for t in tasks)
    return all(end <= created for (_, end), (created, _) in zip(spans, spans[1:]))


def test_fan_out_spreads_prompts_over_hosts_one_task_per_host_at_a_time(sshd: Sshd, machines: list[Daemon],
                                                                         tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"ssh://cud-test{quote(str(d.socket))}\n" for d in machines))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS[:3] + [""] + PROMPTS[3:]) + "\n")  # a blank line is skipped
    out = tmp_path / "out"
    result = subprocess.run([str(FAN_OUT), str(hosts), str(prompts), str(out)], env=_env(sshd), capture_output=True,
                            text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    ran = _ran(machines)
    assert sorted(ran) == sorted(PROMPTS)  # each prompt once, exactly as written
    assert {n for n, _ in ran.values()} == {0, 1}  # both machines worked
    for n, daemon in enumerate(machines):
        assert _one_at_a_time([t for m, t in ran.values() if m == n])
    rows = [line.split("\t") for line in (out / "results.tsv").read_text().splitlines()]
    urls = hosts.read_text().split()
    expected = [[str(i), urls[ran[p][0]], str(ran[p][1]["id"]), "succeeded"] for i, p in enumerate(PROMPTS, 1)]
    assert rows == expected
    for i in range(1, len(PROMPTS) + 1):
        page = (out / f"task-{i}.html").read_text()
        assert "Looked twice." in page and "data:image/png;base64," in page


def test_fan_out_says_what_is_wrong(sshd: Sshd, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("\n")
    prompts = tmp_path / "prompts"
    prompts.write_text("x\n")
    for args, needle in (([], "HOSTS PROMPTS OUT"), ([str(tmp_path / "none"), str(prompts), str(tmp_path / "o")],
                                                     "cannot read"),
                         ([str(hosts), str(prompts), str(tmp_path / "o")], "lists no host")):
        result = subprocess.run([str(FAN_OUT), *args], env=_env(sshd), capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and needle in result.stderr, result


def test_parallel_sshlogin_runs_cuctl_on_each_machine(sshd: Sshd, machines: list[Daemon], tmp_path: Path) -> None:
    # Each "machine" is an ssh Host whose cuctl finds its own daemon (CUD_SOCKET, as a VM's default would).
    logins = ",".join(f"1/{sshd.add_alias(f'vm{n}', CUD_SOCKET=str(d.socket))}" for n, d in enumerate(machines))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    result = subprocess.run(["parallel", "--sshlogin", logins, "--ssh", sshd.ssh_command, "--keep-order",
                             "--tagstring", "{#}", REMOTE_CUCTL, "submit", "--wait", "{}", "::::", str(prompts)],
                            env=_env(sshd), capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{i}\tLooked twice." for i in range(1, len(PROMPTS) + 1)]
    ran = _ran(machines)
    assert sorted(ran) == sorted(PROMPTS) and {n for n, _ in ran.values()} == {0, 1}
