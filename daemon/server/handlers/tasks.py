"""``submit``, ``list``, ``show``, ``follow``, ``cancel`` and ``interrupt``: the task queue.

A submit with an idempotency key (``key``) that its submitter has already recorded queues nothing
and replies with that task and ``"existing": true``: the key decides, whatever else the request
says (its prompt, spec or limits are not compared nor checked again), so a client that lost the
reply, or lost the daemon, may send the same request again and never makes a second task. A key
is its submitter's: the same key from another uid is that uid's own, and names another task.
Submits of one key that race (each with its spec's files in flight) all get the one task: the
store looks the key up again in the transaction that would insert (``Store.submit_once``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from cud.budget import BUDGET_TASK_KEYS, format_amount, parse_amount
from cud.daemon.budget.accepted import at_submit
from cud.daemon.config import Config
from cud.daemon.server.handlers.base import Context
from cud.daemon.server.handlers.spec_files import check_spec_file_sizes, receive_spec_files
from cud.daemon.targets.rules import parse_rules
from cud.errors import AccessDenied, ConfigError, ProtocolError, SpecError, StorageFull, WrongState
from cud.protocol import (
    APPROVAL_MODE_STRICTNESS,
    FINAL_STATES,
    LIST_PAGE,
    MAX_MESSAGE_BYTES,
    CancelRequest,
    EncodedItems,
    EventView,
    FollowRequest,
    InterruptRequest,
    ListRequest,
    ShowRequest,
    SubmitRequest,
    TaskView,
    encode_json,
    event_message,
)
from cud.seat_needs import SeatNeeds
from cud.spec import Spec
from cud.spec.wire import spec_from_request

__all__ = ()

#: What an ``ok`` reply adds around its result: ``{"v":2,"ok":true,"result":}`` and the newline, with room to spare.
_ENVELOPE_BYTES = 64


def _at_most(request: SubmitRequest, field: str, limit: int, unit: str) -> int:
    """The task's ``field``, the daemon's own by default; a submitter may ask for less, never more.

    The limit is the daemon's config key of the same name: the error names it, so whoever
    runs the daemon knows what to raise.
    """
    value: int = int(request.get(field, limit))  # type: ignore[call-overload]  # field: one of SubmitRequest's
    if value > limit:
        raise ProtocolError(f"'submit' field {field!r} is {value}{unit}, above the daemon's limit of {limit}{unit} "
                            f"(its config key {field!r})", field=field, value=value, limit=limit, config_key=field)
    return value


def _budgets(request: SubmitRequest, config: Config, model: str) -> dict[str, Any]:
    """The task's budgets: its own, else the daemon's; never above the daemon's (None: no limit).

    A money budget, and a daemon that caps the day's spend, need the model's price: a cost
    nobody can compute cannot be held to a limit, so such a task is refused here, by name. The
    price of now is kept with the task (``price``): its lines are counted by it even if the
    config's changes before it runs (daemon/budget/accepted.py).
    """
    budgets: dict[str, Any] = {}
    for key in BUDGET_TASK_KEYS:
        limit = getattr(config, key)
        given = request.get(key)
        value = limit if given is None else parse_amount(given) if key == "max_cost" else int(given)  # type: ignore[call-overload]  # key: one of SubmitRequest's
        if value is not None and limit is not None and value > limit:
            shown = format_amount(value) if key == "max_cost" else value
            ceiling = format_amount(limit) if key == "max_cost" else limit
            raise ProtocolError(f"'submit' field {key!r} is {shown}, above the daemon's limit of {ceiling} "
                                f"(its config key {key!r})", field=key, value=str(shown), limit=str(ceiling),
                                config_key=key)
        budgets[key] = value
    if config.budget.price(model) is None:
        needs = None
        if request.get("max_cost") is not None:
            needs = "'submit' field 'max_cost'"
        elif budgets["max_cost"] is not None:
            needs = "the daemon's config key 'max_cost'"
        elif config.budget.daily_cost is not None:
            needs = "the daemon's [budget] daily_cost"
        if needs is not None:
            raise ProtocolError(f"{needs} needs a price for model {model!r}, and the daemon's [budget.prices] has "
                                "none: its cost could not be counted", field="model", value=model,
                                config_key="budget.prices")
    budgets["price"] = at_submit(config.budget, model)
    return budgets


async def submit(ctx: Context, request: SubmitRequest) -> dict[str, Any]:
    daemon, peer = ctx.daemon, ctx.peer
    daemon.access_rights.require_submit(peer, "submit tasks")
    key = request.get("key")
    if key is not None and (known := daemon.store.task_by_key(peer.uid, key)) is not None:
        return {"id": known["id"], "task": known, "existing": True}  # before any upload: no bytes for nothing
    config = daemon.config
    approval = request.get("approval", config.approval)
    if APPROVAL_MODE_STRICTNESS[approval] < APPROVAL_MODE_STRICTNESS[config.approval]:
        raise AccessDenied(
            f"approval mode {approval!r} is looser than the daemon's {config.approval!r} (its config key "
            "'approval'); a task may only be stricter",
            field="approval",
            value=approval,
            config_key="approval",
        )
    max_steps = _at_most(request, "max_steps", config.max_steps, "")
    max_duration = _at_most(request, "max_duration", config.max_duration, " s")
    model = request.get("model", config.model)
    _check_approval_for_api(config, model, approval)
    daemon.clients.check(model)  # a model that needs the daemon's own key, when it started without one
    seat = request.get("seat")
    if seat is not None:
        daemon.seats.get(seat)  # NotFound names the seats there are; an unavailable one is fine: it waits
    spec, files = _spec(ctx, request)
    needs = SeatNeeds.of(request)
    daemon.seats.check_needs(needs, session=spec is not None and spec.needs_session)
    # The budgets after the seat: a task no seat could take is refused for that, not for a price.
    budgets = _budgets(request, config, model)
    if not daemon.reserve.has_room():
        raise StorageFull(
            f"the disk of the state directory {str(config.state_dir)!r} is full; the task was not queued",
            path=str(config.state_dir),
        )
    rules = request.get("rules") or []
    try:
        parse_rules("rules", rules, stricter_only=True, what="'submit' field" if spec is None else "spec key")
    except ConfigError as exc:
        raise (ProtocolError if spec is None else SpecError)(exc.message, **exc.details) from None
    guard = config.guard.for_task({k: request[k] for k in ("repeat_limit", "cycle_limit", "on_stuck")
                                   if k in request})
    spool = await receive_spec_files(ctx, files)  # after every check: a refusal costs the client no upload
    try:
        # The key looked up again with the insert: another submit of it may have been stored while our files came.
        task, existing = daemon.store.submit_once(
            request["prompt"], model, max_steps, approval, peer.uid, peer.name,
            max_duration, seat, rules, spec, spool, key, budgets, guard, needs,
        )
    finally:
        if spool is not None:
            spool.close()
    if existing:
        return {"id": task["id"], "task": daemon.access_rights.task_for(peer, task), "existing": True}
    daemon.seats.dispatch()
    task = daemon.store.task(task["id"])  # dispatch may have started it
    return {"id": task["id"], "task": daemon.access_rights.task_for(peer, task), "existing": False}


def _check_approval_for_api(config: Config, model: str, approval: str) -> None:
    """Refuse ``safety`` on an API that sends no safety checks: there it would mean "never ask"."""
    entry = config.models.get(model)
    if entry is None or entry.api == "responses" or approval != "safety":
        return
    others = " or ".join(repr(mode) for mode in APPROVAL_MODE_STRICTNESS if mode != "safety")
    raise ProtocolError(
        f"approval mode 'safety' asks only when the model's API sends safety checks, and model {model!r} "
        f"(api {entry.api!r}) sends none: it would never ask. Submit it with approval {others} (with "
        "rules in the daemon's config or the task's to ask about what its actions touch)",
        field="approval", value="safety", model=model, api=entry.api)


def _spec(ctx: Context, request: SubmitRequest) -> tuple[Spec | None, dict[str, int]]:
    """The spec the request carries, checked again here (the same code as cuctl's), and its files' sizes."""
    if "spec" not in request:
        if "files" in request:
            raise ProtocolError("'submit' field 'files' comes only with a 'spec'", field="files")
        return None, {}
    spec, files = spec_from_request(request)
    check_spec_file_sizes(files, ctx.daemon.config.sessions)
    acting = spec.in_session()
    if acting:
        # Setup steps, commands and files run code or touch files on the seat: the right to operate it.
        ctx.daemon.access_rights.require_operate(ctx.peer, f"submit a spec whose {acting[0]!r} acts in a seat's session")
    seats = ctx.daemon.seats
    if spec.needs_session:
        why = f"spec key {(spec.in_session() or ['reset'])[0]!r}"
        if spec.seat is not None and seats.get(spec.seat).session is None:
            raise SpecError(f"seat {spec.seat!r} has no session (user and home in its [[seats]] table), which "
                            f"{why} needs", key=(spec.in_session() or ["reset"])[0], seat=spec.seat)
        if spec.seat is None and not any(seat.session is not None for seat in seats):
            raise SpecError(f"no seat of this daemon has a session (user and home in [[seats]]), which {why} needs",
                            key=(spec.in_session() or ["reset"])[0])
    return spec, files


async def list_tasks(ctx: Context, request: ListRequest) -> EncodedItems:
    """One page of tasks, the newest ``limit`` below ``before``, oldest first (a request without them, as
    clients from before paging send, gets the newest LIST_PAGE); with ``key``/``key_prefix``, only the
    peer's own (a key names a task only for its submitter)."""
    peer, rights = ctx.peer, ctx.daemon.access_rights
    tasks = ctx.daemon.store.tasks(uid=peer.uid, key=request.get("key"), key_prefix=request.get("key_prefix"),
                                   limit=request.get("limit", LIST_PAGE), before=request.get("before"))
    return _fitting([rights.task_for(peer, task) for task in tasks])


def _fitting(tasks: list[TaskView]) -> EncodedItems:
    """The newest of ``tasks`` whose views fit one reply (a prompt alone may be 64 KiB): the client's next
    page, ``before`` the first of them, starts where this one stopped. The newest alone if none fits, so
    that the reply's own error says how big it is rather than an empty page saying there is no more.
    Each view is encoded once: the bytes measured are the bytes sent."""
    room = MAX_MESSAGE_BYTES - _ENVELOPE_BYTES
    kept: list[bytes] = []
    for task in reversed(tasks):
        item = encode_json(task)
        room -= len(item) + 1
        if room < 0 and kept:
            break
        kept.append(item)
    kept.reverse()
    return EncodedItems(kept)


async def show(ctx: Context, request: ShowRequest) -> TaskView:
    return ctx.daemon.access_rights.task_for(ctx.peer, ctx.daemon.store.task(request["id"]))


async def follow(ctx: Context, request: FollowRequest) -> TaskView:
    """Stream the task's events (past ones first) until its ``end`` event; reply with the task."""
    store, task_id, rights = ctx.daemon.store, request["id"], ctx.daemon.access_rights
    task = store.task(task_id)  # NotFound before subscribing
    live: asyncio.Queue[EventView] = asyncio.Queue()
    unsubscribe = store.subscribe(lambda event: live.put_nowait(event) if event["task_id"] == task_id else None)
    try:
        last = 0
        for event in store.events(task_id):
            await ctx.send(dict(event_message(rights.event_for(ctx.peer, task, event))))
            last = event["seq"]
            if event["kind"] == "end":
                return rights.task_for(ctx.peer, store.task(task_id))
        while True:
            event = await live.get()
            if event["seq"] <= last:
                continue
            await ctx.send(dict(event_message(rights.event_for(ctx.peer, task, event))))
            last = event["seq"]
            if event["kind"] == "end":
                return rights.task_for(ctx.peer, store.task(task_id))
    finally:
        unsubscribe()


async def cancel(ctx: Context, request: CancelRequest) -> dict[str, Any]:
    daemon, peer, task_id = ctx.daemon, ctx.peer, request["id"]
    daemon.access_rights.require_own_task(peer, daemon.store.task(task_id), "cancel")
    before = daemon.store.cancel(task_id, peer.uid, peer.name)
    if before not in FINAL_STATES and before != "queued":
        daemon.seats.cancel(task_id, f"cancelled by {peer.name} (uid {peer.uid})")
    return {"id": task_id, "state_before": before, "state": daemon.store.task(task_id)["state"]}


async def interrupt(ctx: Context, request: InterruptRequest) -> dict[str, Any]:
    """End a task that has not ended ``interrupted`` with the given reason (who asked is in the audit and
    the ``interrupt_requested`` event): a queued one at once, one under way as ``cancel`` stops it. One
    that already ended ``interrupted`` gets the reason added: a fleet node whose machine was lost comes
    back to find its daemon ended the attempt at start-up, and names the retry on it as well."""
    daemon, peer, task_id, reason = ctx.daemon, ctx.peer, request["id"], request["reason"]
    task = daemon.store.task(task_id)
    daemon.access_rights.require_own_task(peer, task, "interrupt")
    if task["state"] in FINAL_STATES and task["state"] != "interrupted":
        raise WrongState(f"task {task_id} has already ended ({task['state']}); only a task that has not ended (or "
                         "ended interrupted) can be interrupted", id=task_id, state=task["state"])
    before = daemon.store.interrupt(task_id, peer.uid, peer.name, reason)
    if before not in ("queued", "interrupted"):
        daemon.seats.interrupt(task_id, reason)
    return {"id": task_id, "state_before": before, "state": daemon.store.task(task_id)["state"]}
