"""Make docs/report-example.png: the report of a real run of the bundled demo, as Chromium shows it.

Everything is real and private to this run: an Xvfb it picks a display for,
the sandbox's demo app, the daemon on a temp socket, the scripted model
playing ``demo`` (click the blue field, an approval, type, Enter), ``cuctl
report`` and headless Chromium. Run once after changing the report's look::

    .venv/bin/python -m bench.report_example [docs/report-example.png]
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

from PIL import Image

from bench.demo_desktop import PROMPT, demo_desktop
from cud.scripted import ScriptedModel
from tests.support.browser import Browser
from tests.support.daemon import ROOT, Daemon, cuctl
from tests.support.xserver import XServer

__all__ = ()



def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "docs" / "report-example.png"
    work = Path(tempfile.mkdtemp(prefix="cud-example-", dir="/tmp"))
    with demo_desktop(work) as xvfb:
        return _picture(xvfb, work, target)


def _picture(xvfb: XServer, work: Path, target: Path) -> int:
    model = ScriptedModel("demo")
    daemon = Daemon(xvfb.display, model.start())
    try:
        daemon.start()
        task_id = daemon.call("submit", prompt=PROMPT)["id"]
        approval = daemon.wait_approval(task_id)
        assert cuctl(daemon.socket, "approve", str(approval["id"])).returncode == 0
        task = daemon.wait_state(task_id, "succeeded", "failed")
        assert task["state"] == "succeeded", task
        page = work / "report.html"
        made = cuctl(daemon.socket, "report", str(task_id), "-o", str(page))
        assert made.returncode == 0, made.stderr
        browser = Browser(work)
        try:
            seen = browser.inspect(page.as_uri(), "document.images.length", width=1280, screenshot_height=1760)
        finally:
            browser.close()
        assert not seen.problems(), seen.problems()
        image = Image.open(io.BytesIO(seen.screenshot)).convert("RGB")
        image.save(target, optimize=True)
        print(f"{target}: {image.size[0]}x{image.size[1]}, report of task {task_id} ({seen.value} screenshots)")
        return 0
    finally:
        daemon.cleanup()
        model.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
