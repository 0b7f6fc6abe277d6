"""The runner's use of targets: look before each action, apply the rules, bind approvals to the element.

Per task. ``look`` resolves what the action about to run touches (kept as
``current`` for its action event); ``rule_decision`` applies the daemon's and the
task's rules to it (a ``deny`` raises: the action never runs and the task fails
naming the rule); ``bind`` keeps, for each approved action, the element identity
(role + name + application) the approver saw; ``check`` refuses an approved
action when a different element is there now.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from cud.daemon.targets.lookup import TargetResolver
from cud.daemon.targets.rules import Rule, RuleDecision, decide
from cud.errors import ApprovalError, PolicyDenied
from cud.phrases.actions import describe_action
from cud.phrases.targets import identity, identity_phrase
from cud.protocol import Target

__all__ = ("TargetGate",)


class TargetGate:
    def __init__(self, resolver: TargetResolver, daemon_rules: Sequence[Rule], task_rules: Sequence[Rule]) -> None:
        self._resolver = resolver
        self._daemon_rules = daemon_rules
        self._task_rules = task_rules
        #: The target of the action about to run (None: it touches nothing).
        self.current: Target | None = None
        self._approved: deque[dict[str, str] | None] = deque()

    async def look(self, action: dict[str, Any]) -> Target | None:
        self.current = await self._resolver.resolve(action)
        return self.current

    def rule_decision(self, action: dict[str, Any]) -> RuleDecision | None:
        """The rules' decision on ``action`` at ``current``; raises PolicyDenied for ``deny``."""
        kind = str(action.get("type"))
        if kind in ("screenshot", "wait"):
            return None
        rule_decision = decide(self._daemon_rules, self._task_rules, kind, self.current)  # type: ignore[arg-type]
        if rule_decision is not None and rule_decision.decision == "deny":
            what = describe_action(action, self.current, 200)  # type: ignore[arg-type]
            raise PolicyDenied(f"rule {rule_decision.rule} denied: {what}; the action was not run",
                               rule=rule_decision.rule, action=action, target=self.current)
        return rule_decision

    def bind(self, targets: Sequence[Target | None]) -> None:
        """The approver saw these targets, one per approved action, in order."""
        self._approved = deque(identity(t) for t in targets)  # type: ignore[arg-type]  # a Target is a dict

    def unbind(self) -> None:
        self._approved.clear()

    def check_binding(self, action: dict[str, Any]) -> None:
        """Refuse the next approved action if the element at its point is not the one approved."""
        approved = self._approved.popleft() if self._approved else None
        now = identity(self.current)  # type: ignore[arg-type]  # a Target is a dict
        if approved is None or now is None or approved == now:
            # Nothing known to compare (a window-only app, a bus gone quiet): the pixel binding still holds.
            return
        raise ApprovalError(
            f"the element there changed since it was approved: approved {identity_phrase(approved)}, "
            f"now {identity_phrase(now)}; the action was not run",
            approved=approved, now=now, action=action,
        )
