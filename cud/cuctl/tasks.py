"""cuctl submit / list / show / follow / cancel / interrupt."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cud.budget import describe_budgets, describe_cost, describe_price, describe_step_cost, unknown_cost
from cud.cuctl.client import Client, all_tasks, check_own_task
from cud.cuctl.output import emit_json, printable, short, table, warn
from cud.errors import ConfigError
from cud.osworld.convert import load_osworld, seats_screen, sees_home_user
from cud.outcome import EXIT_STATUS, task_outcome
from cud.phrases.actions import describe, describe_action, describe_approval
from cud.protocol import FINAL_STATES, SeatView
from cud.record.reading import describe_usage
from cud.record.verdict import artifact_line, check_line, verdict_line
from cud.seat_needs import SeatNeeds
from cud.spec.load import load_spec
from cud.spec.wire import file_pieces, submit_fields

__all__ = ()


def submit(client: Client, args: argparse.Namespace) -> int:
    given = {"model": args.model, "max_steps": args.max_steps, "max_duration": args.max_duration,
             "max_cost": args.max_cost, "max_input_tokens": args.max_input_tokens,
             "max_output_tokens": args.max_output_tokens,  # max_cost as typed: a decimal string stays exact
             "approval": args.approval, "seat": args.seat, "screen": args.screen, "seat_tags": args.seat_tags,
             "rules": _rules(args.rule), "key": args.key,
             "repeat_limit": args.repeat_limit, "cycle_limit": args.cycle_limit, "on_stuck": args.on_stuck}
    files: dict[str, bytes] = {}
    if args.spec is not None or args.from_osworld is not None:
        fields, files = _spec_fields(args, lambda: client.call("seats"))
        fields.update({k: value for k, value in given.items() if value is not None})
    elif args.prompt is None:
        raise ConfigError("cuctl submit needs a PROMPT, a spec file with --spec FILE, or an OSWorld task with "
                          "--from-osworld FILE", key="prompt")
    else:
        fields = {"prompt": args.prompt, **given}
    result = client.upload("submit", file_pieces(files), **fields)  # a spec's files follow its checks as chunks
    if args.key is not None:
        check_own_task(result, args.key, client.uid)  # never another user's task under our key
    task_id = result["id"]
    if result.get("existing"):  # the key was recorded: this is the task it names, queued before
        warn(f"task {task_id} already has the key {args.key!r} ({result['task']['state']}); nothing new was queued")
    if not args.wait:
        emit_json({"id": task_id, "existing": bool(result.get("existing"))}) if args.json else print(task_id)
        return 0
    if not args.json:
        warn(f"task {task_id} submitted; waiting for it to end")
    task = client.call("follow", lambda message: None, wait_forever=True, id=task_id)
    return _ended(task, args.json)


def _spec_fields(args: argparse.Namespace,
                 seats: Callable[[], list[SeatView]]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``--spec FILE`` or ``--from-osworld FILE``: the spec as submit's fields, and its files (a PROMPT beside it
    would be ambiguous, and so would both)."""
    option, given = ("--spec", args.spec) if args.spec is not None else ("--from-osworld", args.from_osworld)
    if args.spec is not None and args.from_osworld is not None:
        raise ConfigError(f"cuctl submit takes --spec or --from-osworld, not both; got --spec {args.spec!r} and "
                          f"--from-osworld {args.from_osworld!r}", key="spec")
    if args.prompt is not None:
        raise ConfigError(f"cuctl submit takes a PROMPT or {option}, not both (the spec has its prompt); got "
                          f"{short(args.prompt, 40)!r} and {option} {given!r}", key="prompt")
    if args.spec is not None:
        spec, files = load_spec(Path(given), allow_outside=args.allow_files_outside)
    else:
        # The seat it goes to (--seat, else any) sees its home at /home/user: its commands run as written.
        # and the screen it has (--screen, else the seats', else OSWorld's) fills the task's screen placeholders.
        chosen = [args.seat] if args.seat else None
        screen = seats_screen(seats(), chosen, getattr(args, "screen", None))
        spec, files = load_osworld(Path(given), as_written=sees_home_user(seats(), chosen), screen=screen)
    return submit_fields(spec, files), files


def _rules(given: list[str] | None) -> list[Any] | None:
    """``--rule`` JSON objects (the daemon checks what is in them)."""
    if not given:
        return None
    rules = []
    for text in given:
        try:
            rules.append(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--rule {text!r} is not JSON: {exc.msg}", key="rule", value=repr(text)) from None
    return rules


def list_tasks(client: Client, args: argparse.Namespace) -> int:
    if args.last is not None and args.last < 1:
        raise ConfigError(f"--last must be 1 or more, got {args.last}", key="last", value=args.last)
    tasks = all_tasks(client, args.last, key=args.key, key_prefix=args.key_prefix)
    if args.json:
        emit_json(tasks)
        return 0
    # KEY and REASON only when a listed task has one: most queues have neither.
    keys = any(t.get("key") for t in tasks)
    reasons = any(t.get("reason") for t in tasks)
    table(
        ["ID", "STATE", "SEAT", "STEPS", "COST", "CREATED", *(["KEY"] if keys else []), "PROMPT",
         *(["REASON"] if reasons else [])],
        [[str(t["id"]), t["state"] + (" (held)" if t.get("held") else ""), _seat(t), str(t["steps"]),
          describe_cost(t.get("cost")) if t.get("cost") else "-", t["created_at"],
          *([t.get("key") or "-"] if keys else []), short(t["prompt"], 50),
          *([short(t.get("reason") or "-", 60)] if reasons else [])]
         for t in tasks],
    )
    for t in tasks:  # why a queued task waits (the day's cap): after the table, whole
        if t.get("held"):
            print(printable(f"task {t['id']} {t['held']}"))
    return 0


def show(client: Client, args: argparse.Namespace) -> int:
    task = client.call("show", id=args.id)
    if args.json:
        emit_json(task)
        return 0
    for key in ("id", "state", "prompt", "model", "approval", "steps", "max_steps", "max_duration", "final_message", "reason",
                "key", "created_at", "started_at", "finished_at"):
        print(f"{key + ':':15}{'-' if task.get(key) is None else task[key]}")
    print(f"{'seat:':15}{_seat(task)}")
    needs = SeatNeeds(None, task.get("screen"), tuple(task.get("seat_tags") or ()))
    if not needs.any:
        print(f"{'seat needs:':15}{needs.words()}")
    print(f"{'submitter:':15}{task['submitter']['name']} (uid {task['submitter']['uid']})")
    error = task["error"]
    print(f"{'error:':15}{'-' if error is None else error['kind'] + ': ' + error['message']}")
    print(f"{'model usage:':15}{describe_usage(task.get('usage'))}")
    print(f"{'cost:':15}{describe_cost(task.get('cost'))}")
    print(f"{'budgets:':15}{describe_budgets(task)}")
    print(f"{'price:':15}{describe_price(task.get('price'))}")
    if task.get("held"):
        print(f"{'held:':15}{printable(task['held'])}")
    guard = task.get("guard")
    if guard is not None:
        print(f"{'stuck guard:':15}repeat_limit {guard['repeat_limit']}, cycle_limit {guard['cycle_limit']}, "
              f"on_stuck {guard['on_stuck']}")
    if task.get("spec") is not None:
        spec = task["spec"]
        post = len(spec.get("postconfig") or [])  # a task from a daemon before postconfig has none
        print(f"{'spec:':15}{len(spec['setup'])} setup steps, " + (f"{post} postconfig steps, " if post else "")
              + f"{len(spec['checks'])} checks" + (" (any passes)" if spec.get("pass_if") == "any" else "")
              + f", reset {'yes' if spec['reset'] else 'no'}"
              + (f"; tags {', '.join(spec['tags'])}" if spec["tags"] else ""))
        print(f"{'verdict:':15}{verdict_line(task.get('verdict'))}")
        for check in (task.get("verdict") or {}).get("checks", []):
            print(f"  {printable(check_line(check))}")
        for artifact in task.get("artifacts") or []:
            print(f"{'collected:':15}{printable(artifact_line(artifact))}")
    return 0


def _seat(task: Mapping[str, Any]) -> str:
    """The task's seat; a queued unpinned task has none yet ("*": any), a pinned one says so."""
    if task["seat"] is None:
        return "*"
    return f"{task['seat']} (pinned)" if task["pinned"] and task["state"] == "queued" else str(task["seat"])


def follow(client: Client, args: argparse.Namespace) -> int:
    words = TaskEventWords()

    def on_event(message: Any) -> None:
        event = message["event"]
        if args.json:
            emit_json(event)
        else:
            print(words.describe(event))
        sys.stdout.flush()

    task = client.call("follow", on_event, wait_forever=True, id=args.id)
    return _ended(task, args.json, quiet=True)


def cancel(client: Client, args: argparse.Namespace) -> int:
    result = client.call("cancel", id=args.id)
    if args.json:
        emit_json(result)
    elif result["state_before"] in FINAL_STATES:
        print(f"task {args.id} had already ended ({result['state_before']})")
    else:
        print(f"task {args.id}: cancel requested (was {result['state_before']}, now {result['state']})")
    return 0


def interrupt(client: Client, args: argparse.Namespace) -> int:
    result = client.call("interrupt", id=args.id, reason=args.reason)
    if args.json:
        emit_json(result)
    else:
        if result["state_before"] == "interrupted":
            print(f"task {args.id}: had already ended interrupted; the reason is added to its own")
        else:
            print(f"task {args.id}: interrupt requested (was {result['state_before']}, now {result['state']})")
    return 0


def _ended(task: dict[str, Any], as_json: bool, quiet: bool = False) -> int:
    """Print how a task ended; exit with its outcome's status (cud.outcome): 0 passed (it succeeded, and its
    checks, if any, passed), 1 failed, 3 error (cud or the infrastructure could not do its part)."""
    if as_json:
        emit_json(task)
    elif task["state"] == "succeeded":
        if not quiet:
            print(task["final_message"] or "")
    verdict = task.get("verdict")
    if verdict is not None and not as_json:
        warn(f"task {task['id']} verdict: {verdict_line(verdict)}")
    if task["state"] != "succeeded":
        error = task.get("error")
        because = error["message"] if error else task.get("reason") or "no reason recorded"
        warn(f"task {task['id']} {task['state']}: {because}")
    outcome = task_outcome(task["state"], None if verdict is None else verdict["verdict"], task.get("error"))
    if outcome == "error" and not as_json:
        warn(f"task {task['id']}: outcome error: cud or the infrastructure could not do its part, so whether the "
             f"task works is not known (exit status {EXIT_STATUS['error']})")
    return EXIT_STATUS[outcome]


def describe_event(event: dict[str, Any], *, reason_said: bool = False) -> str:
    """One line per event, for people (cuctl follow without --json); model text cannot drive the terminal.
    ``reason_said``: an earlier step line of the task said why its cost is unknown (it is not said again)."""
    try:
        return printable(_describe(event, reason_said))
    except (KeyError, TypeError, ValueError):  # a known kind missing a field (another cud's): still one line
        return printable(f"[{str(event.get('at'))[11:19]}] task {event.get('task_id')} {event.get('kind')}: "
                         f"{event.get('data')}")


class TaskEventWords:
    """One task's events in order, in ``describe_event``'s words. It remembers what an earlier line said, so
    that follow, the progress view and the console say why a cost is unknown once per task, alike."""

    def __init__(self) -> None:
        self.reason_said = False  # why the cost is unknown, said on a step line already

    def describe(self, event: dict[str, Any]) -> str:
        line = describe_event(event, reason_said=self.reason_said)
        self.said_step(event)
        return line

    def step_cost(self, data: dict[str, Any]) -> str:
        """A step event's cost in words (for views that word the rest of the step their own way)."""
        return describe_step_cost(data.get("cost"), data.get("total_cost"), reason_said=self.reason_said)

    def said_step(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "step" and isinstance(event.get("data"), dict):
            self.reason_said = self.reason_said or unknown_cost(event["data"].get("total_cost"))


def describe_reset(report: dict[str, Any]) -> str:
    """A seat's reset (``cuctl reset``'s answer, a task's ``reset`` event) in words."""
    return (f"reset in {report['seconds']:.2f} s ({report['processes']} processes and {report['x_clients']} X clients "
            f"ended, {report['home_entries']} entries in the home)")


def _describe(event: dict[str, Any], reason_said: bool = False) -> str:
    data, kind = event["data"], event["kind"]
    prefix = f"[{event['at'][11:19]}] task {event['task_id']}"
    if kind == "queued":
        return f"{prefix} queued by {data['by']['name']}"
    if kind == "running":
        return f"{prefix} running" + (f" on seat {data['seat']}" if data.get("seat") else "")
    if kind == "action":
        return f"{prefix} step {data['step']}: {describe_action(data['action'], data.get('target'))} ({data['ms']:.0f} ms)"
    if kind == "step":
        return (f"{prefix} step {data['step']} done in {data['total_ms']:.0f} ms "
                f"(model {data['model_ms']:.0f}, driver {data['driver_ms']:.0f}, cud {data['overhead_ms']:.0f}); "
                f"{describe_usage(data)}; "
                f"{describe_step_cost(data.get('cost'), data.get('total_cost'), reason_said=reason_said)}")
    if kind in ("budget_warning", "budget_reached", "budget_extended"):
        what = {"budget_warning": "at 80% of its budget", "budget_reached": "at its budget",
                "budget_extended": "budget raised"}[kind]
        return f"{prefix} {what} ({data['budget']}): {data['message']}"
    if kind == "model_retry":
        then = "retrying" if data["retrying"] else "not retrying"
        return f"{prefix} step {data['step']}: the model answered HTTP {data['status']} (attempt {data['attempt']}), {then}"
    if kind == "stuck":
        return f"{prefix} stuck: {data['message']}"
    if kind == "approval_requested":
        what = describe_approval(data["checks"], data["actions"], data.get("targets"))
        return (f"{prefix} waiting for approval {data['approval_id']} ({data['kind']}): {what} "
                f"-- cuctl approve {data['approval_id']} | cuctl deny {data['approval_id']}")
    if kind == "approval_decided":
        by = f" by {data['by']['name']}" if data.get("by") else ""
        because = f": {data['reason']}" if data.get("reason") else ""
        return f"{prefix} approval {data['approval_id']} {data['outcome']}{by}{because}"
    if kind == "cancel_requested":
        return f"{prefix} cancel requested by {data['by']['name']}"
    if kind == "interrupt_requested":
        return f"{prefix} interrupt requested by {data['by']['name']}: {data['reason']}"
    if kind == "pause_requested":
        return f"{prefix} pause requested by {data['by']['name']} (lands before the next screenshot)"
    if kind == "paused":
        return f"{prefix} paused for {data['by']['name']} -- cuctl act {event['task_id']} ACTION | cuctl resume " \
               f"{event['task_id']}"
    if kind == "resumed":
        return f"{prefix} resumed by {data['by']['name']}"
    if kind == "human_action":
        return f"{prefix} {data['by']['name']} (human): {describe(data['action'])} ({data['ms']:.0f} ms)"
    if kind == "video_started":
        return f"{prefix} recording the screen to {data['file']} ({data['size'][0]}x{data['size'][1]}, {data['fps']} fps)"
    if kind == "video_finished":
        return f"{prefix} video {data['file']} done: {data['seconds']:.1f} s, {data['bytes']} bytes"
    if kind == "video_failed":
        return f"{prefix} video recorder failed ({data['stage']}): {data['message']} (the task goes on)"
    if kind == "reset":
        return f"{prefix} seat {data['seat']}: {describe_reset(data)}"
    if kind in ("setup", "postconfig"):
        outcome = "done" if data["ok"] else f"FAILED: {data.get('error')}"
        return f"{prefix} {kind} {data['index'] + 1} ({data['what']}): {outcome} ({data['ms']:.0f} ms)"
    if kind == "check":
        return f"{prefix} check {data['index'] + 1}: {check_line(data)}"
    if kind == "collected":
        return f"{prefix} collected: " + "; ".join(artifact_line(a) for a in data["files"])
    if kind == "end":
        detail = data.get("final_message") or (data.get("error") or {}).get("message") or data.get("reason") or ""
        judged = f"; verdict {data['verdict']} (score {data['score']:.2f})" if data.get("verdict") else ""
        return f"{prefix} ended {data['state']}" + (f": {detail}" if detail else "") + judged
    return f"{prefix} {kind}: {data}"
