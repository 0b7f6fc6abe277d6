"""``cuctl eval --junit FILE``: the suite as JUnit XML, which CI systems read, written with junitparser.

One ``<testsuite name="cuctl eval">``; one ``<testcase>`` per spec-run (its judged attempt):
``classname`` is the spec, ``name`` ``repeat N``, ``time`` the task's run time. A failed run has
one ``<failure>`` whose message is its first reason and whose text lists every failed check's
why (or the task's end); a run that ended ``error`` (cud or the infrastructure could not do its
part: cud.outcome) has one ``<error>`` instead, the same way, so a CI system tells "the app
failed" from "cud could not tell". Its task id, seat, attempts and each attempt's outcome are
``<properties>``. A spec-run not judged (the suite was stopped) is ``<skipped>``: the file never
claims a result it has not seen. The testsuite's ``tests``, ``failures``, ``errors`` and
``skipped`` count them. A suite of several models (``--model a,b``) has one ``<testsuite>`` per
model, ``name="cuctl eval: MODEL"``, each with that model's spec-runs, and a ``model`` property.
"""

from __future__ import annotations

from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite

from cud.suite.results import Results, SpecRun

__all__ = ("write_junit",)


def write_junit(results: Results, path: Path) -> None:
    xml = JUnitXml()
    runs = results.spec_runs()
    for model in results.models:
        xml.add_testsuite(_testsuite("cuctl eval" if model is None else f"cuctl eval: {model}",
                                     [r for r in runs if r.model == model]))
    tmp = path.with_name(f".{path.name}.part")
    xml.write(str(tmp), pretty=True)
    tmp.replace(path)


def _testsuite(name: str, runs: list[SpecRun]) -> TestSuite:
    """One ``<testsuite>``: a testcase per spec-run (the suite's, or one model's of a suite of several)."""
    suite = TestSuite(name)
    for run in runs:
        last = run.last
        case = TestCase(f"repeat {run.repeat + 1}", classname=run.spec, time=last.run_seconds or 0.0)
        if not last.judged:
            case.result = [Skipped(f"not judged: {last.outcome}")]
        elif last.outcome != "passed":
            reasons = last.failures()
            kind = "verdict" if last.verdict in ("failed", "error") else last.state
            result = (Error if last.outcome == "error" else Failure)(reasons[0], kind)
            result.text = "\n".join(reasons)
            case.result = [result]
        properties = Properties()
        for key, value in (("task", last.task_id), ("seat", last.seat), ("model", run.model),
                           ("attempts", len(run.attempts)), ("score", last.score)):
            if value is not None:
                properties.add_property(Property(key, str(value)))
        for each in run.attempts:  # every attempt, the retried ones too: nothing is silent
            because = "" if each.outcome == "passed" else f": {each.failures()[0]}" if each.ended else ""
            properties.add_property(Property(f"attempt {each.attempt}", f"{each.outcome}, task {each.task_id}"
                                             f"{because}"))
        case.append(properties)
        suite.add_testcase(case)
    suite.update_statistics()
    return suite
