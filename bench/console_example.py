"""Make docs/console-example.png: the console during a pending approval of a real run of the demo.

Everything is real and private to this run, as in ``bench.report_example``: an
Xvfb with openbox it picks a display for, the sandbox's demo app on an
accessibility bus, the daemon on a temp socket recording video (approval policy
``actions``, so the model's first click waits for a person), the demo submitted
as a task spec, the scripted model playing ``demo``, ``cuctl console`` and
Debian's Chromium through Playwright, showing the page as a person would: the
approval naming the element the click would touch, with its screenshot and the
click's mark, the seat's live screen, the task list and the task's events. Run
after changing the console's look::

    .venv/bin/python -m bench.console_example [docs/console-example.png]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.demo_desktop import DemoDesktop, demo_desktop, seat_config, spec_fields
from cud.scripted import ScriptedModel
from tests.support.browser import Browser
from tests.support.console import Console
from tests.support.daemon import ROOT, Daemon

__all__ = ()

WIDTH, HEIGHT = 1280, 1500


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "docs" / "console-example.png"
    work = Path(tempfile.mkdtemp(prefix="cud-example-", dir="/tmp"))
    try:
        with demo_desktop(work) as demo:
            return _picture(demo, work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _picture(demo: DemoDesktop, work: Path, target: Path) -> int:
    model = ScriptedModel("demo")
    daemon = Daemon(demo.display, model.start(), approval="actions", config=seat_config(demo), seats={})
    console: Console | None = None
    browser: Browser | None = None
    try:
        daemon.start()
        task_id = daemon.call("submit", **spec_fields(work))["id"]
        approval = daemon.wait_approval(task_id)
        assert approval["targets"][0]["element"]["name"] == "Line to send", approval  # the console names it
        console = Console(daemon.socket, work)
        browser = Browser(work)
        watched = browser.open(console.url, width=WIDTH, height=HEIGHT)
        page = watched.page
        page.locator(f'article.approval[data-id="{approval["id"]}"]').wait_for()
        page.wait_for_function("""() => [...document.querySelectorAll("article.approval img")]
                                  .every(i => i.complete && i.naturalWidth > 0)
                                  && Number(document.querySelector("article.seat").dataset.frames) > 1""")
        # What the task does now comes from following it, a poll or two after the page opened.
        page.wait_for_function(f"""() => document.querySelector('#tasks tr[data-id="{task_id}"] td:last-child')
                                   ?.textContent.startsWith("waiting for approval")""")
        page.locator(f'#tasks tr[data-id="{task_id}"]').click()
        page.wait_for_selector("#events li[data-kind='approval_requested']")
        page.screenshot(path=str(target), full_page=True)
        problems = watched.report.problems() + watched.report.foreign(console.origin)
        assert not problems, problems
        print(f"{target}: the console at {WIDTH} px wide during approval {approval['id']} of task {task_id}")
        return 0
    finally:
        if browser is not None:
            browser.close()
        if console is not None:
            console.stop()
        daemon.cleanup()
        model.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
