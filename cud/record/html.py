"""A task's record as one self-contained HTML page (``cuctl report``).

The page needs nothing but itself: screenshots and the task's video are
``data:`` URLs, styles are inline, there is no font or image from anywhere else,
and a Content-Security-Policy ``<meta>`` forbids loading anything but ``data:``
images and media and running any script but the video's fixed seek script
(allowed by its hash; see :mod:`cud.record.html_video`), so even a mistake in
escaping could not make the page fetch or run anything. Every string from the task (prompt, model messages, typed text,
errors) is HTML-escaped.

Large tasks stay usable: images load lazily with their size known up front (no
layout jumps), and a step index at the top links to every step's anchor
(``#step-N``).
"""

from __future__ import annotations

import base64
import io
import json
from html import escape
from typing import Any

from PIL import Image

from cud.budget import describe_budgets, describe_cost
from cud.cuctl.output import short
from cud.outcome import task_outcome
from cud.phrases.actions import describe_action
from cud.protocol import FINAL_STATES
from cud.record.html_video import SCRIPT_SOURCE, seek_link, video_section
from cud.record.html_video import STYLE as VIDEO_STYLE
from cud.record.overlay import captions, svg_overlay
from cud.record.reading import Approval, Record, Step, describe_usage, seconds_between, steps
from cud.record.verdict import VERDICT_STYLE, verdict_line, verdict_section
from cud.record.video import Video, find_video, moment, step_moment

__all__ = ("CSP", "MEDIA_TYPES", "render")

#: The media type of a record file, by its extension (also the console's, serving them).
MEDIA_TYPES = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp"}
CSP = ("default-src 'none'; img-src data:; media-src data:; style-src 'unsafe-inline'; "
       f"script-src {SCRIPT_SOURCE}; base-uri 'none'; form-action 'none'")

_STYLE = """
:root { color-scheme: light; --ink: #1c1f24; --dim: #5b6470; --line: #d9dde3; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       background: var(--bg); }
header, main, nav { max-width: 1340px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 10px; }
h2 { font-size: 17px; margin: 0 0 8px; }
h2 a { color: inherit; text-decoration: none; }
.state { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 14px; color: #fff;
         background: #6b7280; vertical-align: 2px; }
.state.succeeded, .state.passed { background: #16803c; } .state.failed, .state.budget_exceeded { background: #c0262d; }
.state.running, .state.awaiting_approval { background: #b45309; } .state.queued { background: #4b5563; }
.state.cancelled, .state.interrupted { background: #6d28d9; } .state.error { background: #b45309; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 0 0 12px; }
dl.facts dt { color: var(--dim); } dl.facts dd { margin: 0; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.error { color: #b3141b; }
.totals { color: var(--dim); }
nav.index { margin-top: 8px; }
nav.index ol { columns: 3 320px; column-gap: 2.5em; margin: 6px 0 16px; padding-left: 2.6em; font-size: 14px; }
nav.index li { break-inside: avoid; overflow-wrap: anywhere; }
nav.index a { color: #1d4ed8; }
section.step { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px;
               margin: 0 0 16px; scroll-margin-top: 8px; }
.body { display: grid; grid-template-columns: minmax(0, 3fr) minmax(280px, 2fr); gap: 0 20px; align-items: start; }
@media (max-width: 900px) { .body { grid-template-columns: minmax(0, 1fr); } }
.when { color: var(--dim); font-weight: normal; font-size: 14px; }
.messages p { margin: 4px 0 8px; padding: 6px 10px; background: #eef4ff; border-left: 3px solid #1d6fe0;
              white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 4px 0 8px; }
.frame { position: relative; display: inline-block; max-width: 100%; line-height: 0;
         border: 1px solid var(--line); }
.frame img { display: block; max-width: 100%; height: auto; }
.frame svg.overlay { position: absolute; left: 0; top: 0; width: 100%; height: 100%; }
figcaption { color: var(--dim); font-size: 13px; margin-top: 4px; }
.captions { margin: 6px 0; padding: 0; list-style: none; }
.captions li { margin: 2px 0; }
.captions code, .actions code { background: #f1f2f4; padding: 1px 5px; border-radius: 4px;
                                 white-space: pre-wrap; overflow-wrap: anywhere; }
.noimage { color: var(--dim); font-style: italic; }
ol.actions { margin: 6px 0; padding-left: 1.8em; }
.ms { color: var(--dim); font-size: 13px; }
.approval { border: 1px solid #f0c36d; background: #fff8e6; border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.approval.approved { border-color: #86c79b; background: #eefaf1; }
.approval.denied, .approval.timed_out { border-color: #e7a3a6; background: #fdf0f0; }
.timings { color: var(--dim); font-size: 13px; margin-top: 6px; }
details.raw pre { background: #fff; border: 1px solid var(--line); padding: 10px; overflow: auto; font-size: 12px; }
"""


def render(record: Record) -> str:
    task = record.task
    all_steps = steps(record)
    video = find_video(record)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>cud task {int(task['id'])} — {escape(_badge(task))}</title>",
        f"<style>{_STYLE}{VERDICT_STYLE}{VIDEO_STYLE if video else ''}</style></head><body>",
        _header(task, all_steps),
        _index(all_steps),
        "<main>",
        verdict_section(task, record.files),
        video_section(record, video, all_steps) if video else "",
        *(_step(record, step, video) for step in all_steps),
        _after(record, all_steps),
        _raw(record),
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p)


# -- header -------------------------------------------------------------------------------
def _badge(task: dict[str, Any]) -> str:
    """What the report says first (its title, its top badge): an ended task's outcome (cud.outcome) when it was
    judged or cud could not do its part (a task that succeeded may have failed its checks; its state is then one
    of the facts), else its state."""
    state = str(task["state"])
    if state not in FINAL_STATES:
        return state
    verdict = (task.get("verdict") or {}).get("verdict")
    outcome = task_outcome(state, verdict, task.get("error"))
    return outcome if verdict is not None or outcome == "error" else state


def _header(task: dict[str, Any], all_steps: list[Step]) -> str:
    facts: list[tuple[str, str]] = [
        ("Prompt", f'<span class="text">{escape(str(task["prompt"]))}</span>'),
        ("Model", escape(str(task["model"]))),
        # Records from before seats (cud 0.1) have none: they ran on the one display.
        ("Seat", escape(str(task.get("seat") or "default")) + (" (pinned)" if task.get("pinned") else "")),
        ("Submitted by", _person(task.get("submitter"))),
        ("Approval mode", escape(str(task.get("approval", "?")))),
        ("Created", escape(str(task.get("created_at") or "-"))),
        ("Started", escape(str(task.get("started_at") or "-"))),
        ("Finished", escape(str(task.get("finished_at") or "-"))),
    ]
    duration = seconds_between(task.get("started_at"), task.get("finished_at"))
    if duration is not None:
        facts.append(("Duration", f"{duration:.1f} s"))
    facts.append(("Steps", f"{len(all_steps)} of at most {int(task.get('max_steps') or 0)}"))
    if task.get("final_message") is not None:
        facts.append(("Final message", f'<span class="text">{escape(str(task["final_message"]))}</span>'))
    error = task.get("error")
    if error:
        details = json.dumps(error.get("details") or {}, ensure_ascii=False)
        facts.append(("Error", f'<span class="error text">{escape(str(error.get("kind")))}: '
                               f'{escape(str(error.get("message")))}</span>'
                               + (f' <code>{escape(details)}</code>' if details != "{}" else "")))
    if task.get("key"):  # records from before idempotency keys (and tasks without one) have none
        facts.append(("Key", f'<span class="text">{escape(str(task["key"]))}</span>'))
    if task.get("reason"):
        facts.append(("Reason", f'<span class="text">{escape(str(task["reason"]))}</span>'))
    if task.get("verdict"):
        facts.append(("Verdict", f'<a href="#verdict">{escape(verdict_line(task["verdict"]))}</a>'))
    if (task.get("spec") or {}).get("tags"):
        facts.append(("Tags", escape(", ".join(task["spec"]["tags"]))))
    facts.append(("Totals", _totals(all_steps)))
    facts.append(("Model usage", f'<span class="totals">{escape(describe_usage(task.get("usage")))}</span>'))
    facts.append(("Cost", f'<span class="totals">{escape(describe_cost(task.get("cost")))}</span> (budgets: '
                          f'{escape(describe_budgets(task))})'))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    state, badge = str(task["state"]), _badge(task)
    if badge != state:
        facts.insert(0, ("State", escape(state)))
        rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return (f'<header><h1>Task {int(task["id"])} <span class="state {escape(badge)}">{escape(badge)}</span></h1>'
            f'<dl class="facts">{rows}</dl></header>')


def _totals(all_steps: list[Step]) -> str:
    sums = {key: sum(s.timings.get(key, 0.0) for s in all_steps)
            for key in ("total_ms", "model_ms", "driver_ms", "approval_ms", "overhead_ms")}
    actions = sum(len(s.actions) for s in all_steps)
    approvals = sum(len(s.approvals) for s in all_steps)
    return (f'<span class="totals">{actions} actions, {approvals} approvals; '
            f'{sums["total_ms"] / 1000:.2f} s in steps: model {sums["model_ms"] / 1000:.2f} s, '
            f'driver {sums["driver_ms"] / 1000:.2f} s, approval wait {sums["approval_ms"] / 1000:.2f} s, '
            f'cud {sums["overhead_ms"] / 1000:.3f} s</span>')


def _person(person: Any) -> str:
    if not isinstance(person, dict):
        return "-"
    return f"{escape(str(person.get('name')))} (uid {escape(str(person.get('uid')))})"


# -- index -----------------------------------------------------------------------------------
def _index(all_steps: list[Step]) -> str:
    if not all_steps:
        return '<nav class="index"><p class="noimage">No steps were recorded.</p></nav>'
    items = "".join(
        f'<li value="{s.number}"><a href="#step-{s.number}">{escape(_summary(s))}</a></li>' for s in all_steps
    )
    return f'<nav class="index" aria-label="steps"><h2>Steps</h2><ol>{items}</ol></nav>'


def _summary(step: Step) -> str:
    if step.actions:
        text = ", ".join(describe_action(a.get("action"), a.get("target"), 40) for a in step.actions[:2])
        return text + (f" (+{len(step.actions) - 2} more)" if len(step.actions) > 2 else "")
    if step.approvals and not step.ended:
        return f"approval {step.approvals[-1].id} ({step.approvals[-1].outcome or 'pending'})"
    if step.screenshot:
        return "looked at the screen"
    if step.messages:
        return "said: " + short(step.messages[0], 60)
    return "model turn"


# -- one step ----------------------------------------------------------------------------------
def _step(record: Record, step: Step, video: Video | None = None) -> str:
    """A step: the screen with its marks on the left; messages, actions, approvals and timings beside it."""
    n = step.number
    when = f' <span class="when">{escape(step.at or "")}{"" if step.ended else " · did not finish"}</span>'
    when += seek_link(step_moment(video, step), f"step {n} in the video")
    left = [_figure(record, step.saw, step.actions, f"The screen the model saw before step {n}")]
    notes = captions(step.actions)
    if notes:
        items = "".join(
            f"<li>{number}. {kind}" + (f" <code>{escape(text)}</code>" if text else "") + "</li>"
            for number, kind, text in notes
        )
        left.append(f'<ul class="captions">{items}</ul>')
    right = []
    if step.messages:
        right.append('<div class="messages">' + "".join(f"<p>{escape(m)}</p>" for m in step.messages) + "</div>")
    right.append(_actions(step))
    right.extend(_approval(a, video) for a in step.approvals)
    for diagnostic in step.diagnostics:
        text = json.dumps(diagnostic, ensure_ascii=False)
        right.append(f'<p class="ms">diagnostic: <code>{escape(text)}</code></p>')
    if step.timings:
        t = step.timings
        right.append(
            f'<p class="timings">{t.get("total_ms", 0):.0f} ms in all: model {t.get("model_ms", 0):.0f} ms, '
            f'driver {t.get("driver_ms", 0):.0f} ms, approval wait {t.get("approval_ms", 0):.0f} ms, '
            f'cud {t.get("overhead_ms", 0):.1f} ms</p>'
        )
    if step.usage:
        cost = f"; cost {describe_cost(step.cost)}" if step.cost is not None else ""
        right.append(f'<p class="timings usage">{escape(describe_usage(step.usage) + cost)}</p>')
    for budget in step.budgets:
        right.append(f'<p class="budget {escape(str(budget["kind"]))}">{escape(str(budget["kind"]))}: '
                     f'{escape(str(budget.get("message")))}</p>')
    return (f'<section class="step" id="step-{n}"><h2><a href="#step-{n}">Step {n}</a>{when}</h2>'
            f'<div class="body"><div>{"".join(left)}</div><div>{"".join(right)}</div></div></section>')


def _figure(record: Record, name: str | None, actions: list[dict[str, Any]], alt: str) -> str:
    if name is None:
        return '<p class="noimage">The model had not seen the screen yet (the prompt only).</p>'
    data = record.files.get(name)
    if data is None:
        return f'<p class="noimage">Screenshot {escape(name)} is not in the record (pruned or unreadable).</p>'
    extension = name.rsplit(".", 1)[-1]
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except Exception:  # any undecodable file is reported on the page, not fatal
        return f'<p class="noimage">Screenshot {escape(name)} cannot be decoded.</p>'
    url = f"data:{MEDIA_TYPES.get(extension, 'image/png')};base64,{base64.b64encode(data).decode()}"
    overlay = svg_overlay(actions, width, height)
    return (f'<figure><div class="frame"><img src="{url}" width="{width}" height="{height}" loading="lazy" '
            f'decoding="async" alt="{escape(alt)}">{overlay}</div>'
            f"<figcaption>{escape(name)} · {width}×{height}</figcaption></figure>")


def _actions(step: Step) -> str:
    if not step.actions:
        if step.screenshot:
            what = "took a screenshot"
        elif step.approvals:
            what = "no action ran"
        elif step.ended and step.messages:
            what = "answered with a message"
        else:
            what = "no actions"
        return f'<p class="ms">{what}</p>'
    items = []
    for entry in step.actions:
        ms = entry.get("ms")
        timing = f' <span class="ms">{ms:.0f} ms</span>' if isinstance(ms, (int, float)) else ""
        items.append(f"<li><code>{escape(describe_action(entry.get('action'), entry.get('target'), 200))}</code>"
                     f"{timing}</li>")
    return f'<ol class="actions">{"".join(items)}</ol>'


def _approval(approval: Approval, video: Video | None = None) -> str:
    outcome = approval.outcome or "pending"
    checks = "; ".join(f"{c.get('code')}: {c.get('message')}" for c in approval.checks)
    targets = approval.targets or [None] * len(approval.actions)
    actions = ", ".join(describe_action(a, t, 160) for a, t in zip(approval.actions, targets, strict=False))
    waited = seconds_between(approval.requested_at, approval.decided_at)
    decided = ""
    if approval.outcome is not None:
        by = f" by {_person(approval.by)}" if approval.by else ""
        after = f" after {waited:.1f} s" if waited is not None else ""
        because = f" — {escape(str(approval.reason))}" if approval.reason else ""
        decided = f"<br><b>{escape(outcome)}</b>{by}{after}{because}"
    else:
        decided = f"<br><b>pending</b> (deadline {escape(str(approval.deadline_at))}) — cuctl approve {approval.id}"
    return (f'<div class="approval {escape(outcome)}">Approval {approval.id} ({escape(approval.kind)})'
            + seek_link(moment(video, approval.requested_at), f"approval {approval.id} in the video")
            + (f": {escape(checks)}" if checks else "")
            + (f"<br>for <code>{escape(actions)}</code>" if actions else "")
            + f"{decided}</div>")


def _after(record: Record, all_steps: list[Step]) -> str:
    """The last screenshot if no step's model saw it (a failed or stopped task's final screen)."""
    seen = {s.saw for s in all_steps}
    last = next((s.screenshot for s in reversed(all_steps) if s.screenshot), None)
    if last is None or last in seen:
        return ""
    return (f'<section class="step" id="after"><h2><a href="#after">The screen after the last step</a></h2>'
            f"{_figure(record, last, [], 'The screen after the last step')}</section>")


def _raw(record: Record) -> str:
    lines = "\n".join(json.dumps(e, ensure_ascii=False) for e in record.events)
    return (f'<details class="raw"><summary>All {len(record.events)} events</summary>'
            f"<pre>{escape(lines)}</pre></details>")
