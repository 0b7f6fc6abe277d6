"""The OSWorld seat: a home template whose applications start as OSWorld's VM image has them.

OSWorld's tasks assume a desktop where nothing a first start shows takes the keyboard, and where a
bare Ctrl+S in LibreOffice saves a document in its own format (its postconfig steps press exactly
that, ``python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')"``, and then read the file).
Its image gets there by hand (OSWorld's ``desktop_env/server/README.md``: LibreOffice's "Always
save as" set to the Microsoft formats, Chrome's keyring prompt silenced, PyAutoGUI installed for
the user). :func:`fill_template` writes the same settings as files into a seat's home template
(``[[seats]] home_template``), so every reset gives the seat a home that behaves so:

- LibreOffice: ``.config/libreoffice/4/user/registrymodifications.xcu`` (no tip of the day, no
  first-start or what's-new, donate and get-involved infobars, no keep-format question, no
  document recovery or autosave, and Writer/Calc/Impress saving docx/xlsx/pptx by default);
- VLC: ``.config/vlc/vlcrc`` (no privacy and network-access question, no update check);
- GIMP 2.10 shows nothing at its first start, and gets no file: a ``.config/GIMP/2.10`` made in advance
  would skip its user installation (its data folders), and it would then say so in an error message;
- Chromium: ``.config/chromium/First Run`` and ``Default/Preferences`` (no first-run pages, no
  default-browser question);
- Thunderbird: a profile in ``.thunderbird``, Debian's installation's default, whose ``user.js`` turns
  off the account wizard, the default-client question and the rights and data-reporting bars.

:func:`install_pyautogui` (optional: it needs PyPI) puts PyAutoGUI, at OSWorld's version, in the
template's user site-packages, where the system's ``python3`` (and ``python``, Debian's
``python-is-python3``) of the seat's user finds it: no file outside the template changes.

``python -m cud.osworld.seat TEMPLATE [--pyautogui]`` does both (docs/osworld.md, "The OSWorld
seat").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape

from cud.errors import ConfigError

__all__ = ("PYAUTOGUI", "SYSTEM_PYTHON", "THUNDERBIRD_INSTALL", "fill_template", "install_pyautogui", "template_files",
           "user_site")

#: The Python the seat's user runs as ``python3`` (and ``python``): a seat's commands find /usr/bin first after
#: /usr/local/bin (cud.daemon.session.processes.SESSION_PATH).
SYSTEM_PYTHON = "/usr/bin/python3"

#: PyAutoGUI and what it imports on X11, pinned at OSWorld's versions where its server pins them
#: (desktop_env/server/requirements.txt: PyAutoGUI 0.9.54, python3-xlib 0.15). All are pure Python, installed
#: without their declared dependencies: Pillow (screenshots) comes from Debian's python3-pil.
PYAUTOGUI = ("PyAutoGUI==0.9.54", "python3-xlib==0.15", "PyMsgBox==1.0.9", "pytweening==1.2.0",
             "pyscreeze==0.1.30", "PyGetWindow==0.0.9", "PyRect==0.2.0", "MouseInfo==0.1.3", "pyperclip==1.9.0")

_LIBREOFFICE_PROFILE = ".config/libreoffice/4/user/registrymodifications.xcu"

#: (node path, property, XML schema type, value): LibreOffice's settings, as its Tools > Options writes them.
_LIBREOFFICE_SETTINGS: tuple[tuple[str, str, str, str], ...] = (
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay", "xs:boolean", "false"),
    ("/org.openoffice.Office.Common/Misc", "FirstRun", "xs:boolean", "false"),
    ("/org.openoffice.Office.Common/Load", "ShowOfficeUpdateDialog", "xs:boolean", "false"),
    # The keep-format question a bare Ctrl+S on an .xlsx (or .csv) would otherwise ask.
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat", "xs:boolean", "false"),
    ("/org.openoffice.Office.UI.Infobar/Enabled", "WhatsNew", "xs:boolean", "false"),
    ("/org.openoffice.Office.UI.Infobar/Enabled", "Donate", "xs:boolean", "false"),
    ("/org.openoffice.Office.UI.Infobar/Enabled", "GetInvolved", "xs:boolean", "false"),
    # No recovery dialog after a killed LibreOffice (a seat's reset ends it so), no autosave writing beside it.
    ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled", "xs:boolean", "false"),
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled", "xs:boolean", "false"),
    ("/org.openoffice.Office.Recovery/AutoSave", "UserAutoSaveEnabled", "xs:boolean", "false"),
    # OSWorld's image: Tools > Options > Load/Save > General > "Always save as" the Microsoft formats.
    ("/org.openoffice.Setup/Office/Factories/org.openoffice.Setup:Factory['com.sun.star.text.TextDocument']",
     "ooSetupFactoryDefaultFilter", "xs:string", "MS Word 2007 XML"),
    ("/org.openoffice.Setup/Office/Factories/org.openoffice.Setup:Factory['com.sun.star.sheet.SpreadsheetDocument']",
     "ooSetupFactoryDefaultFilter", "xs:string", "Calc MS Excel 2007 XML"),
    ("/org.openoffice.Setup/Office/Factories/"
     "org.openoffice.Setup:Factory['com.sun.star.presentation.PresentationDocument']",
     "ooSetupFactoryDefaultFilter", "xs:string", "Impress MS PowerPoint 2007 XML"),
)

# VLC reads its settings by name; the section only groups them as VLC itself writes the file.
_VLCRC = """\
[qt] # Qt interface
# The privacy and network access question of a first start
qt-privacy-ask=0
qt-updates-notif=0
[core] # core program
metadata-network-access=0
"""

_CHROMIUM_PREFERENCES = {
    "browser": {"check_default_browser": False, "has_seen_welcome_page": True},
    "profile": {"exit_type": "Normal", "exited_cleanly": True},
}

#: Thunderbird keeps a profile per installation, named by a hash of its directory: this one is Debian's
#: (/usr/lib/thunderbird), read from the profiles.ini Debian 12's Thunderbird wrote. Another installation
#: makes a profile of its own, with the first start's account wizard.
THUNDERBIRD_INSTALL = "FDC34C9F024745EB"

_THUNDERBIRD_INSTALLS = f"""\
[{THUNDERBIRD_INSTALL}]
Default=cud.default-release
Locked=1
"""

_THUNDERBIRD_PROFILES = f"""\
[Install{THUNDERBIRD_INSTALL}]
Default=cud.default-release
Locked=1

[Profile0]
Name=default-release
IsRelative=1
Path=cud.default-release
Default=1

[General]
StartWithLastProfile=1
Version=2
"""

_THUNDERBIRD_USER_JS = """\
// The account wizard and the default-client question of a first start stay away.
user_pref("mail.provider.suppress_dialog_on_startup", true);
user_pref("mail.shell.checkDefaultClient", false);
user_pref("mail.spotlight.firstRunDone", true);
user_pref("mailnews.start_page.enabled", false);
user_pref("datareporting.policy.dataSubmissionPolicyBypassNotification", true);
// The "Know your rights" bar
user_pref("mail.rights.version", 1);
user_pref("app.update.auto", false);
"""


_QUOTE = {'"': "&quot;"}


def _registrymodifications() -> str:
    items = "".join(
        f'<item oor:path="{escape(path, _QUOTE)}"><prop oor:name="{name}" oor:op="fuse">'
        f"<value>{escape(value)}</value></prop></item>\n"
        for path, name, _type, value in _LIBREOFFICE_SETTINGS)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n' + items + "</oor:items>\n")


def template_files() -> dict[str, str]:
    """Every file :func:`fill_template` writes, by its path relative to the template, with its text."""
    return {
        _LIBREOFFICE_PROFILE: _registrymodifications(),
        ".config/vlc/vlcrc": _VLCRC,
        ".config/chromium/First Run": "",
        ".config/chromium/Default/Preferences": json.dumps(_CHROMIUM_PREFERENCES, indent=1) + "\n",
        ".thunderbird/profiles.ini": _THUNDERBIRD_PROFILES,
        ".thunderbird/installs.ini": _THUNDERBIRD_INSTALLS,
        ".thunderbird/cud.default-release/user.js": _THUNDERBIRD_USER_JS,
    }


def fill_template(template: Path) -> list[Path]:
    """Write :func:`template_files` into ``template`` (made if missing), replacing those files and leaving every
    other file alone; gives the paths written. Directories are 0755 and files 0644: a template nobody but its
    owner may change (cud.daemon.session.template)."""
    if template.exists() and not template.is_dir():
        raise ConfigError(f"home template {str(template)!r} is not a directory")
    written = []
    old_umask = os.umask(0o022)
    try:
        template.mkdir(mode=0o755, parents=True, exist_ok=True)
        for relative, text in template_files().items():
            path = template / relative
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o644)
            written.append(path)
    finally:
        os.umask(old_umask)
    return written


def user_site(template: Path, python: str = SYSTEM_PYTHON) -> Path:
    """Where ``python`` run by the seat's user (``HOME`` the seat's home) looks for its user's packages, in the
    template: ``~/.local/lib/pythonX.Y/site-packages``."""
    try:
        done = subprocess.run([python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                              capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"python {python!r} does not tell its version: {exc}") from exc
    return template / ".local" / "lib" / f"python{done.stdout.strip()}" / "site-packages"


def install_pyautogui(template: Path, python: str = SYSTEM_PYTHON) -> Path:
    """Install :data:`PYAUTOGUI` from PyPI into the template's user site-packages of ``python``; gives that
    directory. pip runs from the Python running this (the packages are pure Python, so any pip will do)."""
    site = user_site(template, python)
    old_umask = os.umask(0o022)
    try:
        site.mkdir(mode=0o755, parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                               "--upgrade", "--target", str(site), *PYAUTOGUI], timeout=600)
    finally:
        os.umask(old_umask)
    if done.returncode != 0:
        raise ConfigError(f"pip could not install {' '.join(PYAUTOGUI)} into {str(site)!r} "
                          f"(exit status {done.returncode})")
    # python3-xlib 0.15 refuses to connect when it finds no Xauthority file at all: a session on a display
    # without a cookie has no XAUTHORITY, so an empty ~/.Xauthority (no cookie: the same as none) is there.
    xauthority = template / ".Xauthority"
    if not xauthority.exists():
        xauthority.touch(mode=0o644)
        xauthority.chmod(0o644)
    return site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cud.osworld.seat",
                                     description="Fill a seat's home template as OSWorld's VM image is configured.")
    parser.add_argument("template", type=Path, help="the seat's home_template directory (made if missing)")
    parser.add_argument("--pyautogui", action="store_true",
                        help=f"also install PyAutoGUI for {SYSTEM_PYTHON} into the template (needs PyPI)")
    parser.add_argument("--python", default=SYSTEM_PYTHON, help="the seat's python3 (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        for path in fill_template(args.template):
            print(f"wrote {path}")
        if args.pyautogui:
            print(f"installed PyAutoGUI in {install_pyautogui(args.template, args.python)}")
    except (ConfigError, OSError) as exc:
        print(f"cud.osworld.seat: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
