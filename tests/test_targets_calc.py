"""A focus lookup in LibreOffice Calc leaves the sheet able to take the keys that follow it.

Calc's table manages its descendants (2^31 - 1 cells, each made when asked for):
listing its children makes Calc build them all, and for minutes it handles no input. The
lookup before a ``type`` (:meth:`TargetResolver.focus`) must not ask, or what the
model types never reaches the cell. Calc runs on the profile of cud.osworld.seat's
home template (no first-start dialogs, xlsx kept on save), on a real AT-SPI bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import openpyxl
import pytest

from cud.daemon.targets.lookup import TargetResolver
from cud.drivers.x11_windows import X11Windows
from cud.osworld.seat import fill_template
from cud.protocol import Target
from tests.support.a11y import A11yBus, a11y_desktop, a11y_env
from tests.support.desktop import Desktop
from tests.support.libreoffice import A5, START_TIMEOUT, UNITS, libreoffice, units_workbook, window_title
from tests.support.recorder import wait_until

BOOK = "sales.xlsx"
TITLE = window_title(BOOK)
#: Seconds Calc may take to write the workbook after Ctrl+S, on a loaded machine.
SAVE_TIMEOUT = 30.0
#: Seconds for Calc to finish laying out the sheet once its window is up.
SETTLE_SECONDS = 3.0
#: A lookup's budget here: roomy, so that only a Calc busy for long (or for good) overruns it.
ROOMY = 5.0


def column_a(path: Path) -> list[object]:
    sheet = openpyxl.load_workbook(path).active
    assert sheet is not None
    return [sheet.cell(row=row, column=1).value for row in range(1, 6)]


@pytest.fixture(scope="module")
def calc() -> Iterator[tuple[Desktop, A11yBus, Path]]:
    with a11y_desktop("cud-targets-calc-") as (desktop, bus):
        home = Path(tempfile.mkdtemp(prefix="home-", dir=desktop.workdir))
        fill_template(home)
        book = home / BOOK
        book.write_bytes(units_workbook(None))
        with libreoffice(desktop, book, env={**a11y_env(desktop, bus), "HOME": str(home)}, cwd=home):
            wait_until(lambda: active_title(desktop) == TITLE, START_TIMEOUT, "Calc's window to be active")
            time.sleep(SETTLE_SECONDS)
            yield desktop, bus, book


def active_title(desktop: Desktop) -> str | None:
    windows = X11Windows(desktop.display, timeout=5.0)
    try:
        active = windows.active_window()
        return active.title if active is not None else None
    finally:
        windows.close()


def focus(desktop: Desktop, bus: str) -> Target:
    """The focus lookup before a ``type``, with time enough for a loaded machine (Calc builds its tree on a first
    question)."""
    async def main() -> Target:
        resolver = TargetResolver(desktop.display, bus, timeout=ROOMY)
        try:
            assert await resolver.warm() is None
            return await resolver.focus()
        finally:
            await resolver.close()

    return asyncio.run(main())


def test_typing_after_a_focus_lookup_reaches_the_cell(calc: tuple[Desktop, A11yBus, Path]) -> None:
    desktop, bus, book = calc
    driver = desktop.driver
    driver.click({"type": "click", "button": "left", "x": A5[0], "y": A5[1]})
    driver.screenshot()
    target = focus(desktop, bus.address)
    assert target["note"] is None, target
    assert target["window"] is not None and target["window"]["title"] == TITLE
    driver.type({"type": "type", "text": str(sum(UNITS))})
    driver.keypress({"type": "keypress", "keys": ["ENTER"]})
    driver.screenshot()
    before = book.stat().st_mtime_ns
    driver.keypress({"type": "keypress", "keys": ["ctrl", "s"]})

    def saved() -> bool:
        with contextlib.suppress(zipfile.BadZipFile, KeyError, OSError):
            return book.stat().st_mtime_ns != before and column_a(book) == ["units", *UNITS, sum(UNITS)]
        return False

    wait_until(saved, SAVE_TIMEOUT, f"A5 of {BOOK} to hold {sum(UNITS)} after Ctrl+S")
