"""Metrics: `cuctl metrics` and the textfile, parsed back with prometheus_client's own parser."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import cud
from cud.daemon.config import load_config
from cud.errors import ConfigError
from cud.scripted import ScriptedModel
from tests.support.daemon import ROOT, Daemon, cuctl, scenario
from tests.support.recorder import wait_until
from tests.support.xserver import start_xvfb

CHECK = {"code": "confirm", "message": "Type into the form?"}
ASKING = scenario({"safety_checks": [CHECK], "actions": [{"type": "type", "text": "ok"}]}, {"message": "typed"})

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample by (name, sorted labels); the parser raises on anything malformed."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def scrape(daemon: Daemon) -> Samples:
    result = cuctl(daemon.socket, "metrics")
    assert result.returncode == 0, result.stderr
    return parse(result.stdout)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def step_events(daemon: Daemon, task_id: int) -> list[dict[str, Any]]:
    return [e for e in daemon.events_now(task_id) if e["kind"] == "step"]


def test_counts_match_the_tasks_that_ran_and_survive_a_restart(start_daemon: Any) -> None:
    daemon: Daemon = start_daemon(ASKING)
    ids = [daemon.call("submit", prompt=f"task {n}")["id"] for n in range(3)]
    # The first task waits for its approval; the other two queue behind it (one seat).
    daemon.wait_approval(ids[0])
    now = scrape(daemon)
    assert value(now, "cud_approvals_pending") == 1
    assert value(now, "cud_tasks_current", state="awaiting_approval") == 1
    assert value(now, "cud_tasks_current", state="queued") == 2
    assert value(now, "cud_queue_depth", seat="*") == 2  # unpinned work
    assert value(now, "cud_queue_depth", seat="default") == 0
    assert value(now, "cud_seat_up", seat="default") == 1
    assert value(now, "cud_build_info", version=cud.__version__) == 1
    assert value(now, "cud_tasks_total", state="succeeded") == 0
    daemon.call("approve", id=daemon.wait_approval(ids[0])["id"])
    daemon.call("approve", id=daemon.wait_approval(ids[1])["id"])
    daemon.call("deny", id=daemon.wait_approval(ids[2])["id"], reason="not this one")
    daemon.wait_state(ids[0], "succeeded")
    daemon.wait_state(ids[1], "succeeded")
    daemon.wait_state(ids[2], "failed")
    after = scrape(daemon)
    assert value(after, "cud_tasks_total", state="succeeded") == 2
    assert value(after, "cud_tasks_total", state="failed") == 1
    assert value(after, "cud_tasks_total", state="cancelled") == 0
    # By outcome (cud.outcome): a denied approval is the task's own failure, not cud's error.
    assert [value(after, "cud_task_outcomes_total", outcome=o) for o in ("passed", "failed", "error")] == [2, 1, 0]
    assert value(after, "cud_approvals_pending") == 0
    assert value(after, "cud_queue_depth", seat="*") == 0
    # One observation per step the store recorded, for each part of a step.
    steps = sum(len(step_events(daemon, i)) for i in ids)
    assert steps >= 3
    for part in ("model", "driver", "daemon"):
        assert value(after, "cud_step_duration_seconds_count", part=part) == steps
        assert value(after, "cud_step_duration_seconds_bucket", part=part, le="+Inf") == steps
    assert value(after, "cud_approval_wait_seconds_count") == 3
    # What was sent to the model, as the tasks' own usage counts it.
    usages = [daemon.task(i)["usage"] for i in ids]
    asked = sum(1 for i in ids for e in step_events(daemon, i) if e["data"]["requests"])
    assert value(after, "cud_model_request_bytes_count") == asked
    assert value(after, "cud_model_request_bytes_sum") == sum(u["request_bytes"] for u in usages)
    assert value(after, "cud_model_images_total") == sum(u["images"] for u in usages)
    for kind in ("input", "cached", "output"):
        assert value(after, "cud_model_tokens_total", kind=kind) == sum(u[f"{kind}_tokens"] for u in usages)
    assert value(after, "cud_model_tokens_total", kind="input") > 0
    # No prompt or task id in any label.
    assert not any(dict(labels).keys() - {"state", "part", "seat", "le", "version", "kind", "verdict", "result",
                                                "outcome"}
                   for _name, labels in after)
    # A restart keeps the counts (they come from the database); the histograms start again.
    daemon.stop()
    daemon.start()
    again = scrape(daemon)
    assert value(again, "cud_tasks_total", state="succeeded") == 2
    assert value(again, "cud_tasks_total", state="failed") == 1
    assert value(again, "cud_step_duration_seconds_count", part="model") == 0


def test_a_task_failed_by_the_model_api_counts_as_failed(start_daemon: Any) -> None:
    daemon: Daemon = start_daemon(scenario({"http_error": 400}))
    task_id = daemon.call("submit", prompt="fail")["id"]
    daemon.wait_state(task_id, "failed")
    samples = scrape(daemon)
    assert value(samples, "cud_tasks_total", state="failed") == 1
    assert value(samples, "cud_tasks_total", state="succeeded") == 0
    # --json prints the same text: it is machine-readable already.
    assert parse(cuctl(daemon.socket, "metrics", "--json").stdout) == samples


def test_a_seat_whose_display_stopped_is_down(short_tmp: Path) -> None:
    (short_tmp / "a").mkdir()
    (short_tmp / "b").mkdir()
    alive, gone = start_xvfb(short_tmp / "a"), start_xvfb(short_tmp / "b")
    model = ScriptedModel(scenario({"message": "done"}))
    daemon = Daemon("", model.start(), workdir=short_tmp, seats={"a": alive.display, "b": gone.display})
    try:
        daemon.start()
        assert value(scrape(daemon), "cud_seat_up", seat="b") == 1
        gone.stop(keep_number=True)  # no other X server takes the number while the daemon watches it
        wait_until(lambda: value(scrape(daemon), "cud_seat_up", seat="b") == 0, 60, "seat b to be down")
        samples = scrape(daemon)
        assert value(samples, "cud_seat_up", seat="a") == 1
        daemon.call("submit", prompt="on b", seat="b")
        assert value(scrape(daemon), "cud_queue_depth", seat="b") == 1
    finally:
        daemon.stop()
        model.stop()
        alive.stop()
        gone.stop()


def test_the_textfile_is_rewritten_atomically(short_tmp: Path, start_daemon: Any) -> None:
    # short_tmp first: set up before the daemon, removed after it stops (a live daemon rewrites the file every 10 ms).
    path = short_tmp / "cud.prom"
    daemon: Daemon = start_daemon(scenario({"message": "done"}),
                                  config=f'[metrics]\ntextfile = "{path}"\ninterval = 0.01\n')
    wait_until(path.exists, 30, "the first textfile")
    assert (path.stat().st_mode & 0o777) == 0o644  # node_exporter runs as another user
    reads: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        # Every read must be one whole exposition: either the old file or the new one.
        while not stop.is_set():
            try:
                text = path.read_text()
                parse(text)
                assert text.endswith("\n") and "cud_build_info" in text and "cud_seat_up" in text
                reads.append(text)
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(3):
            daemon.wait_state(daemon.call("submit", prompt=f"t{n}")["id"], "succeeded")
        wait_until(lambda: 'cud_tasks_total{state="succeeded"} 3.0' in path.read_text(), 30, "the file to show 3")
    finally:
        stop.set()
        thread.join()
    assert not errors, errors[0]
    assert len(reads) > 10 and len(set(reads)) > 1  # it was read many times and did change


def test_a_refused_peer_cannot_read_the_metrics(start_daemon: Any) -> None:
    daemon: Daemon = start_daemon(scenario({"message": "done"}))
    os.chmod(daemon.dir, 0o711)
    os.chmod(daemon.socket, 0o666)  # only the daemon's own check stands in the way
    nobody = pwd.getpwnam("nobody")
    setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    result = cuctl(daemon.socket, "metrics", prefix=setpriv)
    assert result.returncode == 2 and "may not use this daemon" in result.stderr
    assert "cud_" not in result.stdout


@pytest.mark.parametrize(("table", "message"), [
    ('[metrics]\ntextfile = ""\n', "config key 'metrics.textfile' must be a non-empty string, got ''"),
    ('[metrics]\ntextfile = "/no/such/dir/cud.prom"\n',
     "config key 'metrics.textfile' must be a file in an existing directory, got '/no/such/dir/cud.prom'"),
    ('[metrics]\ntextfile = "/tmp"\n', "config key 'metrics.textfile' must be a file, not a directory, got '/tmp'"),
    ('[metrics]\ninterval = 0\n', "config key 'metrics.interval' must be a positive finite number, got 0"),
    ('[metrics]\ninterval = 7200\n', "config key 'metrics.interval' must be a number of seconds from 0.01 to 3600"),
    ('[metrics]\ninterval = "15"\n', "config key 'metrics.interval' must be a number, got '15'"),
    ('[metrics]\nport = 9100\n', "unknown config key 'metrics.port'; known: interval, textfile"),
    ('metrics = "x"\n', "config key 'metrics' must be a table, got 'x'"),
])
def test_bad_metrics_config_is_named(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "cud.toml"
    path.write_text(table)
    with pytest.raises(ConfigError) as info:
        load_config(path, {"socket": "/tmp/s", "state_dir": str(tmp_path), "display": ":0"})
    assert message in info.value.message


def test_the_flag_sets_the_textfile_and_is_checked_like_the_key(tmp_path: Path) -> None:
    config = load_config(None, {"socket": "/tmp/s", "state_dir": str(tmp_path), "display": ":0",
                                "metrics_textfile": str(tmp_path / "m.prom")})
    assert config.metrics.textfile == tmp_path / "m.prom" and config.metrics.interval == 15
    assert load_config(None, {"socket": "/tmp/s", "state_dir": str(tmp_path), "display": ":0"}).metrics.textfile \
        is None
    result = subprocess.run(
        [sys.executable, "-m", "cud.daemon.main", "run", "--socket", str(tmp_path / "s"), "--display", ":0",
         "--state-dir", str(tmp_path), "--metrics-textfile", "/no/such/dir/m.prom"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x"}, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "config key 'metrics.textfile' must be a file in an existing directory, got '/no/such/dir/m.prom'" \
        in result.stderr
