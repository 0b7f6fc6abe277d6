"""``index.html`` of a suite's output folder: the summary and every attempt, linking its task's report and video.

One static page, no script; every value is escaped (check whys and errors quote what the model
and the seat produced). Links are relative, so the folder can be moved or served as it is.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cud.suite.results import Results

__all__ = ("write_index",)

_STYLE = """body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.passed{color:#060}.failed{color:#a00}.running,.pending,.retry{color:#850}small{color:#555}"""


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _rate(row: dict[str, Any]) -> str:
    if row["pass_rate"] is None:
        return "-"
    low, high = row["interval95"]
    return f"{row['pass_rate']:.0%} [{low:.0%}, {high:.0%}]"


def write_index(results: Results, folder: Path) -> None:
    summary = results.summary()
    rows = []
    for row in [*summary["specs"], summary["total"]]:
        rows.append("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in (
            row["spec"], row["runs"], row["passed"], _rate(row), row["mean_steps"], row["mean_tokens"],
            row["mean_seconds"])) + "</tr>")
    attempts = []
    for a in results.attempts:
        report = f'<a href="{_e(a.report)}">report</a>' if a.report else "-"
        video = f'<a href="{_e(a.video)}">video</a>' if a.video else "-"
        why = "<br>".join(_e(line) for line in a.failures()) if a.judged and not a.passed else ""
        attempts.append(f'<tr><td>{_e(a.spec)}</td><td>{a.repeat + 1}</td><td>{a.attempt}</td>'
                        f'<td>{_e(a.task_id)}</td><td>{_e(a.seat)}</td><td>{_e(a.state)}</td>'
                        f'<td class="{_e(a.outcome)}">{_e(a.outcome)}</td><td>{_e(a.score)}</td>'
                        f'<td>{report} {video}</td><td><small>{why}</small></td></tr>')
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cuctl eval: {_e(results.suite.get('started_at'))}</title>
<style>{_STYLE}</style></head><body>
<h1>cuctl eval</h1>
<p>Started {_e(results.suite.get('started_at'))}; {len(results.suite['specs'])} specs, repeat
{_e(results.suite['repeat'])}; results in <a href="results.json">results.json</a>.
Pass rates with a 95% Wilson score interval.</p>
<table><tr><th>spec</th><th>runs</th><th>passed</th><th>pass rate [95%]</th><th>mean steps</th>
<th>mean tokens</th><th>mean seconds</th></tr>
{''.join(rows)}</table>
<h2>Every attempt</h2>
<table><tr><th>spec</th><th>repeat</th><th>attempt</th><th>task</th><th>seat</th><th>state</th><th>outcome</th>
<th>score</th><th>record</th><th>why it failed</th></tr>
{''.join(attempts)}</table></body></html>
"""
    tmp = folder / ".index.html.part"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(folder / "index.html")
