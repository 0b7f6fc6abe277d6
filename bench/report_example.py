"""Make docs/report-example.png: the report of a real run of the bundled demo, as Chromium shows it.

Everything is real and private to this run: an Xvfb it picks a display for,
the sandbox's demo app, the daemon on a temp socket, the scripted model
playing ``demo`` (click the blue field, an approval, type, Enter), ``cuctl
report`` and headless Chromium. Run once after changing the report's look::

    .venv/bin/python -m bench.report_example [docs/report-example.png]
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from cud.scripted import ScriptedModel
from tests.support.browser import Browser
from tests.support.daemon import ROOT, Daemon, cuctl
from tests.support.recorder import wait_until
from tests.support.xserver import start_xvfb, stop_process

__all__ = ()

PROMPT = "Type a greeting into the demo app's blue field and press Enter."


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "docs" / "report-example.png"
    work = Path(tempfile.mkdtemp(prefix="cud-example-", dir="/tmp"))
    xvfb = start_xvfb(work)
    log = work / "demo.jsonl"
    app = subprocess.Popen(
        [sys.executable, str(ROOT / "sandbox" / "demo_app.py"), "--log", str(log), "--geometry", "900x420+190+150"],
        env={"DISPLAY": xvfb.display, "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
    )
    model = ScriptedModel("demo")
    daemon = Daemon(xvfb.display, model.start())
    try:
        wait_until(lambda: log.exists() and '"ready"' in log.read_text(), 30, "the demo app")
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
        stop_process(app)
        xvfb.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
