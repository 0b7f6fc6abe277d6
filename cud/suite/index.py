"""``index.html`` of a suite's output folder: the summary and every attempt, linking its task's report and video.

One static page, no script; every value is escaped (check whys and errors quote what the model
and the seat produced). Links are relative, so the folder can be moved or served as it is. Numbers
are for people, as in ``cuctl eval``'s table (cud.suite.words): scores to two decimals, money as
money; ``error`` (cud could not tell) has its own column beside passed and failed. An OSWorld suite's
summary is per domain (its tasks, how many converted), and each task that did not convert is an
attempt row whose outcome says so, with why. A suite of several models has a model column in both
tables: each model's rows and its total, then the total over all models.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cud.budget import describe_cost
from cud.suite.results import Results
from cud.suite.words import score_words, summary_table

__all__ = ("write_index",)

_STYLE = """body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.passed{color:#060}.failed{color:#a00}.error{color:#b45309}.running,.pending{color:#850}small{color:#555}
td.n{text-align:right}"""


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _osworld_words(results: Results) -> str:
    """What an OSWorld suite's summary means (its rows are domains), and how many tasks did not convert."""
    if "domains" not in results.suite:
        return ""
    missing = len(results.suite.get("not_converted", ()))
    return (f"<br>OSWorld tasks, per domain: <em>runs</em> are the converted tasks'; {missing} task(s) did not convert "
            f"and never ran (their outcome: error, not converted; why, in their rows below).")


def write_index(results: Results, folder: Path) -> None:
    summary = results.summary()
    rows = []
    columns, table = summary_table(summary)
    for cells in table:
        rows.append(f"<tr><td>{_e(cells[0])}</td>" + "".join(f'<td class="n">{_e(v)}</td>' for v in cells[1:])
                    + "</tr>")
    several = results.models != [None]
    attempts = []
    for a in results.attempts:
        report = f'<a href="{_e(a.report)}">report</a>' if a.report else "-"
        video = f'<a href="{_e(a.video)}">video</a>' if a.video else "-"
        why = "<br>".join(_e(line) for line in a.failures()) if a.ended and not a.passed else ""
        outcome = a.outcome + (", retried" if a.ended and not a.judged else "") + (
            ", not converted" if a.not_converted else "")
        model = f"<td>{_e(a.model)}</td>" if several else ""
        attempts.append(f'<tr>{model}<td>{_e(a.spec)}</td><td>{a.repeat + 1}</td><td>{a.attempt}</td>'
                        f'<td>{_e(a.task_id)}</td><td>{_e(a.seat)}</td><td>{_e(a.state)}</td>'
                        f'<td class="{_e(a.outcome)}">{_e(outcome)}</td><td class="n">{_e(score_words(a.score))}</td>'
                        f'<td class="n">{_e("-" if a.cost is None else describe_cost(a.cost))}</td>'
                        f'<td>{report} {video}</td><td><small>{why}</small></td></tr>')
    headers = "".join(f"<th>{_e(h.lower())}</th>" for h in columns)
    models = "" if not several else " on models " + ", ".join(_e(m) for m in results.models)
    model_header = "<th>model</th>" if several else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cuctl eval: {_e(results.suite.get('started_at'))}</title>
<style>{_STYLE}</style></head><body>
<h1>cuctl eval</h1>
<p>Started {_e(results.suite.get('started_at'))}; {len(results.suite['specs'])} specs{models}, repeat
{_e(results.suite['repeat'])}; results in <a href="results.json">results.json</a>.
Pass rates over the runs told (passed or failed) with a 95% Wilson score interval; <em>error</em>: cud or the
infrastructure could not do its part, so nobody can tell (retried up to {_e(results.retry_errors)} more time(s)).
Steps, tokens and seconds are means per run; cost is every attempt's.{_osworld_words(results)}</p>
<table><tr>{headers}</tr>
{''.join(rows)}</table>
<h2>Every attempt</h2>
<table><tr>{model_header}<th>spec</th><th>repeat</th><th>attempt</th><th>task</th><th>seat</th><th>state</th><th>outcome</th>
<th>score</th><th>cost</th><th>record</th><th>why it failed or errored</th></tr>
{''.join(attempts)}</table></body></html>
"""
    tmp = folder / ".index.html.part"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(folder / "index.html")
