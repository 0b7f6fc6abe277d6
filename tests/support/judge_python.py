"""An interpreter a metric's judge user can run, for a daemon of the tests that runs metric checks.

The judge runs the daemon's own interpreter as ``[sessions] judge_user`` (cud.daemon.spec.metric),
so that user must be able to run it and read cud and its libraries: an installed daemon's venv
(``PREFIX/lib/cud/venv``) is. The tests' interpreter may not be (pyenv's under ``/root``, 0700):
then the daemon runs in a venv of the system's ``python3`` (the same minor version, so the same
compiled wheels) whose site-packages adds the tests' own.
"""

from __future__ import annotations

import contextlib
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cud.daemon.session.user import SeatUser

__all__ = ("judge_python",)

SYSTEM_PYTHON = "/usr/bin/python3"
#: What the judge imports, checked as the user before a daemon is started with the interpreter.
_PROBE = "import cud.osworld.judge, openpyxl, pandas"


def _runs(python: str, user: SeatUser) -> bool:
    try:
        done = subprocess.run([python, "-I", "-c", _PROBE], cwd="/", capture_output=True, timeout=120,
                              **user.become())  # type: ignore[call-overload]  # user=, group=, extra_groups=
    except PermissionError:  # the user may not run it at all
        return False
    return done.returncode == 0


@contextlib.contextmanager
def judge_python(user: SeatUser) -> Iterator[str]:
    """An interpreter that runs the tests' cud and that ``user`` can run: the tests' own, else a venv made here."""
    if _runs(sys.executable, user):
        yield sys.executable
        return
    version = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert version == str(sys.version_info[:2]), (f"{user.name} cannot run {sys.executable}, and {SYSTEM_PYTHON} is "
                                                  f"Python {version}, not the tests' {sys.version_info[:2]}")
    place = Path(tempfile.mkdtemp(prefix="cud-judge-python-", dir="/tmp"))
    try:
        place.chmod(0o755)
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(place / "venv")], check=True, timeout=120)
        ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
        inner = next((place / "venv" / "lib").glob("python3*/site-packages"))
        # addsitedir, not a bare path line: the tests' site-packages has .pth files of its own (cud's editable finder).
        (inner / "tests_site.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
        python = str(place / "venv" / "bin" / "python")
        assert _runs(python, user), f"{user.name} cannot run {python} either"
        yield python
    finally:
        shutil.rmtree(place, ignore_errors=True)
