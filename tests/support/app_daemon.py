"""A real daemon driving one real application (GTK, Chromium, Qt, xterm) on a private openbox desktop."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cud.scripted import ScriptedModel
from tests.support.apps import app_class
from tests.support.apps.base import App
from tests.support.daemon import Daemon
from tests.support.desktop import start_desktop

__all__ = ("daemon_on_app",)


@contextlib.contextmanager
def daemon_on_app(app_name: str, workdir: Path, scenario_for: Callable[[App], dict[str, Any]],
                  **options: Any) -> Iterator[tuple[App, Daemon]]:
    """The app started and reporting, and a daemon whose scripted model plays ``scenario_for(app)``
    (the scenario needs the app's regions); everything stopped by pid on the way out."""
    with start_desktop("x11", workdir) as desktop:
        app = app_class(app_name)(desktop)
        app.start()
        model: ScriptedModel | None = None
        daemon: Daemon | None = None
        try:
            model = ScriptedModel(scenario_for(app))
            daemon = Daemon(desktop.display, model.start(), **options)
            yield app, daemon.start()  # one that fails to answer is still stopped, and its directory removed
        finally:
            if daemon is not None:
                daemon.cleanup()
            if model is not None:
                model.stop()
            app.stop()
