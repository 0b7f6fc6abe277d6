"""Make docs/report-example.png: the report of a real run of the bundled demo, as Chromium shows it.

Everything is real and private to this run: an Xvfb with openbox it picks a
display for, an accessibility bus with the sandbox's demo app on it, the daemon
on a temp socket recording the task's video, the demo submitted as a task spec
(``bench.demo_desktop.SPEC``: its checks judge what the model left), the
scripted model playing ``demo`` (click the blue field, an approval, type,
Enter), ``cuctl report`` and headless Chromium. The picture shows the verdict,
the video's player and the steps naming what they touched. Run once after
changing the report's look::

    .venv/bin/python -m bench.report_example [docs/report-example.png]
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from PIL import Image

from bench.demo_desktop import DemoRun, make_picture
from tests.support.browser import Browser
from tests.support.daemon import cuctl

__all__ = ()

WIDTH = 1280
#: The scripted model answers at once; this long a think before each answer (a real model's is
#: longer) puts the screens between the steps, and the greeting received, in the video.
MODEL_SECONDS = 1.0
#: The video played to its last frame (the greeting received), and the page's height down to the
#: player's marks: the picture ends there; the steps' own screenshots below would only repeat it.
LAST_FRAME = """(async () => {
  const video = document.getElementById("video");
  if (video.readyState < 2) await new Promise((ok, bad) => {
    video.addEventListener("loadeddata", ok, { once: true });
    video.addEventListener("error", () => bad(new Error("video error " + (video.error && video.error.message))));
  });
  // Played to its end, as a person would leave it: the player then shows the last frame, not its loading state.
  video.muted = true;
  video.currentTime = Math.max(0, video.duration - 1);
  const ended = new Promise((ok) => video.addEventListener("ended", ok, { once: true }));
  await video.play();
  await ended;
  await Promise.all([...document.images].map((i) => i.decode().catch(() => null)));
  return { bottom: Math.ceil(document.querySelector("section.video").getBoundingClientRect().bottom + scrollY),
           images: document.images.length, duration: video.duration };
})()"""


def main(argv: list[str]) -> int:
    return make_picture(argv, "report-example.png", _picture, model_seconds=MODEL_SECONDS)


def _picture(run: DemoRun, target: Path) -> None:
    daemon, task_id, work = run.daemon, run.task_id, run.work
    assert cuctl(daemon.socket, "approve", str(run.approval["id"])).returncode == 0
    task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "succeeded", task
    assert task["verdict"]["verdict"] == "passed", task["verdict"]
    page = work / "report.html"
    made = cuctl(daemon.socket, "report", str(task_id), "-o", str(page))
    assert made.returncode == 0, made.stderr
    browser = Browser(work)
    try:
        # Tall enough at first that the player (at most 80% of the window's height) is full width.
        watched = browser.open(page.as_uri(), width=WIDTH, height=1600)
        try:
            seen = watched.page.evaluate(LAST_FRAME)
            watched.page.evaluate("window.scrollTo(0, 0)")
            shot = watched.page.screenshot(clip={"x": 0, "y": 0, "width": WIDTH, "height": seen["bottom"] + 16},
                                           full_page=True)
            problems = watched.report.problems()
        finally:
            watched.close()
    finally:
        browser.close()
    assert not problems, problems
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    image.save(target, optimize=True)
    print(f"{target}: {image.size[0]}x{image.size[1]}, report of task {task_id} ({seen['images']} screenshots, "
          f"a video of {seen['duration']:.1f} s)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
