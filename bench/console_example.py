"""Make docs/console-example.png: the console during a pending approval of a real run of the demo.

Everything is real and private to this run, as in ``bench.report_example``: an
Xvfb with openbox it picks a display for, the sandbox's demo app on an
accessibility bus, the daemon on a temp socket recording video (approval mode
``actions``, so the model's first click waits for a person), the demo submitted
as a task spec, the scripted model playing ``demo``, ``cuctl console`` and
Debian's Chromium through Playwright, showing the page as a person would: the
approval naming the element the click would touch, with its screenshot and the
click's mark, the seat's live screen, the task list and the task's events. Run
after changing the console's look::

    .venv/bin/python -m bench.console_example [docs/console-example.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.demo_desktop import DemoRun, make_picture
from tests.support.browser import Browser
from tests.support.console import Console

__all__ = ()

WIDTH, HEIGHT = 1280, 1500


def main(argv: list[str]) -> int:
    return make_picture(argv, "console-example.png", _picture, approval_policy="actions")


def _picture(run: DemoRun, target: Path) -> None:
    approval, task_id = run.approval, run.task_id
    assert approval["targets"][0]["element"]["name"] == "Line to send", approval  # the console names it
    console: Console | None = None
    browser: Browser | None = None
    try:
        console = Console(run.daemon.socket, run.work)
        browser = Browser(run.work)
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
    finally:
        if browser is not None:
            browser.close()
        if console is not None:
            console.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
