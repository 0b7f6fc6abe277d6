"""The OSWorld seat's home template (cud.osworld.seat), with the real applications.

A home is made from the template as a seat's reset makes it (a copy, given to the seat's user), and
the application runs as that user on an Xvfb with openbox. Calc opens an .xlsx, Writer a .docx:
xdotool types into the document and presses a bare Ctrl+S, as OSWorld's postconfig steps do, and
the file read back (as a zip of XML: the OOXML parts themselves) must hold the typed text and still
be OOXML. Without the template the same steps leave the file as it was: the tip of the day takes
the keyboard and the keep-format question holds the save. VLC starts with no privacy question.
Last, the whole path on a real seat: a daemon whose seat has the template, and a task whose setup
opens, types into and saves a workbook.

Every application is stopped by its process group (it was started in a session of its own), and the
seat's user's leftovers go with it (``SeatUsers.end_processes``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from cud.daemon.session.processes import SESSION_PATH
from cud.daemon.session.user import SeatUser
from cud.osworld.seat import fill_template, template_files
from tests.support.a11y import stop_group
from tests.support.daemon import scenario
from tests.support.desktop import Desktop, start_desktop
from tests.support.libreoffice import START_TIMEOUT, libreoffice
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import spec_seat

SAVE_TIMEOUT = 60.0
#: How long a test looks at the screen after the application's window showed, before it types: a fresh
#: LibreOffice profile's tip of the day came about a second after the document's window (measured).
SETTLE_SECONDS = 5.0
TYPED = "4242"

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_CT = "http://schemas.openxmlformats.org/package/2006/content-types"
_XLSX_PARTS = {
    "[Content_Types].xml": f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{_CT}">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
    "_rels/.rels": f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_RELS}">'
    f'<Relationship Id="rId1" Type="{_DOC_REL}" Target="xl/workbook.xml"/></Relationships>',
    "xl/workbook.xml": f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_MAIN}" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_RELS}">'
    '<Relationship Id="rId1" Target="worksheets/sheet1.xml" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"/></Relationships>',
    "xl/worksheets/sheet1.xml": f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}"><sheetData>'
    '<row r="1"><c r="A1" t="inlineStr"><is><t>start</t></is></c><c r="B1"><v>7</v></c></row>'
    "</sheetData></worksheet>",
}
_DOCX_PARTS = {
    "[Content_Types].xml": f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{_CT}">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    "_rels/.rels": f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_RELS}">'
    f'<Relationship Id="rId1" Type="{_DOC_REL}" Target="word/document.xml"/></Relationships>',
    "word/document.xml": f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{_WORD}"><w:body>'
    "<w:p><w:r><w:t>Start</w:t></w:r></w:p></w:body></w:document>",
}


def write_ooxml(path: Path | io.BytesIO, parts: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text)


def is_ooxml(path: Path) -> bool:
    """An Office Open XML package, not LibreOffice's own format (whose zip starts with a ``mimetype`` part)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    return "[Content_Types].xml" in names and "mimetype" not in names


def xlsx_a1(path: Path) -> str | None:
    """Cell A1 of the first sheet, as text (a shared, inline or formula string, or a number's text)."""
    with zipfile.ZipFile(path) as z:
        sheet = ElementTree.fromstring(z.read("xl/worksheets/sheet1.xml"))
        shared = (ElementTree.fromstring(z.read("xl/sharedStrings.xml"))
                  if "xl/sharedStrings.xml" in z.namelist() else None)
    cell = sheet.find(f".//{{{_MAIN}}}c[@r='A1']")
    if cell is None:
        return None
    if cell.get("t") == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(f"{{{_MAIN}}}t"))
    value = cell.findtext(f"{{{_MAIN}}}v")
    if cell.get("t") == "s" and shared is not None and value is not None:
        item = shared.findall(f"{{{_MAIN}}}si")[int(value)]
        return "".join(t.text or "" for t in item.iter(f"{{{_MAIN}}}t"))
    return value


def docx_text(path: Path) -> str:
    with zipfile.ZipFile(path) as z:
        body = ElementTree.fromstring(z.read("word/document.xml"))
    return "\n".join("".join(t.text or "" for t in p.iter(f"{{{_WORD}}}t")) for p in body.iter(f"{{{_WORD}}}p"))


@dataclass
class Seat:
    desktop: Desktop
    user: SeatUser
    users: SeatUsers
    base: Path
    template: Path

    def home(self, name: str, *, template: bool = True) -> Path:
        """A home as the reset makes one: the template copied, everything given to the seat's user."""
        home = self.base / name
        if template:
            shutil.copytree(self.template, home, symlinks=True)
        else:
            home.mkdir(mode=0o755)
        (home / "Desktop").mkdir(mode=0o755, exist_ok=True)
        if os.geteuid() == 0:
            for top, dirs, files in os.walk(home):
                for entry in [top, *(os.path.join(top, n) for n in dirs + files)]:
                    os.lchown(entry, self.user.uid, self.user.gid)
        return home

    def give(self, path: Path) -> None:
        if os.geteuid() == 0:
            os.chown(path, self.user.uid, self.user.gid)

    def become(self) -> list[str]:
        """The argv prefix that runs a command as the seat's user."""
        return [] if self.user.is_self else [
            "setpriv", f"--reuid={self.user.uid}", f"--regid={self.user.gid}", "--clear-groups"]

    def env(self, home: Path) -> dict[str, str]:
        """The seat user's environment: ``HOME`` the home, the session's PATH, no accessibility bus."""
        return {"DISPLAY": self.desktop.display, "HOME": str(home), "PATH": SESSION_PATH, "LANG": "C.UTF-8",
                "USER": self.user.name, "LOGNAME": self.user.name, "NO_AT_BRIDGE": "1", "QT_QPA_PLATFORM": "xcb",
                "GDK_BACKEND": "x11", "DBUS_SESSION_BUS_ADDRESS": "disabled:"}

    def end_leftovers(self) -> None:
        self.users.end_processes(self.user.name)  # a forked helper that left the group (oosplash's soffice.bin)

    @contextlib.contextmanager
    def run(self, home: Path, argv: list[str], log: str) -> Iterator[subprocess.Popen[bytes]]:
        """``argv`` as the seat's user in its environment; stopped at the end."""
        proc = self.desktop.spawn([*self.become(), *argv], log, env=self.env(home), cwd=str(home))
        try:
            yield proc
        finally:
            stop_group(proc)
            self.end_leftovers()

    @contextlib.contextmanager
    def office(self, home: Path, document: Path, app: str) -> Iterator[str]:
        """``document`` open in LibreOffice's ``app`` as the seat's user: the id of its window."""
        with libreoffice(self.desktop, document, env=self.env(home), cwd=home, app=app, become=self.become(),
                         cleanup=self.end_leftovers) as title:
            yield self.window(f"^{re.escape(title)}$")

    def xdotool(self, *args: str, timeout: float = 30.0) -> str:
        done = subprocess.run(["xdotool", *args], env={**self.desktop.env}, capture_output=True, text=True,
                              timeout=timeout)
        return done.stdout

    def titles(self) -> list[str]:
        ids = self.xdotool("search", "--onlyvisible", "--name", ".").split()
        return sorted({self.xdotool("getwindowname", i).strip() for i in ids} - {""})

    def window(self, pattern: str, timeout: float = START_TIMEOUT) -> str:
        """The id of a visible window whose title matches ``pattern`` (a regular expression)."""
        found: list[str] = []

        def there() -> bool:
            found[:] = self.xdotool("search", "--onlyvisible", "--name", pattern).split()
            return bool(found)

        wait_until(there, timeout, f"a window titled /{pattern}/ (windows: {self.titles()})")
        return found[0]


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[Seat]:
    base = Path(tempfile.mkdtemp(prefix="cud-osw-seat-", dir="/tmp"))
    base.chmod(0o755)  # the seat's user reaches its homes through it
    try:
        with start_desktop("x11", base) as desktop:
            template = base / "template"
            fill_template(template)
            yield Seat(desktop, seat_users.make(), seat_users, base, template)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def only_window(seat: Seat, title: str) -> None:
    """After a while, ``title`` is the only window showing: nothing else took the keyboard."""
    time.sleep(SETTLE_SECONDS)
    assert seat.titles() == [title], f"windows besides {title!r}: {seat.titles()}"


def type_and_save(seat: Seat, window: str, keys_before: list[str]) -> None:
    """Into ``window``: the keys, then TYPED, Return, and a bare Ctrl+S (OSWorld's postconfig)."""
    seat.xdotool("windowactivate", "--sync", window)
    for key in keys_before:
        seat.xdotool("key", "--clearmodifiers", key)
    seat.xdotool("type", "--delay", "60", TYPED)
    seat.xdotool("key", "--clearmodifiers", "Return")
    seat.xdotool("key", "--clearmodifiers", "ctrl+s")


def saved(seat: Seat, read: Callable[[], bool], what: str) -> None:
    wait_until(read, SAVE_TIMEOUT, f"{what} (windows: {seat.titles()})")


def calc_saves_xlsx(seat: Seat, home: Path) -> None:
    book = home / "Desktop" / "book.xlsx"
    write_ooxml(book, _XLSX_PARTS)
    seat.give(book)
    assert xlsx_a1(book) == "start"
    with seat.office(home, book, "calc") as window:
        only_window(seat, "book.xlsx - LibreOffice Calc")
        type_and_save(seat, window, ["ctrl+Home"])

        def typed() -> bool:
            with contextlib.suppress(zipfile.BadZipFile, KeyError, OSError, ElementTree.ParseError):
                return xlsx_a1(book) == TYPED
            return False

        saved(seat, typed, f"A1 of {book.name} to be {TYPED} after a bare Ctrl+S")
        assert is_ooxml(book)  # still xlsx: the keep-format question was not asked, nor answered with ODF
        assert seat.titles() == ["book.xlsx - LibreOffice Calc"]


def test_the_template_holds_every_applications_settings(seat: Seat) -> None:
    written = sorted(str(p.relative_to(seat.template)) for p in seat.template.rglob("*") if p.is_file())
    assert written == sorted(template_files())
    xcu = ElementTree.parse(seat.template / ".config/libreoffice/4/user/registrymodifications.xcu").getroot()
    oor = "{http://openoffice.org/2001/registry}"
    settings = {(i.get(f"{oor}path"), p.get(f"{oor}name")): p.findtext("value")
                for i in xcu for p in i}
    assert settings[("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat")] == "false"
    assert settings[("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay")] == "false"
    factory = "/org.openoffice.Setup/Office/Factories/org.openoffice.Setup:Factory['com.sun.star.{}']"
    assert {settings[(factory.format(kind), "ooSetupFactoryDefaultFilter")]
            for kind in ("text.TextDocument", "sheet.SpreadsheetDocument", "presentation.PresentationDocument")} == {
        "MS Word 2007 XML", "Calc MS Excel 2007 XML", "Impress MS PowerPoint 2007 XML"}  # OSWorld's "Always save as"
    # a template no seat's user may change (cud.daemon.session.template): nothing writable but by its owner
    assert all(not p.stat().st_mode & 0o022 for p in [seat.template, *seat.template.rglob("*")])


def test_calc_saves_an_xlsx_with_a_bare_ctrl_s_and_no_dialog(seat: Seat) -> None:
    calc_saves_xlsx(seat, seat.home("calc"))


def test_without_the_template_calc_does_not_save_the_xlsx(seat: Seat) -> None:
    """The proof the template is what matters: a fresh LibreOffice profile shows its tip of the day, and
    past it (measured) a bare Ctrl+S asks "Confirm File Format" and saves nothing."""
    with pytest.raises(AssertionError, match=r"Tip of the Day|Confirm File Format"):
        calc_saves_xlsx(seat, seat.home("bare", template=False))


def test_writer_saves_a_docx_with_a_bare_ctrl_s_and_no_dialog(seat: Seat) -> None:
    home = seat.home("writer")
    document = home / "Desktop" / "letter.docx"
    write_ooxml(document, _DOCX_PARTS)
    seat.give(document)
    with seat.office(home, document, "writer") as window:
        only_window(seat, "letter.docx - LibreOffice Writer")
        type_and_save(seat, window, ["ctrl+End", "Return"])

        def typed() -> bool:
            with contextlib.suppress(zipfile.BadZipFile, KeyError, OSError, ElementTree.ParseError):
                return TYPED in docx_text(document).split("\n")
            return False

        saved(seat, typed, f"{document.name} to hold a paragraph {TYPED} after a bare Ctrl+S")
        assert docx_text(document).split("\n") == ["Start", TYPED, ""] and is_ooxml(document)
        assert seat.titles() == ["letter.docx - LibreOffice Writer"]


def test_vlc_starts_with_no_privacy_question(seat: Seat) -> None:
    home = seat.home("vlc")
    with seat.run(home, ["vlc", "--no-audio"], "vlc.log"):
        seat.window(r"^VLC media player$")
        only_window(seat, "VLC media player")


def test_writer_saves_an_rtf_with_a_bare_ctrl_s_too(seat: Seat) -> None:
    """A format that is not the default one (docx): only WarnAlienFormat keeps the keep-format question away."""
    home = seat.home("rtf")
    document = home / "Desktop" / "note.rtf"
    document.write_text("{\\rtf1\\ansi Start\\par}\n")
    seat.give(document)
    with seat.office(home, document, "writer") as window:
        only_window(seat, "note.rtf - LibreOffice Writer")
        type_and_save(seat, window, ["ctrl+End", "Return"])
        saved(seat, lambda: TYPED in document.read_text(errors="replace"),
              f"{document.name} to hold {TYPED} after a bare Ctrl+S")
        assert document.read_text().startswith("{\\rtf1")
        assert seat.titles() == ["note.rtf - LibreOffice Writer"]


#: A task on a real seat (a daemon, its reset copying the template into the home, the session's environment):
#: setup opens the workbook, waits, types and saves as OSWorld's postconfig would, and waits for the file.
CALC_TASK = r"""
prompt = "Nothing to do."
seat = "s1"
[[setup]]
files = [{ src = "fixtures/book.xlsx", dest = "Desktop/book.xlsx" }]
[[setup]]
launch = ["libreoffice", "--calc", "Desktop/book.xlsx"]
wait_for = { window_title = "book.xlsx - LibreOffice Calc", timeout = 120 }
[[setup]]
sleep = 5
[[setup]]
run = ["xdotool", "search", "--limit", "1", "--name", "^book\\.xlsx - LibreOffice Calc$", "windowactivate", "--sync",
       "key", "--clearmodifiers", "ctrl+Home", "type", "--delay", "60", "4242"]
[[setup]]
run = ["xdotool", "key", "--clearmodifiers", "Return", "ctrl+s"]
[[setup]]
run = ["/usr/bin/python3", "-c", "WAIT_FOR_SAVE"]
timeout = 60
[[checks]]
name = "no dialog"
window = { title = "re:(?i)tip of the day|confirm file format|keep current format" }
exists = false
[[checks]]
name = "the workbook is open"
window = { title = "book.xlsx - LibreOffice Calc" }
"""
#: The last setup step: until A1's value 4242 is in the saved workbook (the step's timeout bounds it).
WAIT_FOR_SAVE = ("import time, zipfile\\n"
                 "while True:\\n"
                 "    try:\\n"
                 "        z = zipfile.ZipFile('Desktop/book.xlsx')\\n"
                 "        if b'<v>4242</v>' in z.read('xl/worksheets/sheet1.xml'): break\\n"
                 "    except (OSError, KeyError, zipfile.BadZipFile): pass\\n"
                 "    time.sleep(0.5)\\n")


def test_a_seat_with_the_template_saves_calcs_xlsx_in_a_task(seat_users: SeatUsers) -> None:
    book = io.BytesIO()
    write_ooxml(book, _XLSX_PARTS)
    with spec_seat(seat_users, scenario({"message": "done"}, look_first=False),
                   template_files=template_files()) as real:
        spec = real.write("calc.toml", CALC_TASK.replace("WAIT_FOR_SAVE", WAIT_FOR_SAVE),
                          {"fixtures/book.xlsx": book.getvalue()})
        code, task = real.submit(spec)
        assert task["state"] == "succeeded" and code == 0, (task["error"], task["reason"], task.get("verdict"))
        saved_book = real.home / "Desktop" / "book.xlsx"
        assert xlsx_a1(saved_book) == TYPED and is_ooxml(saved_book)
