"""The desktop both example pictures are made on, the task spec they run on it, and the run itself.

A private Xvfb with openbox, a session bus with at-spi2-core's accessibility bus under it,
and the sandbox's GTK demo app on that bus, so that what the model's actions touch has a
name ("Line to send", a text field in "cud demo") in approvals, events and the report.
``make_picture`` is both pictures' ``main``: a private temp folder, that desktop, the daemon
recording video with the scripted model playing ``demo``, and the demo submitted up to its
first approval; the picture's own function takes it from there. Everything is stopped by pid
and removed on the way out.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cud.scripted import ScriptedModel
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.a11y import A11yBus, a11y_env, start_a11y_bus
from tests.support.apps.reporting import SYSTEM_PYTHON
from tests.support.daemon import ROOT, Daemon
from tests.support.desktop import Desktop, start_desktop
from tests.support.recorder import wait_until
from tests.support.xserver import stop_process

__all__ = ("DemoDesktop", "DemoRun", "demo_desktop", "make_picture", "seat_config", "spec_fields")

GREETING = "Hello from cud — ✓ ü €"  # what the bundled ``demo`` scenario types

#: The demo as a task spec: the scenario's prompt, and checks that judge what it left. Only
#: checks that look (element, window, answer), so the seat needs no session; ``reset = false``
#: for the same reason (a reset needs a session to reset).
SPEC = f'''\
prompt = "Type a greeting into the demo app's blue field and press Enter."
max_steps = 10
reset = false
tags = ["demo"]

[[checks]]
name = "the greeting reached the app"
element = {{ app = "cud-demo", role = "label", name = "{GREETING}" }}
[[checks]]
name = "the field is empty again"
element = {{ app = "cud-demo", role = "text", name = "Line to send" }}
text = ""
states = ["editable"]
[[checks]]
name = "the demo app is still open"
window = {{ class = "cud-demo", title = "cud demo" }}
[[checks]]
name = "the model says what it typed"
answer = "re:Hello from cud"
'''


@dataclass
class DemoDesktop:
    desktop: Desktop
    bus: A11yBus

    @property
    def display(self) -> str:
        return self.desktop.display


#: Prices for the pictures only, so the report and the console show a cost (docs/budgets.md): made up
#: for the example, not anyone's prices (cud ships none).
EXAMPLE_PRICES = '\n[budget.prices."gpt-5.4"]\ninput = 2.50\ncached_input = 0.25\noutput = 15.00\n'


def seat_config(demo: DemoDesktop, video: bool = True) -> str:
    """The daemon's config: one seat on the demo's display and bus, the video recorded, example prices."""
    text = f'[[seats]]\nname = "default"\ndisplay = "{demo.display}"\nsession_bus = "{demo.bus.address}"\n'
    return text + ("\n[video]\nenabled = true\n" if video else "") + EXAMPLE_PRICES


def spec_fields(work: Path) -> dict[str, Any]:
    """``submit``'s fields for the demo's spec, read the way ``cuctl submit --spec`` reads one."""
    path = work / "demo.toml"
    path.write_text(SPEC)
    return submit_fields(*load_spec(path))


@contextlib.contextmanager
def demo_desktop(work: Path) -> Iterator[DemoDesktop]:
    """The desktop with the demo app up, shown and on the accessibility bus."""
    with start_desktop("x11", work) as desktop:
        bus = start_a11y_bus(desktop)
        app: subprocess.Popen[bytes] | None = None
        try:
            log = work / "demo.jsonl"
            app = desktop.spawn([SYSTEM_PYTHON, str(ROOT / "sandbox" / "demo_app.py"), "--log", str(log),
                                 "--geometry", "900x420+190+150"], "demo-app.log", env=a11y_env(desktop, bus))
            wait_until(lambda: log.exists() and '"ready"' in log.read_text(), 60, "the demo app")
            yield DemoDesktop(desktop, bus)
        finally:
            if app is not None:
                stop_process(app)
            bus.stop()


@dataclass
class DemoRun:
    """The demo submitted as a task on ``daemon``, its first approval (``approval``) pending."""

    demo: DemoDesktop
    work: Path
    daemon: Daemon
    task_id: int
    approval: dict[str, Any]


def make_picture(argv: list[str], default: str, picture: Callable[[DemoRun, Path], None], *,
                 approval_policy: str | None = None, model_seconds: float = 0.0) -> int:
    """Run the demo up to its first approval and hand it to ``picture`` with the PNG's path.

    The path is ``argv[0]`` or ``docs/<default>``. ``approval_policy`` is the daemon's
    ``--approval`` (its default if None); ``model_seconds`` is the scripted model's think
    before each answer.
    """
    target = Path(argv[0]) if argv else ROOT / "docs" / default
    work = Path(tempfile.mkdtemp(prefix="cud-example-", dir="/tmp"))
    try:
        with demo_desktop(work) as demo:
            model = ScriptedModel("demo", latency=model_seconds)
            daemon = Daemon(demo.display, model.start(), approval=approval_policy, config=seat_config(demo), seats={})
            try:
                daemon.start()
                task_id = daemon.call("submit", **spec_fields(work))["id"]
                picture(DemoRun(demo, work, daemon, task_id, daemon.wait_approval(task_id)), target)
                return 0
            finally:
                daemon.cleanup()
                model.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
