"""``cuctl eval --junit FILE``: the suite as JUnit XML, which CI systems read, written with junitparser.

One ``<testsuite name="cuctl eval">``; one ``<testcase>`` per spec-run (its judged attempt):
``classname`` is the spec, ``name`` ``repeat N``, ``time`` the task's run time. A failed run has
one ``<failure>`` whose message is its first reason and whose text lists every failed check's
why (or the task's end); its task id and seat are ``<properties>``. A spec-run not judged
(the suite was stopped) is ``<skipped>``: the file never claims a result it has not seen.
"""

from __future__ import annotations

from pathlib import Path

from junitparser import Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite

from cud.suite.results import Results

__all__ = ("write_junit",)


def write_junit(results: Results, path: Path) -> None:
    suite = TestSuite("cuctl eval")
    for run in results.spec_runs():
        last = run.last
        case = TestCase(f"repeat {run.repeat + 1}", classname=run.spec, time=last.run_seconds or 0.0)
        if not last.judged:
            case.result = [Skipped(f"not judged: {last.outcome}")]
        elif not last.passed:
            reasons = last.failures()
            failure = Failure(reasons[0], "verdict" if last.verdict == "failed" else last.state)
            failure.text = "\n".join(reasons)
            case.result = [failure]
        properties = Properties()
        for name, value in (("task", last.task_id), ("seat", last.seat), ("attempts", len(run.attempts)),
                            ("score", last.score)):
            if value is not None:
                properties.add_property(Property(name, str(value)))
        case.append(properties)
        suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    tmp = path.with_name(f".{path.name}.part")
    xml.write(str(tmp), pretty=True)
    tmp.replace(path)
