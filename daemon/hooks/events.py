"""What a notification says: the event as JSON, its CUD_* variables, and its ntfy and Slack bodies.

Model text (the prompt, a safety check's message, typed text, a final message) is data
here: it goes into JSON strings and message bodies, cut to a bound, and never into a
command line, a header or a template. The ``cuctl`` lines are made of the daemon's own
numbers, host name and socket path, quoted for a POSIX shell: ``approve``/``deny`` work in any
shell on the daemon's host, ``approve_remote``/``deny_remote`` name the host (``--host
ssh://HOST``) so they work from another machine, e.g. a fleet's head.
"""

from __future__ import annotations

import shlex
import socket as socket_module
import typing
from pathlib import Path
from typing import Any

from cud.daemon.store.writes import now_iso
from cud.phrases.actions import describe
from cud.protocol import ApprovalView, TaskView

__all__ = ("PROMPT_CHARS", "TEXT_CHARS", "EventMaker", "command_env", "ntfy_body", "slack_body", "summary")

#: A prompt is cut to this many characters: enough to recognise the task on a phone.
PROMPT_CHARS = 300
#: Other model text (a check's message, a final message, an error) is cut to this many.
TEXT_CHARS = 1000


def truncate(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _task(task: TaskView) -> dict[str, Any]:
    return {
        "id": task["id"],
        "seat": task["seat"],
        "state": task["state"],
        "prompt": truncate(task["prompt"], PROMPT_CHARS),
        "prompt_truncated": len(task["prompt"]) > PROMPT_CHARS,
        "steps": task["steps"],
        "submitter": task["submitter"]["name"],
        "key": task.get("key"),  # its idempotency key: which attempt of a fleet's spec it is
    }


class EventMaker:
    """Makes the event dicts of one daemon: its host name and the ``--socket`` its cuctl lines need."""

    def __init__(self, socket_path: Path, trajectories_root: Path) -> None:
        self.socket = socket_path
        self.trajectories = trajectories_root
        self.host = socket_module.gethostname()

    def _base(self, event: str) -> dict[str, Any]:
        return {"event": event, "at": now_iso(), "host": self.host}

    def cuctl(self, verb: str, approval_id: int, *, remote: bool = False) -> str:
        # --socket always: the line then works from any shell on this host, whatever its $CUD_SOCKET;
        # remote: through ssh to this host by name, as the person's own ssh reaches it.
        host = ["--host", f"ssh://{self.host}"] if remote else []
        return shlex.join(["cuctl", *host, "--socket", str(self.socket), verb, str(approval_id)])

    def approval_event(self, approval: ApprovalView, task: TaskView) -> dict[str, Any]:
        shot = approval["screenshot"]
        actions = approval["actions"]
        record: dict[str, Any] = {
            "id": approval["id"],
            "kind": approval["kind"],
            "message": truncate(_message(approval), TEXT_CHARS),
            "checks": [{**c, "message": truncate(c.get("message"), TEXT_CHARS)} for c in approval["checks"]],
            "actions": [_action(a) for a in actions],
            "action_words": [describe(a) for a in actions],
            "step": approval["step"],
            "screenshot": str(self.trajectories / str(task["id"]) / shot) if shot else None,
            "deadline_at": approval["deadline_at"],
        }
        # An accessibility target (what the action touches, in words), once approvals record one.
        for key in ("target", "targets"):
            if key in approval:
                record[key] = typing.cast("dict[str, Any]", approval)[key]  # "target": an older record's key
        return {
            **self._base("approval_requested"),
            "task": _task(task),
            "approval": record,
            "approve": self.cuctl("approve", approval["id"]),
            "deny": self.cuctl("deny", approval["id"]),
            "approve_remote": self.cuctl("approve", approval["id"], remote=True),
            "deny_remote": self.cuctl("deny", approval["id"], remote=True),
        }

    def task_event(self, event: str, task: TaskView) -> dict[str, Any]:
        error = task["error"]
        return {
            **self._base(event),
            "task": {
                **_task(task),
                "final_message": truncate(task["final_message"], TEXT_CHARS),
                "error": None if error is None else {"kind": error.get("kind"),
                                                     "message": truncate(error.get("message"), TEXT_CHARS)},
                "reason": truncate(task["reason"], TEXT_CHARS),
                "verdict": _verdict(task),
            },
        }

    def budget_event(self, task: TaskView, data: dict[str, Any]) -> dict[str, Any]:
        """``budget_warning``: the task is at 80% of one of its budgets (docs/budgets.md); daemon numbers only."""
        budget = {key: data.get(key) for key in ("budget", "limit", "used", "currency", "message")}
        return {**self._base("budget_warning"), "task": _task(task), "budget": budget}

    def seat_event(self, event: str, name: str, where: str, error: str | None) -> dict[str, Any]:
        return {**self._base(event), "seat": {"name": name, "where": where, "error": error}}


#: Checks a notification names (the failed ones first); the task's record has them all.
CHECKS_NAMED = 10


def _verdict(task: TaskView) -> dict[str, Any] | None:
    """A spec's verdict for people and receivers: passed, failed or error, the score, the counts, and the checks
    that did not pass (cut): those that failed, and those that could not look (``errors``)."""
    verdict = task.get("verdict")
    if verdict is None:
        return None
    failed = [{"name": truncate(c["name"], 200), "kind": c["kind"], "why": truncate(c["why"], TEXT_CHARS)}
              for c in verdict["checks"] if not c["passed"]]
    return {"verdict": verdict["verdict"], "score": verdict["score"], "passed": verdict["passed"],
            "failed": verdict["failed"], "errors": verdict.get("errors", 0), "failed_checks": failed[:CHECKS_NAMED]}


def _message(approval: ApprovalView) -> str:
    """What the approver is asked, in words: the safety checks' messages, else the actions."""
    messages = [str(c.get("message") or c.get("code") or "") for c in approval["checks"]]
    if any(messages):
        return " / ".join(m for m in messages if m)
    return "the model wants to " + ", then ".join(describe(a) for a in approval["actions"])


def _action(action: dict[str, Any]) -> dict[str, Any]:
    if isinstance(action.get("text"), str):  # typed text is model text of any length
        return {**action, "text": truncate(action["text"], TEXT_CHARS)}
    return action


def summary(event: dict[str, Any]) -> tuple[str, str]:
    """A title and a body for people (ntfy, Slack, a desktop notification)."""
    kind = event["event"]
    if kind.startswith("seat_"):
        seat = event["seat"]
        if kind == "seat_unavailable":
            return f"cud: seat {seat['name']} is unavailable", f"{seat['where']}: {seat['error']}"
        return f"cud: seat {seat['name']} is back", f"{seat['where']} answers again"
    task = event["task"]
    # A task cancelled while queued never had a seat.
    where = f"task {task['id']}" + (f" on seat {task['seat']}" if task["seat"] else "")
    prompt = f"Task: {task['prompt']}"
    if kind == "approval_requested":
        approval = event["approval"]
        lines = [approval["message"], "", prompt]
        if approval["action_words"]:
            lines.append("Action: " + "; ".join(approval["action_words"]))
        if approval["screenshot"]:
            lines.append(f"Screenshot: {approval['screenshot']}")
        lines += ["", f"On {event['host']}: {event['approve']}", f"On {event['host']}: {event['deny']}",
                  f"From elsewhere: {event['approve_remote']}"]
        return f"cud: {where} needs approval {approval['id']}", "\n".join(lines)
    if kind == "budget_warning":
        return f"cud: {where} is at 80% of its {event['budget']['budget']}", f"{event['budget']['message']}\n\n{prompt}"
    lines = [prompt]
    if task["error"]:
        lines.append(f"Error ({task['error']['kind']}): {task['error']['message']}")
    elif task["final_message"]:
        lines.append(f"Answer: {task['final_message']}")
    if task["reason"]:
        lines.append(f"Reason: {task['reason']}")
    verdict = task.get("verdict")
    if verdict is not None:
        lines.append(f"Verdict: {verdict['verdict']}, score {verdict['score']:.2f} ({verdict['passed']} of "
                     f"{verdict['passed'] + verdict['failed'] + verdict['errors']} checks passed"
                     + (f", {verdict['errors']} could not look" if verdict["errors"] else "") + ")")
        lines += [f"  failed: {c['name']}: {c['why']}" for c in verdict["failed_checks"]]
        judged = f", verdict {verdict['verdict']}"
    else:
        judged = ""
    return f"cud: {where} {task['state']} after {task['steps']} step(s){judged}", "\n".join(lines)


_NTFY_TAGS = {"approval_requested": ["raising_hand"], "task_failed": ["x"], "seat_unavailable": ["warning"],
              "budget_warning": ["moneybag"],
              "seat_recovered": ["white_check_mark"]}
_NTFY_PRIORITY = {"approval_requested": 4, "task_failed": 4, "seat_unavailable": 4}


def ntfy_body(event: dict[str, Any], topic: str) -> dict[str, Any]:
    """ntfy's publish-as-JSON body (POSTed to the server's root URL)."""
    title, body = summary(event)
    tags = _NTFY_TAGS.get(event["event"], ["heavy_check_mark" if event.get("task", {}).get("state") == "succeeded"
                                           else "information_source"])
    return {"topic": topic, "title": title, "message": body, "tags": tags,
            "priority": _NTFY_PRIORITY.get(event["event"], 3)}


def _slack_escape(text: str) -> str:
    # Slack's three control characters: unescaped, model text could write <!channel> or a link.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(event: dict[str, Any]) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook message (Slack, Mattermost, Rocket.Chat, ...)."""
    title, body = summary(event)
    return {"text": f"*{_slack_escape(title)}*\n{_slack_escape(body)}"}


def command_env(event: dict[str, Any]) -> dict[str, str]:
    """The CUD_* variables of a command hook: ids, names and states only, never model text."""
    # Not CUD_HOST: that is cuctl's own (the daemon to dial), and the hook's cuctl lines must stay local.
    env = {"CUD_EVENT": event["event"], "CUD_HOSTNAME": event["host"]}
    if "task" in event:
        task = event["task"]
        env.update(CUD_TASK_ID=str(task["id"]), CUD_STATE=task["state"], CUD_SEAT=task["seat"] or "")
        if task.get("verdict"):
            env.update(CUD_VERDICT=task["verdict"]["verdict"], CUD_SCORE=f"{task['verdict']['score']:g}")
    if "seat" in event:
        env["CUD_SEAT"] = event["seat"]["name"]
    if "budget" in event:
        env["CUD_BUDGET"] = str(event["budget"]["budget"])
    if "approval" in event:
        approval = event["approval"]
        env.update(CUD_APPROVAL_ID=str(approval["id"]), CUD_APPROVE=event["approve"], CUD_DENY=event["deny"],
                   CUD_APPROVE_REMOTE=event["approve_remote"], CUD_DENY_REMOTE=event["deny_remote"])
        if approval["screenshot"]:
            env["CUD_SCREENSHOT"] = approval["screenshot"]
    return env
