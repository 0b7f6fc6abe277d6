"""The sandbox's accessibility: every seat's own session bus and at-spi2-core bus, and targets that name elements.

Real parts end to end: the sandbox's dbus-daemon and at-spi-bus-launcher, its GTK
demo app, the daemon reading the bus with dbus-fast, the scripted model over the
openai SDK. Every process is stopped by the pids the sandbox recorded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import random
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.support.session_seat import SYSTEM_PYTHON, TAKEOVER
from tests.test_sandbox import VENV, Sandbox, environ, ok, procs

FIELD = {"role": "text", "name": "Line to send", "application": "cud-demo"}


def cuctl(box: Sandbox, *args: str) -> Any:
    result = subprocess.run([str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"), *args, "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def as_user(name: str, argv: list[str]) -> str:
    """``argv``'s output, run as the user ``name``."""
    entry = pwd.getpwnam(name)
    done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout


def named(node: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The first element called ``name`` in a `cuctl tree --json` subtree."""
    if node.get("name") == name and "role" in node:
        return node
    for child in node.get("children", []) + node.get("windows", []):
        found = named(child, name)
        if found is not None:
            return found
    return None


def in_session(directory: Path) -> list[str]:
    """Live processes whose session bus is one of the sandbox's (the registry, the accessibility bus's daemon...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
                continue
            env = (entry / "environ").read_bytes()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"DBUS_SESSION_BUS_ADDRESS=unix:path={directory}/".encode() in env or str(directory) + "/" in argv:
            found.append(f"{entry.name}: {argv}")
    return found


def test_two_seats_each_on_its_own_buses_with_targets_that_name_the_demo_field(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SEATS="2")
    try:
        out = ok(box.run("up.sh"))
        records = box.records()
        config = {seat["name"]: seat for seat in tomllib.loads((box.dir / "cud.toml").read_text())["seats"]}
        sessions, a11y_buses = set(), set()
        for seat in ("seat1", "seat2"):
            app = records[f"{seat}.demo-app"]
            address = records[f"{seat}.session-bus"].info["address"]
            # A socket file of the sandbox's own, not an abstract socket anyone could reach; in a directory
            # of the sandbox's, which runs the seat's session bus (sandbox/buses.py), admitting the seat's user.
            assert address == f"unix:path={box.dir}/{seat}.session/bus", address
            assert stat.S_ISSOCK((box.dir / f"{seat}.session" / "bus").stat().st_mode)
            bus = records[f"{seat}.session-bus"].pid
            assert os.stat(f"/proc/{bus}").st_uid == os.stat(box.dir / f"{seat}.session").st_uid == os.geteuid()
            if os.geteuid() == 0:  # a seat user of its own: it can neither end the bus nor listen at its address
                tried = as_user(config[seat]["user"], [SYSTEM_PYTHON, "-c", TAKEOVER, str(bus),
                                                       address.removeprefix("unix:path="), "--exit"])
                assert json.loads(tried) == {"kill": "Operation not permitted", "rename": "Permission denied",
                                             "unlink": "Permission denied", "listen": "Address already in use"}
                assert procs.state_of(records[f"{seat}.session-bus"]) == "running"
            assert config[seat]["home"] == f"{box.dir}/homes/{seat}"
            a11y = records[f"{seat}.a11y-bus"].info["address"]
            assert a11y.startswith(f"unix:path={box.dir}/{seat}.a11y/at-spi/"), a11y
            assert f"apps: DBUS_SESSION_BUS_ADDRESS={address}" in out, out  # the summary says where to join
            sessions.add(address)
            a11y_buses.add(a11y)
            assert config[seat]["session_bus"] == address  # the daemon reads the seat's own bus
            env = environ(app.pid)
            assert env["DBUS_SESSION_BUS_ADDRESS"] == address and "NO_AT_BRIDGE" not in env
            assert env["QT_ACCESSIBILITY"] == env["QT_LINUX_ACCESSIBILITY_ALWAYS_ON"] == "1"
            assert environ(records[f"{seat}.a11y-bus"].pid)["DBUS_SESSION_BUS_ADDRESS"] == address

            # The seat's bus has its own demo app, and only that one.
            tree = cuctl(box, "tree", "--seat", seat)
            assert [(a["application"], a["pid"]) for a in tree["apps"]] == [("cud-demo", app.pid)], tree["apps"]
            field = named(tree["apps"][0], FIELD["name"])
            assert field is not None and field["role"] == FIELD["role"], tree
            x, y, w, h = field["bounds"]
            seen = cuctl(box, "inspect", str(x + w // 2), str(y + h // 2), "--seat", seat)["target"]
            assert {k: seen["element"][k] for k in FIELD} == FIELD, seen
            assert seen["window"]["pid"] == app.pid and seen["window"]["title"] == "cud demo", seen
        assert len(sessions) == len(a11y_buses) == 2

        # A task's click and typing, and its approval, name the field they touch.
        ok(box.run("demo.sh"))
        task = cuctl(box, "list")[0]["id"]
        out = short_tmp / "export"
        subprocess.run([str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"), "export", str(task),
                        "-o", str(out)], check=True, capture_output=True, timeout=60)
        events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
        actions = {e["data"]["action"]["type"]: e["data"]["target"] for e in events if e["kind"] == "action"}
        assert set(actions) >= {"click", "type", "keypress"}, actions
        for kind, target in actions.items():
            assert {k: target["element"][k] for k in FIELD} == FIELD, (kind, target)
            assert target["window"]["pid"] == records["seat1.demo-app"].pid and target["note"] is None, target
        approval = next(e["data"] for e in events if e["kind"] == "approval_requested")
        assert [t["element"]["name"] for t in approval["targets"]] == [FIELD["name"]] * 2, approval

        ok(box.run("down.sh"))
        assert all(procs.state_of(record) != "running" for record in records.values())
        # Nothing of the seats' sessions is left: the launchers took their buses and the registries along.
        assert in_session(box.dir) == []
        assert not (box.dir / "seat1.session" / "bus").exists() and not (box.dir / "seat2.session" / "bus").exists()
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_a_sandbox_dir_too_long_for_the_bus_sockets_is_refused_before_anything_starts(short_tmp: Path) -> None:
    long = short_tmp / ("d" * 90)
    box = Sandbox(long)
    result = box.run("up.sh")
    assert result.returncode == 1 and "too long for the buses' sockets" in result.stdout, result.stdout
    assert repr(str(long)) in result.stdout
    assert box.records() == {} and not long.exists()


def _load_buses() -> Any:
    """sandbox/buses.py, which imports its neighbours as top-level modules (as sandboxctl.py runs them)."""
    sandbox = str(Path(__file__).resolve().parent.parent / "sandbox")
    sys.path.insert(0, sandbox)
    try:
        spec = importlib.util.spec_from_file_location("sandbox_buses", Path(sandbox) / "buses.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(sandbox)


#: Characters a directory name may hold that a D-Bus address or the bus's XML config would misread.
AWKWARD = " ,;=%&<>\"'\\:#$*?[]()~ü€✓\t"


def test_bus_addresses_of_any_directory_read_back_as_that_directory() -> None:
    from dbus_fast._private.address import parse_address  # what MessageBus(bus_address=...) parses with

    buses = _load_buses()
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for _ in range(500):
        name = "".join(rng.choice(AWKWARD + "abcXYZ019-_./") for _ in range(rng.randint(1, 40)))
        path = f"/tmp/{name}/bus"
        escaped = buses._escape(os.fsencode(path))
        assert not set(escaped) & set("<>&\"' ,;="), (seed, path, escaped)  # safe in XML, one address value
        assert parse_address(f"unix:path={escaped}") == [("unix", {"path": path})], (seed, path, escaped)


def test_a_vnc_seat_names_the_demo_field(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SANDBOX="xvnc")
    try:
        ok(box.run("up.sh"))
        records = box.records()
        config = tomllib.loads((box.dir / "cud.toml").read_text())
        # Driven over VNC, the seat names the X display it shows and its session bus.
        assert config["x_display"] == records["xserver"].info["display"] and "vnc" in config, config
        assert config["session_bus"] == records["session-bus"].info["address"]
        tree = cuctl(box, "tree")
        field = named(tree["apps"][0], FIELD["name"])
        assert field is not None, tree
        x, y, w, h = field["bounds"]
        seen = cuctl(box, "inspect", str(x + w // 2), str(y + h // 2))["target"]
        assert {k: seen["element"][k] for k in FIELD} == FIELD, seen
        assert seen["window"]["pid"] == records["demo-app"].pid, seen
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_a_sandbox_dir_the_launcher_cannot_name_is_refused_naming_its_characters(short_tmp: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for _ in range(8):
        bad = "".join(rng.sample(AWKWARD, rng.randint(1, 3)))
        place = short_tmp / f"sb{bad}x"
        result = Sandbox(place).run("up.sh")
        assert result.returncode == 1 and "at-spi-bus-launcher cannot put such a path" in result.stdout, (seed, bad)
        assert repr(str(place)) in result.stdout and repr("".join(sorted(set(bad)))) in result.stdout, (
            seed, bad, result.stdout)
        assert not place.exists(), (seed, bad)
