"""The checkpoint every action of a task's model passes: before it runs, and after.

Whatever model API a task uses, one :class:`Checkpoint` per task decides whether each action
may run and records what ran. Before an action: the stuck guard (:mod:`.stuck`), what the
action touches and the rules on it (:class:`~cud.daemon.targets.gate.TargetGate`), the
approval the ``approval`` policy or a rule asks for, and for an approved pointer action its
binding to the screen the approver saw (:mod:`.screen_binding`) and to the element there.
Before a request to the model: the budget line (:class:`~cud.daemon.budget.meter.BudgetMeter`).
After: the step ledger (:class:`~cud.daemon.tasks.ledger.StepLedger`) records it.

**An API adapter** is one module beside this one that drives its API's loop for one task
(:mod:`.openai_computer` for OpenAI's computer tool, through the SDK's
``AsyncComputerToolset``, which alone dispatches that tool's actions; :mod:`.anthropic_computer`
for Anthropic's, over the Messages API; :mod:`.chat_computer` for open models over chat
completions, their text parsed by a format; :mod:`.adapters` picks one by the task's model). It
translates its API's calls into these, and calls them in this order:

1. Before each request to the model, :meth:`before_request` (the budget line: it may wait for
   a person, or raise ``BudgetExceeded``); as the request goes out :meth:`model_started`; when
   it comes back, or fails, :meth:`model_answered`; an answer the client retries,
   :meth:`model_retried`.
2. A batch of actions the API itself flags for a person (OpenAI's pending safety checks), or a
   model's question to the user (a chat model's ``call_user``, with no actions):
   :meth:`approve_batch`, before the batch's first action.
3. Before each action, and before the screenshot that ends a batch: :meth:`admit`. False: the
   task was cancelled; the adapter ends its loop without running the action. It raises (the
   adapter lets it end the task): ``PolicyDenied`` (a deny rule), ``ApprovalError`` (denied, timed
   out, or the screen or element changed since it was approved), ``TaskStuck``. A loop cud runs
   itself (not the SDK's toolset) calls :meth:`admit_or_cancel` instead: ``Cancelled`` where
   :meth:`admit` says False, which ends its loop and which its ``error_of`` takes for the cancel.
4. Once an action ran, :meth:`action_done`; once a screenshot the model is about to receive
   was taken, :meth:`screenshot_taken`, with its frame's fingerprint while :meth:`wants_fingerprints`
   (taken in the same driver call). Anything the API reports of interest, :meth:`diagnostic`.
5. When the adapter's loop has ended, however it ended, the runner (not the adapter) calls
   :meth:`close`, then writes the last step.

Actions are plain dicts, as the protocol writes them (``{"type": "click", "x": 1, "y": 2, ...}``);
an adapter whose API words them otherwise translates them before calling here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cud.daemon.store.trajectory import ms_since
from cud.daemon.targets.gate import TargetGate
from cud.daemon.targets.rules import parse_rules
from cud.daemon.tasks.screen_binding import ScreenWatch
from cud.daemon.tasks.stuck import Stuck, StuckGuard
from cud.errors import ApprovalError, TaskStuck
from cud.protocol import POINTER_ACTIONS, Target

if TYPE_CHECKING:
    from cud.daemon.budget.meter import BudgetMeter
    from cud.daemon.model.client import Sent
    from cud.daemon.tasks.ledger import StepLedger
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("BINDING_RADIUS", "Cancelled", "Checkpoint")

#: Half-width of the square compared to bind an approval to the screen the approver saw.
BINDING_RADIUS = 16
#: Actions the ``actions`` approval mode lets through without asking: they change nothing on the screen.
_HARMLESS = {"screenshot", "wait"}


class Cancelled(Exception):
    """The task was cancelled at the checkpoint: an API's own loop ends, and the run records the cancel."""


class Checkpoint:
    """One task's checkpoint: what its actions must pass, and the record of what ran."""

    def __init__(self, run: TaskRun, ledger: StepLedger, budget: BudgetMeter) -> None:
        self._run = run
        self._seat = seat = run.seat
        task = run.task
        self._task_id = task["id"]
        self.approval_mode = task["approval"]
        self.ledger = ledger
        self.budget = budget
        self._covered = 0  # actions still covered by the approval just granted
        self._bound = False  # those actions are bound to the screen the approver saw
        self._watch: ScreenWatch | None = None  # what changed by itself around their points
        #: The stuck guard: the task's own [guard] values, else the daemon's (tasks from before it).
        self.guard_settings = task.get("guard") or seat.config.guard.for_task({})
        self.guard = StuckGuard(self.guard_settings["repeat_limit"], self.guard_settings["cycle_limit"])
        #: What each action touches, the rules on it, the element identities approvals bound.
        self.gate = TargetGate(seat.targets, seat.config.rules,
                               parse_rules("rules", task.get("rules") or [], stricter_only=True))

    # -- 1. the model's requests --------------------------------------------------------------
    async def before_request(self) -> None:
        """Before each request to the model: at a budget's line, a person's word or the task's end."""
        await self.budget.before_request()

    def model_started(self) -> None:
        self.ledger.model_started()

    def model_answered(self, model_ms: float, sent: Sent, tokens: dict[str, int] | None,
                       messages: list[str] | None) -> None:
        """The request came back after ``model_ms`` with ``tokens`` counted and ``messages`` said
        (both None: it failed, or the API counted nothing)."""
        self.ledger.model_answered(model_ms, sent, tokens, messages)
        if tokens is not None:
            self.budget.answered(tokens)

    def model_retried(self, status: int, attempt: int, retrying: bool) -> None:
        self.ledger.model_retried(status, attempt, retrying)

    # -- 2. a batch the API flags --------------------------------------------------------------
    async def approve_batch(self, actions: list[dict[str, Any]], checks: list[dict[str, Any]]) -> bool:
        """A person approves the whole batch (kind ``safety``); True if approved, False if cancelled."""
        await self._before_acting()
        elements = [await self.gate.look(a) for a in actions]
        if not await self._ask("safety", checks, actions, elements):
            return False
        self._covered, self._bound = len(actions), True
        self.gate.bind(elements)
        return True

    # -- 3. each action -------------------------------------------------------------------------
    async def admit_or_cancel(self, action: dict[str, Any]) -> None:
        """:meth:`admit`, for the loops cud runs itself (not the SDK's toolset): Cancelled where it says no."""
        if not await self.admit(action):
            raise Cancelled("the task was cancelled")

    async def admit(self, action: dict[str, Any]) -> bool:
        """Whether ``action`` may run: False if the task was cancelled (or meanwhile); raises to end it."""
        run = self._run
        if run.is_cancelled():
            return False
        kind = action.get("type")
        # Adapters ask before every action and before the screenshot that ends a batch: a
        # pause lands there, and the screenshot after it shows what people did meanwhile.
        if kind == "screenshot" and run.pause_requested_by is not None and not await run.hold_paused():
            return False
        await self._before_acting()
        stuck = self.guard.act(action) if self.guard.active else None
        if stuck is not None and not await self._stuck(stuck):
            return False
        element = await self.gate.look(action)
        rule_decision = self.gate.rule_decision(action)  # a deny rule raises here: the action never runs
        if rule_decision is not None:
            asks = rule_decision.decision == "ask"  # a rule that matched decides, whatever the policy
        else:
            asks = self.approval_mode == "actions" and kind not in _HARMLESS
        if self._covered:
            self._covered -= 1
        elif asks:
            checks = [rule_decision.as_check()] if rule_decision is not None else []
            if not await self._ask("action", checks, [action], [element]):
                return False
            self._bound = True
            self.gate.bind([element])
            await self.gate.look(action)  # what is there now, after the approver's wait
        else:
            self._bound = False
            self.gate.unbind()
        if self._bound and kind in POINTER_ACTIONS:
            self.gate.check_binding(action)
            await self._check_binding(action)
        return True

    # -- 4. what ran -------------------------------------------------------------------------------
    def action_done(self, action: dict[str, Any], ms: float) -> None:
        """``action`` ran on the driver in ``ms`` (or failed there): the step's record, with what it touched."""
        self.ledger.action_done(action, ms, self.gate.current)

    @property
    def wants_fingerprints(self) -> bool:
        """Whether :meth:`screenshot_taken` needs each screenshot's fingerprint: while the stuck guard is on."""
        return self.guard.active

    async def screenshot_taken(self, shot: dict[str, Any], ms: float, prints: Any) -> None:
        """The screenshot the model is about to receive (a data URL in ``image_url``), taken in ``ms``;
        ``prints``: its frame's fingerprint if :attr:`wants_fingerprints`, else None."""
        self.ledger.screenshot_taken(shot["image_url"], ms)
        if prints is not None:
            # The screen's tiles and, where the accessibility tree tells, what the focused element holds:
            # an entry that scrolls as it fills changes no pixel, but its text changes.
            self.guard.see(prints, await self._seat.targets.focus_state())

    def diagnostic(self, data: dict[str, Any]) -> None:
        """Something the API reported that a person reading the task's events should see."""
        self.ledger.event("diagnostic", data)

    # -- 5. the end --------------------------------------------------------------------------------
    async def close(self) -> None:
        await self._set_watch(None)

    # -- inside ------------------------------------------------------------------------------------
    async def _before_acting(self) -> None:
        """The first time the model's answer is acted on (or asked about): the run's hook, once."""
        run = self._run
        if run.before_acting is not None:
            hook, run.before_acting = run.before_acting, None
            await hook()

    async def _stuck(self, stuck: Stuck) -> bool:
        """The ``stuck`` event, then a person's word (on_stuck "ask") or the task's end as ``stuck``.
        True if the model may go on; False if the task was cancelled meanwhile."""
        self.ledger.event("stuck", stuck.as_event())
        if self.guard_settings["on_stuck"] != "ask":
            raise TaskStuck(f"{stuck.message}; the task was stopped (its on_stuck is 'fail')", **stuck.details)
        check = {"id": "stuck", "code": "stuck", "message": f"{stuck.message}; let it continue?"}
        try:
            return await self._ask("stuck", [check], [stuck.action], [None], bind=False)
        except ApprovalError as exc:  # denied or timed out: a person did not let it go on
            raise TaskStuck(f"{stuck.message}; {exc.message}", **stuck.details) from None

    async def _ask(self, kind: str, checks: list[dict[str, Any]], actions: list[dict[str, Any]],
                   elements: list[Target | None], *, bind: bool = True) -> bool:
        """Create an approval and wait for it. True if approved, False if the task was cancelled.

        ``elements``: what each action touches, as the approver is shown it. ``bind``: the
        actions run bound to the screen the approver saw (a stuck approval binds nothing).
        """
        ledger, seat = self.ledger, self._seat
        assert ledger.step is not None
        await self._screen_for_approver()
        started = time.monotonic()
        timeout = seat.config.approval_timeout
        approval = seat.store.create_approval(
            self._task_id, kind, checks, actions, ledger.step.number, ledger.last_screenshot, timeout, elements
        )
        # While the approver looks, learn what changes by itself around the actions' points.
        points = [p for a in actions for p in _binding_points(a)] if bind else []
        watch = ScreenWatch(seat.driver, points, BINDING_RADIUS) if points and ledger.last_screenshot else None
        if watch is not None:
            await watch.start()
        try:
            outcome = await seat.approvals.wait(approval["id"], timeout)
        finally:
            if watch is not None:
                await watch.stop()
        ledger.add_approval_ms(ms_since(started))
        if outcome == "approved":
            await self._set_watch(watch)
            return True
        if outcome == "cancelled":
            return False
        raise ApprovalError(seat.approvals.refusal(approval["id"], outcome, timeout), id=approval["id"],
                            outcome=outcome)

    async def _screen_for_approver(self) -> None:
        """A model that acts before it has looked (its first output an action): the approver is shown
        the screen as it is now, and the approval binds to that frame, as to the model's own screenshot."""
        if self.ledger.last_screenshot is not None:
            return
        shot = await self._seat.driver.call("screenshot")
        self.ledger.approver_screenshot(shot["image_url"])

    async def _check_binding(self, action: dict[str, Any]) -> None:
        """Refuse an approved pointer action if the screen around its points changed since it was shown."""
        if self.ledger.last_screenshot is None:
            raise ApprovalError(
                "the approved action has no screenshot to compare with: the model acted before seeing the screen",
                action=action,
            )
        if self._watch is None:
            await self._set_watch(ScreenWatch(self._seat.driver, [], BINDING_RADIUS))
        assert self._watch is not None
        # Off-screen points clip to equal (empty) patches; the driver's bounds check rejects them.
        changed = await self._watch.changed_point(_binding_points(action))
        if changed is not None:
            x, y = changed
            raise ApprovalError(
                f"the screen around ({x}, {y}) changed since it was approved; the action was not run",
                x=x,
                y=y,
                action=action,
            )

    async def _set_watch(self, watch: ScreenWatch | None) -> None:
        if self._watch is not None and self._watch is not watch:
            await self._watch.stop()
        self._watch = watch


def _binding_points(action: dict[str, Any]) -> list[tuple[int, int]]:
    """The points an approved pointer action must find unchanged: its point, a drag's two ends."""
    if action.get("type") not in POINTER_ACTIONS:
        return []
    if action.get("type") == "drag":
        path = [(p.get("x"), p.get("y")) for p in action.get("path") or [] if isinstance(p, dict)]
        points = path[:1] + path[-1:]
    else:
        points = [(action.get("x"), action.get("y"))]
    # Malformed points are the driver's to reject; only whole integer points are compared.
    return [(x, y) for x, y in points if isinstance(x, int) and isinstance(y, int)]
