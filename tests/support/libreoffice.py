"""LibreOffice on a test's display: a document opened in Calc (or Writer, Impress) until its window is
listed, and stopped after; documents saved by a headless LibreOffice; and the small workbook the Calc
tests type a total into.

The application runs in a process group of its own (:meth:`Desktop.spawn`) and is stopped by it; a
caller whose LibreOffice runs as another user passes ``become`` (the argv that switches to it) and
``cleanup`` (what ends that user's leftovers: oosplash's soffice.bin may leave the group).
"""

from __future__ import annotations

import contextlib
import functools
import io
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import openpyxl

from cud.drivers.x11_windows import X11Windows

from .a11y import stop_group
from .desktop import Desktop
from .recorder import wait_until

__all__ = ("A5", "APPS", "START_TIMEOUT", "UNITS", "libreoffice", "saved_by_libreoffice", "units_workbook", "window_title",
           "window_titles")

#: The application's name in its windows' titles, by LibreOffice's command-line switch.
APPS = {"calc": "LibreOffice Calc", "writer": "LibreOffice Writer", "impress": "LibreOffice Impress"}
#: LibreOffice's first start on 2 loaded cores can take a minute.
START_TIMEOUT = 120.0
#: The units in A2:A4 of :func:`units_workbook`.
UNITS = (10, 20, 30)
#: Cell A5's middle with Calc maximized at 1280x800 by openbox (cud.osworld.seat's template's zoom).
A5 = (80, 271)


def window_title(document: str | Path, app: str = "calc") -> str:
    """The title of the window LibreOffice shows ``document`` in."""
    if app not in APPS:
        raise ValueError(f"no LibreOffice application {app!r} (one of {sorted(APPS)})")
    return f"{Path(document).name} - {APPS[app]}"


@functools.cache  # openpyxl stamps the time into the file: the same bytes every time they are asked for
def units_workbook(total: int | None) -> bytes:
    """Sheet1 with "units" in A1, :data:`UNITS` in A2:A4 and ``total`` in A5 (blank when None)."""
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sheet1"
    for row in (["units"], *([unit] for unit in UNITS)):
        sheet.append(row)
    if total is not None:
        sheet["A5"] = total
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def window_titles(display: str) -> list[str]:
    """The titles of the windows the window manager manages on ``display``."""
    windows = X11Windows(display, timeout=5.0)
    try:
        return [w.title for w in windows.client_windows() if w.title]
    finally:
        windows.close()


@contextlib.contextmanager
def libreoffice(desktop: Desktop, document: Path, *, env: Mapping[str, str], cwd: Path, app: str = "calc",
                become: Sequence[str] = (), cleanup: Callable[[], None] | None = None,
                timeout: float = START_TIMEOUT) -> Iterator[str]:
    """``libreoffice --APP DOCUMENT`` on ``desktop`` (its log ``APP.log`` in the desktop's folder) until the
    document's window is listed; yields that window's title, and stops the application after."""
    title = window_title(document, app)
    proc = desktop.spawn([*become, "libreoffice", f"--{app}", str(document)], f"{app}.log", env=dict(env),
                         cwd=str(cwd))
    try:
        try:
            wait_until(lambda: title in window_titles(desktop.display), timeout, f"a window titled {title!r}")
        except AssertionError as timed_out:  # what showed instead (a dialog, another document) says why
            raise AssertionError(f"{timed_out} (windows: {window_titles(desktop.display)})") from None
        yield title
    finally:
        stop_group(proc)
        if cleanup is not None:
            cleanup()



def saved_by_libreoffice(files: Mapping[str, bytes], timeout: float = START_TIMEOUT) -> dict[str, bytes]:
    """Each document of ``files`` (name -> bytes) opened and saved again in its own format by a headless
    LibreOffice with a profile of its own: the documents as the application writes them, as OSWorld's task
    files were made (python-pptx's theme and LibreOffice's differ in what a metric compares)."""
    with tempfile.TemporaryDirectory(prefix="cud-lo-save-") as scratch:
        given, out = Path(scratch) / "in", Path(scratch) / "out"
        given.mkdir()
        for name, data in files.items():
            (given / name).write_bytes(data)
        for suffix in sorted({Path(name).suffix for name in files}):
            argv = ["soffice", f"-env:UserInstallation=file://{scratch}/profile", "--headless", "--norestore",
                    "--convert-to", suffix.lstrip("."), "--outdir", str(out),
                    *(str(given / name) for name in files if Path(name).suffix == suffix)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            missing = [name for name in files if Path(name).suffix == suffix and not (out / name).is_file()]
            if done.returncode != 0 or missing:
                raise AssertionError(f"LibreOffice saved none of {missing} (status {done.returncode}): "
                                     f"{done.stdout}{done.stderr}")
        return {name: (out / name).read_bytes() for name in files}
