"""What the systemd tests share: the unit files read as systemd reads them, and install.sh run for real."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import ROOT

SYSTEMD = ROOT / "systemd"

__all__ = ("SYSTEMD", "prefix_install", "run_install", "unit_command", "unit_env", "unit_settings")


def unit_settings(path: Path) -> dict[str, list[str]]:
    """Every Key=value of a unit file, in order (keys may repeat)."""
    settings: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def unit_command(line: str, env: dict[str, str], replace: dict[str, str]) -> list[str]:
    """An Exec line as systemd would run it: ${X} substituted, a bare $X split into words."""
    for old, new in replace.items():
        line = line.replace(old, new)
    words: list[str] = []
    for word in shlex.split(line):
        bare = re.fullmatch(r"\$(\w+)", word)
        if bare:
            words += env.get(bare.group(1), "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word))
    return words


def unit_env(settings: dict[str, list[str]]) -> dict[str, str]:
    return dict(value.split("=", 1) for value in settings.get("Environment", []))


def run_install(destdir: str, prefix: Path | str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(SYSTEMD / "install.sh"), destdir, str(prefix)],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=600, cwd=tmp,
    )
    assert result.returncode == 0, f"install.sh failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def prefix_install() -> Iterator[Path]:
    """cud installed for real under a private prefix (and a private sysconfdir), venv included.

    World-readable like /usr, so the display units can run from it as an unprivileged user.
    Once per run: the unit files' tests and the tests that run their command lines share it.
    """
    tmp = Path(tempfile.mkdtemp(prefix="cud-prefix-", dir="/tmp"))
    try:
        tmp.chmod(0o755)
        prefix = tmp / "usr"
        run_install("", prefix, tmp, SYSCONFDIR=str(tmp / "etc"), PYTHON=sys.executable)
        yield prefix
    finally:  # a failed install too
        shutil.rmtree(tmp, ignore_errors=True)
