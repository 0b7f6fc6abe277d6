"""Fixtures shared by every test: a private Xvfb and a window that records input."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.recorder import Recorder
from tests.support.xserver import XServer, start_xvfb

# The real daemon (start_daemon), the tests' own sshd (sshd) and cud installed under a private prefix
# (prefix_install) as fixtures, for every module that wants one.
pytest_plugins = ["tests.support.daemon", "tests.support.sshd", "tests.support.units", "tests.support.seat_users"]


@pytest.fixture(scope="module", autouse=True)
def _long_lived_objects_frozen() -> None:
    """At each module's start, collect, then freeze what is left out of the collector's view.

    What outlives a module (every test module and its imports, the libraries tests import lazily,
    session fixtures) is millions of objects, and every full collection walks them again: the OSWorld
    differential tests, which collect after each call to close what OSWorld's functions leave open,
    took ten times as long in the whole suite as alone. Collecting first keeps the unreachable ones
    collectable, so their finalizers (and ResourceWarnings) still run in the module that made them.
    """
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _temp_dirs_are_removed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every directory the tests make with ``tempfile.mkdtemp`` outside pytest's own temp tree is gone by the
    end of the run: a fixture that leaves one (no ``finally``, a failed start) fails the run, naming it."""
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recorded(*args: Any, **kwargs: Any) -> Any:
        path = mkdtemp(*args, **kwargs)
        made.append(Path(os.fsdecode(path)))
        return path

    tempfile.mkdtemp = recorded
    try:
        yield
    finally:
        tempfile.mkdtemp = mkdtemp
    pytests = tmp_path_factory.getbasetemp().resolve()
    left = [str(path) for path in made if path.exists() and not path.resolve().is_relative_to(pytests)]
    assert not left, f"temporary directories left behind: {left}"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path: AF_UNIX socket paths must stay under ~108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="cud-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def xvfb(tmp_path: Path) -> Iterator[XServer]:
    """A fresh 1280x800 Xvfb on a display number it picked itself."""
    server = start_xvfb(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def recorder(xvfb: XServer, tmp_path: Path) -> Iterator[Recorder]:
    """A recording window covering the whole screen of ``xvfb``."""
    rec = Recorder(xvfb.display, tmp_path, f"{xvfb.width}x{xvfb.height}+0+0")
    yield rec
    rec.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI every package is installed, so a skip means a cell silently did not run: fail it."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where every Debian package of sandbox/deps.sh is installed: {reason}"
