"""Who may do what over the socket, decided from the peer's SO_PEERCRED credentials.

The socket's file mode is the first fence; this is the second, so a socket
opened up by mistake (chmod 0666) still refuses strangers. By default only root
and the daemon's own user may submit, approve and operate; ``[access]`` in the
config adds users and groups. Operating (``operate_users``/``operate_groups``) is
running code and moving files on a seat's session: ``cuctl exec``, ``cp``,
``clipboard``, ``reset`` and a spec's steps and checks that act in the session. Submitting a
prompt does not need it. A task's collected files are the seat's files, so reading them
follows the same right (:meth:`AccessRights.may_read_collected`), and so does reading whatever else of
the seat's session a task's record quotes (:meth:`AccessRights.task_for`, :meth:`AccessRights.event_for`).
"""

from __future__ import annotations

import dataclasses
import grp
import os
import pwd
import socket
import struct

from cud.daemon.config import Access
from cud.errors import AccessDenied, SpecError
from cud.protocol import ArtifactView, CheckResultView, ErrorInfo, EventView, TaskView
from cud.spec import parse_spec
from cud.spec.checks import Check
from cud.spec.setup import SetupStep, failure_message, unlooked_why

__all__ = ()

#: A check's ``why`` where what it saw in a seat's session is withheld from its reader.
WITHHELD = "withheld: what this check saw in the seat's session is read with the operate right"
#: Why a setup step failed, where that quotes the seat's session (a ``run``'s output, say).
WITHHELD_SETUP = "withheld: what this step met in the seat's session is read with the operate right"
#: Why a collected file was not kept (it names what the home held there).
WITHHELD_ARTIFACT = "withheld: why this file was not kept is read with the operate right"

# Linux's SO_PEERGROUPS (since 4.13): the peer's supplementary groups as the kernel sees them.
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)


@dataclasses.dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int
    groups: frozenset[int]
    name: str

    @property
    def person(self) -> dict[str, object]:
        return {"uid": self.uid, "name": self.name}


def peer_of(sock: socket.socket) -> Peer:
    """The credentials of the process at the other end of a connected Unix socket."""
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    groups = {gid}
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, 4 * 256)
        groups.update(struct.unpack(f"{len(raw) // 4}I", raw))
    except OSError:
        pass  # older kernel or more than 256 groups: the primary group still counts
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"uid{uid}"
    return Peer(pid=pid, uid=uid, gid=gid, groups=frozenset(groups), name=name)


class AccessRights:
    """The resolved access lists: numeric uids and gids, fixed at start-up."""

    def __init__(self, access: Access) -> None:
        own = {0, os.geteuid()}
        self.submit_uids = own | {_uid(n) for n in access.submit_users}
        self.approve_uids = own | {_uid(n) for n in access.approve_users}
        self.operate_uids = own | {_uid(n) for n in access.operate_users}
        self.submit_gids = {_gid(n) for n in access.submit_groups}
        self.approve_gids = {_gid(n) for n in access.approve_groups}
        self.operate_gids = {_gid(n) for n in access.operate_groups}

    def may_submit(self, peer: Peer) -> bool:
        return peer.uid in self.submit_uids or bool(peer.groups & self.submit_gids)

    def may_approve(self, peer: Peer) -> bool:
        return peer.uid in self.approve_uids or bool(peer.groups & self.approve_gids)

    def may_operate(self, peer: Peer) -> bool:
        return peer.uid in self.operate_uids or bool(peer.groups & self.operate_gids)

    def may_connect(self, peer: Peer) -> bool:
        return self.may_submit(peer) or self.may_approve(peer) or self.may_operate(peer)

    def require_submit(self, peer: Peer, what: str) -> None:
        if not self.may_submit(peer):
            raise AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not {what}: not in [access] submit_users/submit_groups",
                uid=peer.uid,
                request=what,
            )

    def require_approve(self, peer: Peer, what: str) -> None:
        if not self.may_approve(peer):
            raise AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not {what}: not in [access] approve_users/approve_groups",
                uid=peer.uid,
                request=what,
            )

    def require_operate(self, peer: Peer, what: str) -> None:
        """Refuse, naming the right, a peer that may not run code or move files on a seat's session."""
        if not self.may_operate(peer):
            raise AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not {what}: not in [access] operate_users/operate_groups "
                "(running code and moving files on a seat is the operate right)",
                uid=peer.uid,
                request=what,
                right="operate",
            )

    def may_read_collected(self, peer: Peer, task: TaskView) -> bool:
        """Whether ``peer`` may read what ``task`` took from a seat's session (docs/protocol.md).

        Its collected files, what its checks saw, why a setup step failed: they are the seat's files,
        so whoever may read the seat's files (the operate right) may read them; so may the task's
        submitter when the submitter had that right. Submit refuses a spec that acts in a seat's
        session (``Spec.in_session``: it collects, runs, writes...) from a peer without the operate
        right, so a task whose spec does was submitted with it. Submit or approve rights alone are
        not enough: another submitter's task may have met a home's secrets.
        """
        if self.may_operate(peer):
            return True
        return task["submitter"]["uid"] == peer.uid and _acts_in_session(task)

    def task_for(self, peer: Peer, task: TaskView) -> TaskView:
        """``task`` as ``peer`` may read it: the one place every task view a peer gets passes.

        Another user's idempotency key is hidden (None) from a peer without the approve right: a
        key names a task only for its submitter (docs/protocol.md, ``submit``), so nobody else can
        claim it; still, it says what that user's suite runs next.

        What the task met in the seat's session follows the collected files' rule
        (:meth:`may_read_collected`): a ``file`` check's ``observed`` is the file's first 500
        characters and its ``why`` may quote it; a ``command`` check's, and a failed ``run`` step's
        error, quote what ran as the seat's user printed: the seat's files, as much as a collected
        file is; why a file was not collected names what the home held there. Whether each check
        passed and what it expected, which step failed and how (the spec's own words), and which
        files were kept stay readable to everyone who may read the task.
        """
        if task["key"] is not None and task["submitter"]["uid"] != peer.uid and not self.may_approve(peer):
            task = {**task, "key": None}
        verdict, artifacts = task["verdict"], task["artifacts"]
        withheld: TaskView = {
            **task, "error": _withhold_error(task["error"]),
            "verdict": None if verdict is None else {**verdict, "checks": [_withhold(c) for c in verdict["checks"]]},
            "artifacts": None if artifacts is None else [_withhold_artifact(a) for a in artifacts]}
        # Most tasks quote nothing of the session: then who may read it need not be decided.
        if withheld == task or self.may_read_collected(peer, task):
            return task
        return withheld

    def event_for(self, peer: Peer, task: TaskView, event: EventView) -> EventView:
        """``event`` of ``task`` as ``peer`` may read it: each as the task's view (:meth:`task_for`) shows it.

        A ``check`` event as the verdict shows that check, a failed ``setup`` (or ``postconfig``) step's
        as the task's error, the ``end`` event's error as the task's, a ``collected`` event's files as its
        ``artifacts``.
        """
        kind, data = event["kind"], event["data"]
        if kind == "check":
            withheld: dict[str, object] = dict(_withhold(data))  # type: ignore[arg-type]  # a check event's data
        elif kind in ("setup", "postconfig") and "error" in data:
            withheld = data if _fails_only_looking(data.get("part")) else {**data, "error": WITHHELD_SETUP}
        elif kind == "end" and _quotes_session(data.get("error")):
            withheld = {**data, "error": _withhold_error(data["error"])}
        elif kind == "collected":
            withheld = {**data, "files": [_withhold_artifact(a) for a in data["files"]]}
        else:
            return event
        if withheld == data or self.may_read_collected(peer, task):
            return event
        return {**event, "data": withheld}

    def require_read_collected(self, peer: Peer, task: TaskView) -> None:
        if not self.may_read_collected(peer, task):
            raise AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not read the files task {task['id']} collected from a "
                "seat's home: they are readable with the operate right ([access] operate_users/operate_groups), "
                "or by the task's submitter",
                uid=peer.uid,
                id=task["id"],
                right="operate",
            )

    def require_own_task(self, peer: Peer, task: TaskView, what: str) -> None:
        """A submitter may ``what`` (cancel, pause, resume) their own tasks; an approver anyone's."""
        if self.may_approve(peer):  # approve rights alone are enough: no submit rights needed too
            return
        self.require_submit(peer, f"{what} tasks")
        if task["submitter"]["uid"] != peer.uid:
            raise AccessDenied(
                f"user {peer.name!r} (uid {peer.uid}) may not {what} task {task['id']} of "
                f"{task['submitter']['name']!r}",
                uid=peer.uid,
                id=task["id"],
            )


def _withhold(check: CheckResultView) -> CheckResultView:
    """The check without what it saw, unless its kind only looks at what every reader may see (deny by default).

    A check that did not look because a postconfig step failed saw nothing; its why quotes that step's failure,
    withheld as a failed setup step's is (which step failed stays).
    """
    failed = check.get("postconfig_failed")
    if failed is not None:
        if _fails_only_looking(failed.get("part")):
            return check
        return {**check, "observed": None,
                "why": unlooked_why(failure_message(failed["step"], failed["key"], failed.get("what"), WITHHELD_SETUP))}
    if check["kind"] in Check.ONLY_LOOKS:
        return check
    return {**check, "observed": None, "why": WITHHELD}


def _fails_only_looking(part: object) -> bool:
    """Whether a setup step's failure in ``part`` says only what every reader may see; a part not named
    (a task from before parts were recorded) may quote the session (deny by default)."""
    return part in SetupStep.FAILS_ONLY_LOOKING


def _quotes_session(error: ErrorInfo | None) -> bool:
    """Whether a task's error may quote the seat's session: a setup step's failure that did not only look."""
    if error is None or error["kind"] != "setup_failed":
        return False
    return not _fails_only_looking((error.get("details") or {}).get("part"))


def _withhold_error(error: ErrorInfo | None) -> ErrorInfo | None:
    """The task's error without what its setup step met in the session; still which step failed, and how."""
    if error is None or not _quotes_session(error):
        return error
    details = error.get("details") or {}
    if isinstance(details.get("step"), int) and isinstance(details.get("key"), str):
        return {**error, "message": failure_message(details["step"], details["key"], details.get("what"),
                                                    WITHHELD_SETUP)}
    return {**error, "message": f"a setup step failed: {WITHHELD_SETUP}"}  # a shape this version did not write


def _withhold_artifact(artifact: ArtifactView) -> ArtifactView:
    """A collected file's entry without why it was not kept (its path and that it was not stay)."""
    return artifact if artifact["error"] is None else {**artifact, "error": WITHHELD_ARTIFACT}


def _acts_in_session(task: TaskView) -> bool:
    """Whether ``task``'s spec acts in a seat's session, which submit allowed only with the operate right."""
    if task["spec"] is None:
        return False
    try:
        return bool(parse_spec({"prompt": task["prompt"], **task["spec"]}).in_session())
    except SpecError:  # a spec this version no longer reads: its submitter's right cannot be told
        return False


def _uid(name: str) -> int:
    return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid


def _gid(name: str) -> int:
    return int(name) if name.isdigit() else grp.getgrnam(name).gr_gid
