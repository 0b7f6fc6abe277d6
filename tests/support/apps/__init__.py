"""Third-party applications for the conformance suite (``tests/test_apps.py``).

Each module ``tests/support/apps/NAME.py`` defines ``APP``, a subclass of
:class:`tests.support.apps.base.App`.
"""

from __future__ import annotations

import importlib

from .base import App

__all__ = ("NAMES", "app_class")

NAMES = ("chromium", "gtk", "qt", "xterm")


def app_class(name: str) -> type[App]:
    cls: type[App] = importlib.import_module(f"{__name__}.{name}").APP
    return cls
