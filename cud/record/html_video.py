"""The report's video: the player, a row of step and approval marks under it, and links that seek.

The page stays self-contained: the video is a ``data:`` URL (the report's CSP
allows ``data:`` media and nothing else), and the one script, which turns a
click on a mark or a step's time into a seek, is fixed text allowed by its hash.
Without it (scripts off) every such link still leads to the player.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

from cud.phrases.actions import describe
from cud.record.reading import Record, Step
from cud.record.video import Video, moment, step_moment

__all__ = ("SCRIPT_SOURCE", "clock", "seek_link", "video_section")

SCRIPT = """document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-t]");
  const video = document.getElementById("video");
  if (!link || !video) return;
  event.preventDefault();
  video.currentTime = Number(link.dataset.t);
  video.scrollIntoView({ block: "nearest" });
});"""
#: What the report's CSP allows to run: this script and nothing else.
SCRIPT_SOURCE = "'sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode() + "'"

STYLE = """
section.video { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px;
                margin: 0 0 16px; }
section.video video { display: block; width: 100%; max-height: 80vh; background: #000; }
.timeline { position: relative; height: 26px; margin: 6px 0 2px; border-top: 2px solid var(--line); }
.timeline a { position: absolute; top: 3px; transform: translateX(-50%); font-size: 12px; line-height: 18px;
              min-width: 18px; padding: 0 4px; text-align: center; border-radius: 9px; background: #1d4ed8;
              color: #fff; text-decoration: none; }
.timeline a.approval { background: #b45309; top: -11px; }
a.seek { font-size: 13px; color: #1d4ed8; }
"""


def clock(seconds: float) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}:{rest:04.1f}"


def seek_link(seconds: float | None, what: str) -> str:
    """A link to ``seconds`` into the video ('' if the moment cannot be placed)."""
    if seconds is None:
        return ""
    return (f' <a class="seek" href="#video" data-t="{seconds:.3f}" title="{escape(what)}">'
            f"▶ {clock(seconds)}</a>")


def video_section(record: Record, video: Video, all_steps: list[Step]) -> str:
    if not video.name:
        return (f'<section class="video" id="video"><h2>Video</h2><p class="error text">The recorder failed: '
                f'{escape(video.failure or "?")}</p></section>')
    data = record.files[video.name]
    url = f"data:{video.media_type};base64,{base64.b64encode(data).decode()}"
    notes = []
    if not video.complete:
        notes.append("The recording was cut short (the daemon or ffmpeg stopped); it plays up to its last "
                     "whole second.")
    if video.failure:
        notes.append(f"The recorder failed: {escape(video.failure)}")
    marks = []
    length = video.seconds or 1.0
    for step in all_steps:
        at = step_moment(video, step)
        if at is not None:
            title = f"Step {step.number}: " + (", ".join(describe(a.get("action"), 40) for a in step.actions[:2])
                                               or "model turn")
            marks.append(f'<a href="#video" data-t="{at:.3f}" style="left: {min(at / length, 1) * 100:.2f}%" '
                         f'title="{escape(title)}">{step.number}</a>')
        for approval in step.approvals:
            asked = moment(video, approval.requested_at)
            if asked is not None:
                marks.append(f'<a class="approval" href="#video" data-t="{asked:.3f}" '
                             f'style="left: {min(asked / length, 1) * 100:.2f}%" '
                             f'title="Approval {approval.id} asked">A{approval.id}</a>')
    facts = f"{escape(video.name)} · {video.seconds:.1f} s · {len(data) / 1e6:.2f} MB"
    return (f'<section class="video"><h2>Video</h2>'
            f'<video id="video" controls preload="metadata" src="{url}"></video>'
            f'<div class="timeline" aria-label="steps in the video">{"".join(marks)}</div>'
            f'<p class="ms">{facts}. Each step\'s ▶ time seeks to where its actions began.</p>'
            + "".join(f'<p class="error">{n}</p>' for n in notes)
            + f"<script>{SCRIPT}</script></section>")
