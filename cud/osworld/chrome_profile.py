"""OSWorld's Chrome getters that read the profile's Preferences, as a program the seat's user runs:
``python3 -c SOURCE PROFILE GETTER``, which writes the getter's value on its standard output.

Ported from desktop-env 1.0.2 (OSWorld's code, Apache-2.0), evaluators/getters/chrome.py:
``get_default_search_engine``, ``get_enable_do_not_track``, ``get_enable_safe_browsing``,
``get_new_startup_page``, ``get_data_delete_automacally`` and ``get_profile_name``. Each reads
``Default/Preferences`` of the profile (OSWorld's ``~/.config/google-chrome``; the seat's Chromium's
``~/.config/chromium``, the first argument), takes the same keys, and gives the same fallback when
reading or parsing fails (OSWorld's ``except Exception``: a missing file too, whose ``get_file`` is
None). The value is written as it is when it is text, as nothing when it is None (``get_profile_name``
without a name), and as JSON otherwise (a number where a name was): a cud command getter hands the
metric text.

The standard library only, so the system's ``python3`` runs it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

#: Each getter's value when the file cannot be read or parsed, or a key's value has no ``get``.
FALLBACK: dict[str, Any] = {
    "default_search_engine": "Google",
    "enable_do_not_track": "false",
    "enable_safe_browsing": "false",
    "new_startup_page": "Google",
    "data_delete_automacally": "Google",
    "profile_name": None,
}


def value(data: Any, name: str) -> Any:
    """The getter's value from the parsed Preferences, OSWorld's expressions as written."""
    if name == "default_search_engine":
        return data.get("default_search_provider_data", {}).get("template_url_data", {}).get("short_name", "Google")
    if name == "enable_do_not_track":
        return "true" if data.get("enable_do_not_track", {}) else "false"
    if name == "enable_safe_browsing":
        safebrowsing = data.get("safebrowsing", {})
        return "true" if bool(safebrowsing.get("enhanced", False)) or bool(safebrowsing.get("enabled", False)) \
            else "false"
    if name == "new_startup_page":  # no "session" is a fresh start, which counts as set
        if "session" not in data.keys():
            return "true"
        return "true" if data.get("session", {}).get("restore_on_startup", {}) == 5 else "false"
    if name == "data_delete_automacally":
        return "true" if data["profile"].get("default_content_setting_values", None) is not None else "false"
    return data.get("profile", {}).get("name", None)


def read(profile: str, name: str) -> Any:
    try:
        with open(os.path.join(profile, "Default", "Preferences"), "rb") as f:
            return value(json.loads(f.read()), name)
    except Exception:  # OSWorld's getters log any failure and give their fallback
        return FALLBACK[name]


def text(result: Any) -> str:
    if result is None:
        return ""
    return result if isinstance(result, str) else json.dumps(result)


def main(argv: list[str]) -> int:
    profile, name = argv
    sys.stdout.buffer.write(text(read(profile, name)).encode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
