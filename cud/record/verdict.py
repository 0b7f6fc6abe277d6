"""A spec's verdict and collected files in words: for ``cuctl show``, ``follow`` and the report.

The daemon judged; this only says it. One line for the verdict
(``passed, score 1.00: 3 of 3 checks``), one per check with its why, and the
report's section of them, placed beside the video.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from cud.outcome import outcome_of_check

__all__ = ("artifact_line", "check_line", "verdict_line", "verdict_section", "VERDICT_STYLE")

VERDICT_STYLE = """
section.verdict { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px;
                  margin: 0 0 16px; }
section.verdict h2 .state.passed { background: #16803c; } section.verdict h2 .state.failed { background: #c0262d; }
section.verdict h2 .state.error { background: #b45309; }
table.checks { border-collapse: collapse; width: 100%; font-size: 14px; }
table.checks td, table.checks th { border-top: 1px solid var(--line); padding: 4px 8px; text-align: left;
                                   vertical-align: top; }
table.checks td.mark.passed { color: #16803c; } table.checks td.mark.failed { color: #c0262d; }
table.checks td.mark.error { color: #b45309; }
section.verdict pre { background: var(--bg); padding: 6px; overflow: auto; max-height: 240px; font-size: 12px; }
"""
#: Collected text files up to this size are shown in the report; larger or binary ones are listed.
INLINE_BYTES = 64 * 1024
#: A check's mark by its outcome (cud.outcome): ``!`` for one that could not look.
MARKS = {"passed": "✓", "failed": "✗", "error": "!"}


def verdict_line(verdict: dict[str, Any] | None) -> str:
    """``passed, score 1.00: 3 of 3 checks`` (``-`` when the task has no verdict); checks that could not look
    are counted apart (``2 of 3 checks passed, 1 could not look``), and a spec's ``pass_if = "any"`` is said, and
    a final message that failed it (``fail_if_answer``)."""
    if not verdict:
        return "-"
    errors = int(verdict.get("errors", 0))
    total = int(verdict.get("passed", 0)) + int(verdict.get("failed", 0)) + errors
    return (f"{verdict.get('verdict')}, score {float(verdict.get('score', 0)):.2f}: {verdict.get('passed')} of "
            f"{total} checks passed" + (" (one is enough: pass_if any)" if verdict.get("pass_if") == "any" else "")
            + (f", {errors} could not look" if errors else "")
            + f" (the model's part ended {verdict.get('state')})"
            + (f"; failed by its final message: {verdict['answer_failed']}" if verdict.get("answer_failed") else ""))


def check_line(check: dict[str, Any]) -> str:
    """``✓ name (kind, weight 1): why`` for one check's result (``✗`` failed, ``!`` could not look)."""
    mark = MARKS[outcome_of_check(check)]
    weight = float(check.get("weight", 1))
    weighted = f", weight {weight:g}" if weight != 1 else ""
    return f"{mark} {check.get('name')} ({check.get('kind')}{weighted}): {check.get('why')}"


def artifact_line(artifact: dict[str, Any]) -> str:
    if artifact.get("error"):
        return f"{artifact.get('path')}: not kept ({artifact['error']})"
    return f"{artifact.get('path')} ({artifact.get('bytes')} bytes, sha256 {str(artifact.get('sha256'))[:12]}…)"


def verdict_section(task: dict[str, Any], files: dict[str, bytes]) -> str:
    """The report's section: the verdict, each check (expected, observed, why), the collected files."""
    verdict, artifacts = task.get("verdict"), task.get("artifacts") or []
    if not verdict and not artifacts and not task.get("spec"):
        return ""
    parts = ['<section class="verdict" id="verdict">']
    if verdict:
        state = escape(str(verdict.get("verdict")))
        parts.append(f'<h2><a href="#verdict">Verdict</a> <span class="state {state}">{state}</span> '
                     f'<span class="totals">{escape(verdict_line(verdict))}</span></h2>')
        rows = "".join(
            f'<tr><td class="mark {outcome_of_check(c)}">{MARKS[outcome_of_check(c)]}</td>'
            f'<td>{escape(str(c.get("name")))}<br><span class="ms">{escape(str(c.get("kind")))}, weight '
            f'{float(c.get("weight", 1)):g}</span></td><td>{escape(str(c.get("expected")))}</td>'
            f'<td class="text">{escape(_observed(c.get("observed")))}</td><td>{escape(str(c.get("why")))}</td></tr>'
            for c in verdict.get("checks", []))
        parts.append('<table class="checks"><tr><th></th><th>check</th><th>expected</th><th>observed</th>'
                     f"<th>why</th></tr>{rows}</table>")
    elif task.get("spec"):
        parts.append('<h2><a href="#verdict">Verdict</a></h2><p class="noimage">Not judged: the spec has no checks, '
                     "or the task ended before its checks ran.</p>")
    for artifact in artifacts:
        parts.append(_artifact(artifact, files.get(f"artifacts/{artifact.get('path')}")))
    parts.append("</section>")
    return "".join(parts)


def _observed(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _artifact(artifact: dict[str, Any], data: bytes | None) -> str:
    line = f"<p>Collected: <code>{escape(artifact_line(artifact))}</code></p>"
    if data is None or len(data) > INLINE_BYTES:
        return line
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return line
    return f"<details><summary>{line}</summary><pre>{escape(text)}</pre></details>"
