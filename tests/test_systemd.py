"""The systemd side, as written: units verified and rated by systemd-analyze, the example
config, install.sh, and sysusers/tmpfiles applied to a private root. The units' own command
lines run for real and the daemon's sd_notify messages are in test_systemd_run.py.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.daemon import ROOT
from tests.support.units import SYSTEMD, run_install, unit_env, unit_settings

UNITS = ("cud.service", "xvfb@.service", "x11vnc@.service", "xvnc@.service", "cud-bus@.service",
         "cud-session@.service", "cud-fleet.service")
#: The sandboxing keys of cud.service that cud-fleet.service differs from, each for a reason its comments give
#: ("Not KEY" there): Ray reads /proc's system files, sets its workers' priority, and wants more descriptors.
FLEET_DEVIATIONS = {"ProcSubset": "Not ProcSubset=pid", "SystemCallFilter": "Not ~@resources",
                    "LimitNOFILE": "LimitNOFILE= above"}
#: What a unit's sandbox is made of (cud.service's own lines of these, and the fleet unit's, are compared).
HARDENING = re.compile(r"(Private|Protect|Restrict|NoNewPrivileges|Capability|AmbientCapabilities|LockPersonality"
                       r"|MemoryDenyWriteExecute|RemoveIPC|KeyringMode|DevicePolicy|SystemCall|UMask|LimitNOFILE)")

needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze missing: apt-get install systemd"
)


def analyze_verify(path: Path) -> subprocess.CompletedProcess[str]:
    argv = ["systemd-analyze", "verify", "--man=no", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def exposure(unit: Path) -> float:
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True, text=True, timeout=60,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, f"no exposure figure in:\n{result.stdout}\n{result.stderr}"
    return float(match.group(1))


# -- the unit files as written ------------------------------------------------------------------
def test_cud_service_is_a_watched_notify_service_with_its_own_user() -> None:
    s = unit_settings(SYSTEMD / "cud.service")
    assert s["Type"] == ["notify"]
    assert s["Restart"] == ["on-failure"]
    assert s["WatchdogSec"] and s["WatchdogSec"][0] not in ("0", "infinity")
    assert s["User"] == ["cud"] and s["Group"] == ["cud"]
    assert s["StateDirectory"] == ["cud"] and s["RuntimeDirectory"] == ["cud"]
    assert any(c.startswith("openai-api-key:") for c in s["LoadCredential"])
    # The key only ever as a credential: no Environment= line may carry it.
    for line in s.get("Environment", []) + s.get("EnvironmentFile", []):
        assert not re.search(r"KEY|TOKEN|SECRET", line, re.I), line
    sysusers = (SYSTEMD / "cud.sysusers.conf").read_text()
    assert re.search(r"^u cud\s", sysusers, re.M) and re.search(r"^m cud cud-display$", sysusers, re.M)


def test_the_fleet_unit_is_sandboxed_like_cud_service_but_for_what_ray_needs() -> None:
    cud, fleet = unit_settings(SYSTEMD / "cud.service"), unit_settings(SYSTEMD / "cud-fleet.service")
    comments = (SYSTEMD / "cud-fleet.service").read_text()
    for key in sorted(k for k in cud if HARDENING.match(k)):
        if key in FLEET_DEVIATIONS:
            assert fleet.get(key) != cud[key] and FLEET_DEVIATIONS[key] in comments, key
        else:
            assert fleet.get(key) == cud[key], f"cud-fleet.service {key}={fleet.get(key)}, cud.service {cud[key]}"
    assert fleet["SystemCallFilter"] == ["@system-service", "~@privileged"]
    # Ray writes exactly its session directory in a private /tmp (the agent its pid file in RuntimeDirectory=),
    # and nothing else.
    assert fleet["PrivateTmp"] == ["yes"] and fleet["ProtectSystem"] == ["strict"]
    assert not {"ReadWritePaths", "StateDirectory", "BindPaths", "BindReadOnlyPaths"} & set(fleet)
    # Ray's TCP, to private networks only; and it never reports its usage anywhere.
    assert fleet["IPAddressDeny"] == ["any"]
    allowed = fleet["IPAddressAllow"][0].split()
    assert "localhost" in allowed and "0.0.0.0/0" not in allowed and "::/0" not in allowed
    assert unit_env(fleet)["RAY_USAGE_STATS_ENABLED"] == "0"
    # Ray's token authentication, the token only as a credential (its path in the environment, never it).
    assert unit_env(fleet)["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in unit_env(fleet)
    assert "ray-auth-token:/etc/cud/ray-auth-token" in fleet["LoadCredential"]
    assert unit_env(fleet)["RAY_AUTH_TOKEN_PATH"] == "%d/ray-auth-token"
    assert "PrivateUsers" not in fleet and "PrivateNetwork" not in fleet  # SO_PEERCRED; the pool is on the network


def test_the_fleet_unit_joins_after_cud_and_drains_on_stop_as_its_own_user() -> None:
    cud, fleet = unit_settings(SYSTEMD / "cud.service"), unit_settings(SYSTEMD / "cud-fleet.service")
    assert "cud.service" in fleet["Requires"] and "cud.service" in " ".join(fleet["After"]).split()
    # The daemon's config (its [fleet] table) and the daemon's socket, as cud.service names them, through a
    # link in the unit's own runtime directory: the agent writes its pid file beside the path it is given, and
    # /run/cud is the daemon's (RuntimeDirectory= is the one place there this unit may write).
    run = cud["ExecStart"][0].split()
    config, socket = run[run.index("--config") + 1], run[run.index("--socket") + 1]
    assert fleet["RuntimeDirectory"] == ["cud-fleet"] and fleet["RuntimeDirectoryMode"] == ["0700"]
    link = "/run/cud-fleet/" + socket.rsplit("/", 1)[1]
    assert fleet["ExecStartPre"] == [f"/bin/ln -sfn {socket} {link}"]
    assert fleet["ExecStart"] == [f"/usr/local/bin/cud fleet join --config {config} --socket {link}"]
    assert fleet["ExecStop"] == [f"/usr/local/bin/cud fleet leave --socket {link}"]
    assert fleet["Restart"] == ["on-failure"] and fleet["WantedBy"] == ["multi-user.target"]
    # Not the daemon's own user (who may do everything): a user of its own, in group cud to reach /run/cud.
    assert fleet["User"] == ["cud-fleet"] and fleet["Group"] == ["cud-fleet"] and fleet["SupplementaryGroups"] == ["cud"]
    assert cud["RuntimeDirectory"] == ["cud"] and cud["RuntimeDirectoryMode"] == ["0750"] and cud["Group"] == ["cud"]
    sysusers = (SYSTEMD / "cud.sysusers.conf").read_text()
    assert re.search(r"^u cud-fleet\s", sysusers, re.M) and re.search(r"^m cud-fleet cud$", sysusers, re.M)
    assert not re.search(r"^m cud-fleet cud-display$", sysusers, re.M)  # the daemon drives the displays, not Ray


@needs_analyze
def test_cud_fleet_service_exposure_is_at_most_2() -> None:
    figure = exposure(SYSTEMD / "cud-fleet.service")
    assert figure <= 2.0, f"cud-fleet.service: exposure {figure}"


def test_x_server_units_keep_their_abstract_socket_in_the_hosts_network_namespace() -> None:
    # libxcb clients try @/tmp/.X11-unix/XN before the file. A server in a private network
    # namespace leaves that name free in the host's, for any local user to bind and show
    # cud a fake screen (seen for real: a container's clients reached another server).
    for unit in ("xvfb@.service", "xvnc@.service"):
        settings = unit_settings(SYSTEMD / unit)
        assert settings.get("PrivateNetwork", ["no"]) == ["no"], unit
        assert "-nolisten local" not in settings["ExecStart"][0], unit


def test_display_units_use_one_environment_line_per_setting() -> None:
    for unit in ("xvfb@.service", "x11vnc@.service", "xvnc@.service", "cud-bus@.service"):
        for line in unit_settings(SYSTEMD / unit).get("Environment", []):
            # One NAME=value per line: systemd would accept several, people misread them.
            assert re.fullmatch(r"[A-Z0-9_]+=\S*", line), f"{unit}: {line}"


@needs_analyze
def test_cud_service_exposure_is_at_most_2() -> None:
    figure = exposure(SYSTEMD / "cud.service")
    assert figure <= 2.0, f"cud.service: exposure {figure}"


def test_example_config_loads_with_the_daemons_own_parser() -> None:
    from cud.daemon.config import load_config

    config = load_config(SYSTEMD / "cud.toml.example", env={"CUD_SOCKET": "/run/cud/cud.sock"})
    assert config.seats[0].display == ":0" and config.api_key_credential == "openai-api-key"
    # cud-bus@0's session bus, where the unit puts it.
    bus = unit_settings(SYSTEMD / "cud-bus@.service")
    assert config.seats[0].session_bus == "unix:path=/run/cud-bus/0/bus"
    assert "--address=unix:path=/run/cud-bus/%i/bus" in bus["ExecStart"][0].split()
    assert bus["RuntimeDirectory"] == ["cud-bus/%i"]
    assert [seat.name for seat in config.seats] == ["default"]  # a lone display is the seat "default"


def three_seat_example(tmp_path: Path) -> Path:
    """The example config made three seats as its comments say: no `display`, the [[seats]] tables uncommented."""
    text = (SYSTEMD / "cud.toml.example").read_text()
    head, marker, tail = text.partition("# -- Several seats")
    assert marker, "the example lost its several-seats section"
    for line in ('display = ":0"', 'session_bus = "unix:path=/run/cud-bus/0/bus"'):  # as its comment says
        assert head.count(f"\n{line}\n") == 1, line
        head = head.replace(f"\n{line}\n", "\n")
    # The tables are the commented lines that are TOML: "# [[seats]]" and "# key = value".
    lines = [re.sub(r"^# (\[\[seats\]\]|\w+ = .*)$", r"\1", line) for line in tail.splitlines()]
    path = tmp_path / "cud.toml"
    path.write_text(head + marker + "\n".join(lines) + "\n")
    return path


def test_example_config_with_its_three_seats_uncommented_loads(tmp_path: Path) -> None:
    import tomllib

    from cud.daemon.config import load_config

    path = three_seat_example(tmp_path)
    raw = tomllib.loads(path.read_text())
    # The displays of docs/systemd.md's three-seat machine (xvfb@1, xvfb@2, xvfb@3); every other
    # key still top-level, not swallowed by a seat table.
    assert raw["seats"] == [{"name": f"seat{k}", "display": f":{k}", "session_bus": f"unix:path=/run/cud-bus/{k}/bus"}
                            for k in (1, 2, 3)]
    assert "display" not in raw and raw["model"] == "gpt-5.4" and raw["access"]["submit_users"] == []
    config = load_config(path, env={"CUD_SOCKET": "/run/cud/cud.sock"})
    assert [(seat.name, seat.display) for seat in config.seats] == [("seat1", ":1"), ("seat2", ":2"), ("seat3", ":3")]
    assert [seat.session_bus for seat in config.seats] == [f"unix:path=/run/cud-bus/{k}/bus" for k in (1, 2, 3)]
    assert config.api_key_credential == "openai-api-key" and config.max_steps == 50


def _data_files() -> list[Path]:
    """The files the code reads with importlib.resources: the console's page, the scripted model's scenarios."""
    files = [path for folder in ("console/static", "scripted/scenarios") for path in (ROOT / "cud" / folder).iterdir()
             if path.is_file()]
    assert len(files) >= 4, files
    return files


def test_the_wheel_builds_without_a_warning_and_carries_the_data_files(tmp_path: Path) -> None:
    # pip -v shows what the build backend said: setuptools warned that console/static and
    # scripted/scenarios were "absent from the `packages` configuration" (installed as data by luck).
    # Built from a copy: pip builds in the source tree, and would leave build/ there.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "cud", "daemon", "drivers"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--disable-pip-version-check",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    said = built.stdout + built.stderr
    assert "Warning" not in said and "absent from the `packages`" not in said, said
    (wheel,) = (tmp_path / "dist").glob("cud-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    wanted = {f"cud/{path.relative_to(ROOT / 'cud')}" for path in _data_files()}
    assert wanted <= names, sorted(wanted - names)


def test_install_into_a_prefix_gives_working_commands_and_rewritten_units(prefix_install: Path) -> None:
    prefix = prefix_install
    etc = prefix.parent / "etc"
    # Every module of the tree made it into the venv (setuptools installs only listed packages).
    site = next((prefix / "lib/cud/venv/lib").glob("python3*/site-packages")) / "cud"
    tree = {"cud": ROOT / "cud", "cud/daemon": ROOT / "daemon", "cud/drivers": ROOT / "drivers"}
    wanted = {f"{dest}/{path.relative_to(src)}" for dest, src in tree.items() for path in src.rglob("*.py")
              if "__pycache__" not in path.parts}
    installed = {f"cud/{path.relative_to(site)}" for path in site.rglob("*.py")}
    assert wanted <= installed, f"not installed (pyproject packages?): {sorted(wanted - installed)}"
    # ...and every data file the code reads with importlib.resources.
    data = {f"cud/{path.relative_to(ROOT / 'cud')}" for path in _data_files()}
    assert data <= {f"cud/{path.relative_to(site)}" for path in site.rglob("*")}, data
    assert subprocess.run([prefix / "bin" / "cud", "--help"], capture_output=True).returncode == 0
    assert subprocess.run([prefix / "bin" / "cuctl", "--help"], capture_output=True).returncode == 0
    unit = (prefix / "lib/systemd/system/cud.service").read_text()
    assert f"ExecStart={prefix}/bin/cud run --config {etc}/cud/cud.toml" in unit
    assert "/usr/local" not in unit
    fleet = (prefix / "lib/systemd/system/cud-fleet.service").read_text()
    assert f"ExecStart={prefix}/bin/cud fleet join --config {etc}/cud/cud.toml" in fleet
    assert f"ExecStop={prefix}/bin/cud fleet leave" in fleet and "/usr/local" not in fleet
    assert (etc / "cud" / "cud.toml").read_text() == (SYSTEMD / "cud.toml.example").read_text()
    assert (prefix / "lib/sysusers.d/cud.conf").exists() and (prefix / "lib/tmpfiles.d/cud.conf").exists()
    assert os.access(prefix / "lib/cud/cud-xauth", os.X_OK)


@needs_analyze
@pytest.mark.parametrize("unit", UNITS)
def test_systemd_analyze_verify_accepts_every_installed_unit(prefix_install: Path, unit: str, tmp_path: Path) -> None:
    # Verified where install.sh put it: there the Exec binaries exist (systemd-analyze
    # checks that), where the source tree's /usr/local paths would not.
    path = prefix_install / "lib/systemd/system" / unit
    result = analyze_verify(path)
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), (
        f"{unit}: rc {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    if unit in ("cud.service", "cud-fleet.service"):
        assert exposure(path) <= 2.0
    if unit == "cud-session@.service":  # rated as an instance: what runs in it is the seat's user's
        instance = tmp_path / "cud-session@1.service"
        shutil.copy(path, instance)
        assert exposure(instance) <= 1.0


def docs_systemd_block(language: str) -> str:
    """docs/systemd.md's first fenced block in ``language`` (the three-seat machine's)."""
    text = (ROOT / "docs" / "systemd.md").read_text()
    match = re.search(rf"```{language}\n(.*?)```", text, re.S)
    assert match, f"no {language} block in docs/systemd.md"
    return match.group(1)


def test_the_documented_three_seats_are_the_example_configs(tmp_path: Path) -> None:
    import tomllib

    documented = tomllib.loads(docs_systemd_block("toml"))["seats"]
    assert documented == tomllib.loads(three_seat_example(tmp_path).read_text())["seats"]
    # ... and the drop-in orders cud after exactly those displays.
    numbers = [seat["display"].lstrip(":") for seat in documented]
    drop_in = docs_systemd_block("ini")
    for key in ("Wants", "After"):
        for unit in ("xvfb", "cud-bus"):
            assert f"{key}=" + " ".join(f"{unit}@{n}.service" for n in numbers) in drop_in.splitlines()
    assert [seat["session_bus"] for seat in documented] == [f"unix:path=/run/cud-bus/{n}/bus" for n in numbers]


def test_units_and_cud_agree_on_the_shared_cookie_file() -> None:
    xauthority = unit_env(unit_settings(SYSTEMD / "cud.service"))["XAUTHORITY"]
    assert xauthority == "/run/cud-display/Xauthority"
    for unit in ("xvfb@.service", "xvnc@.service"):
        s = unit_settings(SYSTEMD / unit)
        assert any(line.split()[-1] == xauthority and " share " in line for line in s["ExecStartPre"]), unit
        assert any(line.split()[-1] == xauthority and " unshare %i " in line for line in s["ExecStopPost"]), unit
        assert "/run/cud-display" in " ".join(s["ReadWritePaths"]).split(), unit
    tmpfiles = (SYSTEMD / "cud.tmpfiles.conf").read_text()
    assert re.search(r"^d /run/cud-display 0755 cud-display cud-display -$", tmpfiles, re.M)


def test_a_seats_user_is_told_to_join_no_group_that_reads_every_displays_cookie() -> None:
    """The group cud-display reads /run/cud-display/Xauthority (every display's cookie): a seat's user made
    as the unit and docs say is not in it, and cud-bus@N admits seat N's user by name instead."""
    made = [(SYSTEMD / "cud-session@.service").read_text(), (ROOT / "docs" / "sessions.md").read_text()]
    for text in made:
        commands = re.findall(r"useradd .*?cud-seat-N", text, re.S)  # the command, over its lines
        assert commands and not any("cud-display" in command for command in commands), commands
    assert not re.search(r"^m cud-seat", (SYSTEMD / "cud.sysusers.conf").read_text(), re.M)
    bus = unit_settings(SYSTEMD / "cud-bus@.service")
    rendered = [line for line in bus["ExecStartPre"] if "@SEAT_USER@/cud-seat-%i/" in line]
    assert len(rendered) == 2 and "--config-file=/run/cud-bus/%i/session-bus.conf" in bus["ExecStart"][0]
    default = "/usr/share/defaults/at-spi2/accessibility.conf"  # at-spi2-core's: there wherever the launcher is
    assert f"-/run/cud-bus/%i/accessibility.conf:{default}" in bus["BindReadOnlyPaths"]
    assert bus["InaccessiblePaths"] == ["-/etc/at-spi2"]  # where the launcher looks first, often missing
    # A bind over a path that may be missing would make it, empty, on the host: every launcher there then fails.
    assert not any(":/etc/" in line for line in bus["BindReadOnlyPaths"]), bus["BindReadOnlyPaths"]


@needs_analyze
def test_systemd_analyze_verify_accepts_cud_with_the_documented_three_seat_drop_in(
    prefix_install: Path, tmp_path: Path
) -> None:
    units = tmp_path / "units"
    shutil.copytree(prefix_install / "lib/systemd/system", units)
    (units / "cud.service.d").mkdir()
    drop_in = units / "cud.service.d" / "override.conf"
    drop_in.write_text(docs_systemd_block("ini"))
    result = analyze_verify(units / "cud.service")
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), (
        f"rc {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    assert exposure(units / "cud.service") <= 2.0
    # The control: verify does read the drop-in (a misspelt key in it is reported).
    drop_in.write_text(docs_systemd_block("ini").replace("After=", "Aftr="))
    assert "Aftr" in analyze_verify(units / "cud.service").stderr


@needs_analyze
def test_systemd_analyze_verify_accepts_the_fleet_workers_drop_in_and_the_fleet_unit_beside_it(
    prefix_install: Path, tmp_path: Path
) -> None:
    # examples/fleet/cluster.yaml installs seats.conf as cud.service's drop-in on every worker.
    units = tmp_path / "units"
    shutil.copytree(prefix_install / "lib/systemd/system", units)
    (units / "cud.service.d").mkdir()
    shutil.copy(ROOT / "examples" / "fleet" / "seats.conf", units / "cud.service.d" / "seats.conf")
    for unit in ("cud.service", "cud-fleet.service"):
        result = analyze_verify(units / unit)
        assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), (
            f"{unit}: rc {result.returncode}\n{result.stdout}\n{result.stderr}")


@needs_analyze
def test_systemd_analyze_verify_catches_a_missing_binary(prefix_install: Path, tmp_path: Path) -> None:
    # The check above must be able to fail: the same unit naming a binary that is not there.
    broken = tmp_path / "cud.service"
    unit = (prefix_install / "lib/systemd/system/cud.service").read_text()
    broken.write_text(unit.replace("/bin/cud run", "/bin/nope run"))
    result = analyze_verify(broken)
    assert result.returncode != 0 and "nope" in result.stderr


def test_install_with_destdir_writes_only_there_and_names_final_paths(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    # --no-deps: the relocation is what is tested here; the full install is covered above.
    result = run_install(str(dest), "/usr/local", tmp_path, PYTHON=sys.executable, PIP_ARGS="--no-deps")
    assert "systemd-sysusers" in result.stdout  # told what is left to do on the target
    venv = dest / "usr/local/lib/cud/venv"
    # The venv runs from DESTDIR (its python finds its site-packages relative to itself) ...
    ran = subprocess.run([venv / "bin/python", dest / "usr/local/bin/cud", "--help"], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    # ... while every script and unit names the final location, never DESTDIR.
    for path in [*venv.joinpath("bin").iterdir(), *dest.joinpath("usr/local/lib/systemd/system").iterdir(),
                 venv / "pyvenv.cfg"]:
        if path.is_file() and not path.is_symlink():
            assert str(dest) not in path.read_text(errors="replace"), path
    assert (venv / "bin/cud").read_text().startswith("#!/usr/local/lib/cud/venv/bin/python")
    assert os.readlink(dest / "usr/local/bin/cud") == "../lib/cud/venv/bin/cud"
    assert (dest / "etc/cud/cud.toml").exists()
    rule = dest / "etc/polkit-1/rules.d/50-cud-session.rules"
    assert rule.read_text() == (SYSTEMD / "cud-session.rules").read_text()
    assert sorted(p.name for p in dest.iterdir()) == ["etc", "usr"]
    # The pages the units' Documentation= names are installed where they say, beside the README.
    for unit in dest.joinpath("usr/local/lib/systemd/system").iterdir():
        for line in unit.read_text().splitlines():
            if line.startswith("Documentation="):
                for uri in line.removeprefix("Documentation=").split():
                    assert (dest / uri.removeprefix("file:///")).is_file(), f"{unit.name}: {uri}"
    assert (dest / "usr/local/share/doc/cud/docs/console-example.png").is_file()  # README's picture


def test_install_refuses_extras_that_are_not_a_list_of_names(tmp_path: Path) -> None:
    # EXTRAS becomes part of pip's requirement ("SRC[fleet]"): anything but names and commas is refused
    # before anything is written, naming the value.
    for bad in ("fleet]; rm -rf x", "fleet test", "../x"):
        result = subprocess.run([str(SYSTEMD / "install.sh"), str(tmp_path / "dest"), "/usr/local"],
                                env={**os.environ, "EXTRAS": bad}, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and f"got '{bad}'" in result.stderr, result
        assert not (tmp_path / "dest").exists()


def test_install_keeps_an_existing_config(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    (dest / "etc/cud").mkdir(parents=True)
    (dest / "etc/cud/cud.toml").write_text('display = ":7"\n')
    # --no-deps keeps this install cheap: the full one is covered above.
    result = run_install(str(dest), "/usr/local", tmp_path, PYTHON=sys.executable, PIP_ARGS="--no-deps")
    assert "kept the existing /etc/cud/cud.toml" in result.stdout
    assert (dest / "etc/cud/cud.toml").read_text() == 'display = ":7"\n'
    assert (dest / "usr/local/share/doc/cud/cud.toml.example").exists()


def test_sysusers_and_tmpfiles_apply_to_a_private_root(prefix_install: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    for sub in ("etc", "var/lib", "usr/lib/sysusers.d", "usr/lib/tmpfiles.d"):
        (root / sub).mkdir(parents=True)
    shutil.copy(prefix_install / "lib/sysusers.d/cud.conf", root / "usr/lib/sysusers.d/cud.conf")
    shutil.copy(prefix_install / "lib/tmpfiles.d/cud.conf", root / "usr/lib/tmpfiles.d/cud.conf")
    for tool in (["systemd-sysusers"], ["systemd-tmpfiles", "--create"]):
        result = subprocess.run([*tool, f"--root={root}"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{tool}: {result.stderr}"
    users = {line.split(":")[0]: line.split(":") for line in (root / "etc/passwd").read_text().splitlines()}
    groups = {line.split(":")[0]: line.split(":") for line in (root / "etc/group").read_text().splitlines()}
    assert "cud" in users and "cud-display" in users
    assert users["cud"][6] == "/usr/sbin/nologin"
    assert groups["cud-display"][3] == "cud"  # the daemon reads the display cookies through the group
    assert users["cud-fleet"][6] == "/usr/sbin/nologin" and groups["cud"][3] == "cud-fleet"  # reaches /run/cud
    state = (root / "var/lib/cud").stat()
    assert stat.S_IMODE(state.st_mode) == 0o700 and state.st_uid == int(users["cud"][2])
    # The display units write the shared cookie file /run/cud-display/Xauthority there.
    displays = (root / "run/cud-display").stat()
    assert stat.S_IMODE(displays.st_mode) == 0o755 and displays.st_uid == int(users["cud-display"][2])
