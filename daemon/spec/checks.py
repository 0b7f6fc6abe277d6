"""A spec's checks, after the model ends: each looks at the seat and says whether it passed, and why.

Every check runs, whatever the others found, and a check that cannot look (a command
that does not start, a file outside the home or changed while it was read, a bus that
does not answer, any OS error) ends ``error`` (:func:`cud.outcome.check_outcome`) with
"could not look" and the path as its why: a verdict never passes on what could not be
seen, is never lost to it, and never says the app failed when cud could not tell. The result of each is a
:class:`cud.protocol.CheckResultView`: what was expected in words, what was observed
(text cut to :data:`OBSERVED_CHARS`), and one line of why.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cud.daemon.spec.desktop import Desktop, Found
from cud.daemon.spec.setup import tail
from cud.errors import CudError, NotFound, SetupFailed
from cud.outcome import check_outcome
from cud.protocol import CheckResultView, FailedStepView
from cud.spec import Check, Match
from cud.spec.setup import unlooked_why

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("MAX_CHECKED_FILE", "OBSERVED_CHARS", "run_check", "unlooked")

#: The largest file a ``file`` check reads (its sha256, equals, matches).
MAX_CHECKED_FILE = 16 * 1024 * 1024
#: Text kept of what a check observed.
OBSERVED_CHARS = 500
#: Elements (and windows) of which a check keeps what it observed.
OBSERVED_ITEMS = 5

Outcome = tuple[bool, Any, str]  # passed, observed, why


def cut(text: str, limit: int = OBSERVED_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


async def run_check(index: int, check: Check, session: SeatSession | None, desktop: Desktop,
                    files: Mapping[str, bytes], final_message: str | None) -> CheckResultView:
    started = time.monotonic()
    looked = False
    try:
        if check.acts_in_session and session is None:
            raise CudError("this seat has no session (its user and home are not configured)")
        passed, observed, why = await _judge(check, session, desktop, files, final_message)  # type: ignore[arg-type]  # session is set when the check acts in one
        looked = True
    except CudError as exc:
        passed, observed, why = False, None, f"could not look: {exc.message}"
    except OSError as exc:  # whatever the seat changed under the look: could not look, the verdict stands
        passed, observed, why = False, None, f"could not look: {_os_why(check, exc)}"
    return {"index": index, "name": check.name, "kind": check.kind, "weight": check.weight, "passed": passed,
            "outcome": check_outcome(looked, passed), "expected": expected(check), "observed": observed,
            "why": why, "ms": round((time.monotonic() - started) * 1000, 1)}


def unlooked(index: int, check: Check, failed: SetupFailed) -> CheckResultView:
    """The result of a check that did not look because a postconfig step failed (``failed``, as
    :func:`cud.daemon.spec.setup.run_steps` raised it): ``error``, its why naming the step and why it failed.

    What the seat then holds is not what the spec asked the checks to judge, so none looks: each says so.
    """
    details = failed.details
    step: FailedStepView = {"step": int(details["step"]), "key": str(details["key"]), "what": str(details["what"]),
                            "part": str(details["part"])}
    return {"index": index, "name": check.name, "kind": check.kind, "weight": check.weight, "passed": False,
            "outcome": check_outcome(False, False), "expected": expected(check), "observed": None,
            "why": unlooked_why(failed.message), "ms": 0.0, "postconfig_failed": step}


def _os_why(check: Check, exc: OSError) -> str:
    """An OS error met while looking, naming the path (the file's, or else the command's)."""
    where = exc.filename if exc.filename is not None else (check.path or (check.argv[0] if check.argv else None))
    return f"{exc.strerror or exc}" + (f" at {where!r}" if where is not None else "")


def expected(check: Check) -> str:
    """What the check expects, in words."""
    if check.kind == "command":
        parts = [f"exit status {check.exit_code}"]
        parts += [f"output has {s!r}" for s in check.output.include]
        parts += [f"output lacks {s!r}" for s in check.output.exclude]
        if check.output.matches is not None:
            parts.append(f"output {check.output.matches.describe()}")
        return ", ".join(parts)
    if check.kind == "answer":
        assert check.answer is not None
        return f"the final message {check.answer.describe()}"
    if check.kind == "file":
        if not check.exists:
            return f"no file {check.path}"
        parts = [f"{check.path} exists"]
        parts += [f"equals {check.equals}"] if check.equals else []
        parts += [f"content {check.matches.describe()}"] if check.matches else []
        parts += [f"sha256 {check.sha256}"] if check.sha256 else []
        return ", ".join(parts)
    what = ", ".join(f"{k} {m.describe()}" for k, m in check.where)
    if not check.exists:
        return f"no {check.kind} with {what}"
    parts = [f"{'an' if check.kind == 'element' else 'a'} {check.kind} with {what}"]
    parts += [f"text {check.text.describe()}"] if check.text is not None else []
    parts += [f"value {check.value:g}"] if check.value is not None else []
    parts += [f"states {', '.join(check.states)}"] if check.states else []
    return ", ".join(parts)


async def _judge(check: Check, session: SeatSession, desktop: Desktop, files: Mapping[str, bytes],
                 final_message: str | None) -> Outcome:
    if check.kind == "command":
        return await _command(check, session)
    if check.kind == "file":
        return await _file(check, session, files)
    if check.kind == "window":
        return await _window(check, desktop)
    if check.kind == "element":
        return await _element(check, desktop)
    assert check.answer is not None
    if final_message is None:
        return False, None, "the model gave no final message"
    return _text(check.answer, final_message, "the final message")


def _text(want: Match, value: str, what: str) -> Outcome:
    if want.test(value):
        return True, cut(value), f"{what} {want.describe()}"
    return False, cut(value), f"{what} {want.describe_miss()}: it is {cut(value, 80)!r}"


async def _command(check: Check, session: SeatSession) -> Outcome:
    done = await session.run(check.argv, timeout=check.timeout)
    stdout = done.stdout.decode("utf-8", "replace")
    observed = {"exit_code": done.exit_code, "stdout": cut(stdout), "stderr": cut(tail(done.stderr))}
    if done.timed_out:
        return False, observed, f"it ran past its timeout of {check.timeout:g} s and was stopped"
    if done.exit_code != check.exit_code:
        return False, observed, f"it exited with status {done.exit_code}, not {check.exit_code}"
    for wanted in check.output.include:
        if wanted not in stdout:
            return False, observed, f"its output lacks {wanted!r}"
    for unwanted in check.output.exclude:
        if unwanted in stdout:
            return False, observed, f"its output has {unwanted!r}"
    if check.output.matches is not None and not check.output.matches.test(stdout):
        return False, observed, f"its output {check.output.matches.describe_miss()}"
    return True, observed, f"exit status {done.exit_code}" + (", output as expected" if _expects_output(check) else "")


def _expects_output(check: Check) -> bool:
    return bool(check.output.include or check.output.exclude or check.output.matches is not None)


async def _file(check: Check, session: SeatSession, files: Mapping[str, bytes]) -> Outcome:
    try:
        data = await session.read_file(check.path, max_bytes=MAX_CHECKED_FILE)
    except NotFound:
        return (not check.exists), None, f"there is no {check.path}"
    digest = hashlib.sha256(data).hexdigest()
    text = data.decode("utf-8", "replace")
    observed = {"bytes": len(data), "sha256": digest, "text": cut(text)}
    if not check.exists:
        return False, observed, f"{check.path} exists ({len(data)} bytes)"
    if check.equals is not None and data != files[check.equals]:
        return False, observed, f"{check.path} differs from {check.equals} ({len(data)} bytes, expected " \
                                f"{len(files[check.equals])})"
    if check.sha256 is not None and digest != check.sha256:
        return False, observed, f"its sha256 is {digest}"
    if check.matches is not None:
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            return False, observed, f"{check.path} is not UTF-8 text, so it cannot match"
        if not check.matches.test(content):
            return False, observed, f"its content {check.matches.describe_miss()}: it is {cut(content, 80)!r}"
    return True, observed, f"{check.path} is as expected ({len(data)} bytes)"


async def _window(check: Check, desktop: Desktop) -> Outcome:
    where = dict(check.where)
    found = await desktop.find_windows(where.get("class"), where.get("title"))
    observed = [{"class": w.wm_class, "instance": w.instance, "title": w.title} for w in found[:OBSERVED_ITEMS]]
    if not check.exists:
        if found:
            return False, observed, f"{len(found)} such window(s) are there, the first {found[0].title!r}"
        return True, [], "no such window is there"
    if not found:
        windows = await desktop.windows()
        there = [{"class": w.wm_class, "title": w.title} for w in windows[:OBSERVED_ITEMS * 2]]
        return False, {"windows": there}, windows_there(there, len(windows))
    return True, observed, f"{found[0].wm_class} {found[0].title!r} is there"


def windows_there(there: list[dict[str, str]], total: int) -> str:
    """A failed window check's why: the windows that are there (the first few, their titles cut), ``total`` in all."""
    if not there:
        return "no such window is there; no window is there at all"
    shown = ", ".join(f"{w['class']} {cut(w['title'], 40)!r}" for w in there[:OBSERVED_ITEMS])
    more = f" and {total - min(len(there), OBSERVED_ITEMS)} more" if total > OBSERVED_ITEMS else ""
    return f"no such window is there; there are {shown}{more}"


async def _element(check: Check, desktop: Desktop) -> Outcome:
    where = dict(check.where)
    found = await desktop.find_elements(where.get("app"), where.get("role"), where.get("name"))
    if not check.exists:
        if found:
            return False, [f.describe() for f in found[:OBSERVED_ITEMS]], f"{found[0].describe()} is there"
        return True, [], "no such element is there"
    if not found:
        return False, [], "no such element is showing"
    observed: list[dict[str, Any]] = []
    why = ""
    for each in found:
        seen, miss, met = await _element_expectations(check, desktop, each)
        if len(observed) < OBSERVED_ITEMS:
            observed.append(seen)
        if miss is None:
            return True, observed, f"{each.describe()}: {met}" if met else f"{each.describe()} is there"
        why = why or f"{each.describe()}: {miss}"
    more = f" (and {len(found) - 1} more like it)" if len(found) > 1 else ""
    return False, observed, why + more


async def _element_expectations(check: Check, desktop: Desktop,
                                 each: Found) -> tuple[dict[str, Any], str | None, str]:
    """What the element shows, the first expectation it misses (None: it meets them all), and, in
    words, what it was compared on and found to be (``its text is 'x', it is editable``)."""
    element = each.element
    seen: dict[str, Any] = {"app": each.app, "role": element.role, "name": element.name, "states": element.states}
    miss: str | None = None
    met: list[str] = []
    if check.text is not None:
        text = await desktop.text(each)
        seen["text"] = None if text is None else cut(text)
        if text is None:
            miss = "it has no text"
        elif not check.text.test(text):
            miss = f"its text {check.text.describe_miss()}: it is {cut(text, 80)!r}"
        elif check.text.regex is not None:
            met.append(f"its text {cut(text, 80)!r} {check.text.describe()}")
        else:
            met.append(f"its text {check.text.describe()}")
    if check.value is not None:
        value = await desktop.value(each)
        seen["value"] = value
        if miss is None and value != check.value:
            miss = "it has no value" if value is None else f"its value is {value:g}"
        elif value is not None:
            met.append(f"its value is {value:g}")
    states: list[str] = []
    for state in check.states:
        want = not state.startswith("!")
        if miss is None and (state.lstrip("!") in element.states) != want:
            miss = f"it is {'not ' if want else ''}{state.lstrip('!')}"
        states.append(f"{'' if want else 'not '}{state.lstrip('!')}")
    if states:
        met.append("it is " + ", ".join(states))
    return seen, miss, ", ".join(met)
