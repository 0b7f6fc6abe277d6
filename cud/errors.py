"""The one error hierarchy of cud.

Every error carries a message that names the offending value and a ``details``
dict with the same facts in machine-readable form, so the daemon can put them
in a task record and ``cuctl`` can print them without parsing the message.

One class per cause, each with its own ``kind`` (the name on the wire); the wire
dict ``{"kind", "message", "details"}`` is made by :meth:`CudError.to_dict` and
nowhere else. Every kind is listed in docs/protocol.md ("Error kinds"), and
tests/test_error_kinds.py keeps the three in step.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CudError",
    "ConfigError",
    "DriverError",
    "ActionRejected",
    "OutOfBounds",
    "UnknownKey",
    "DisplayUnavailable",
    "DriverTimeout",
    "AuthenticationFailed",
    "ProtocolError",
    "TooManyConnections",
    "AccessDenied",
    "ApprovalError",
    "NotFound",
    "TaskTimeout",
    "TaskStuck",
    "StorageFull",
    "ModelApiError",
    "ModelRequestError",
    "ComputerUseFailed",
    "InternalError",
    "WrongState",
    "PolicyDenied",
    "AccessibilityError",
    "ConnectionFailed",
    "PathRefused",
    "SessionError",
    "SpecError",
    "NotConverted",
    "SetupFailed",
    "BudgetExceeded",
    "BadRequest",
    "ConsoleRefused",
    "FleetError",
]


class CudError(Exception):
    """Base of every error cud raises on purpose."""

    #: Short stable name used on the wire (``{"ok": false, "error": {"kind": ...}}``).
    kind = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "details": self.details}


class ConfigError(CudError):
    """A config file, flag or environment value is invalid."""

    kind = "config"


class DriverError(CudError):
    """A driver could not carry out an action."""

    kind = "driver"


class ActionRejected(DriverError):
    """An action was refused before anything reached the display."""

    kind = "action_rejected"


class OutOfBounds(ActionRejected):
    """A coordinate lies outside the screen."""

    kind = "out_of_bounds"


class UnknownKey(ActionRejected):
    """A key name is not in the key table and is not an X keysym name."""

    kind = "unknown_key"


class DisplayUnavailable(DriverError):
    """The display (X server or VNC server) cannot be reached; the next call reconnects."""

    kind = "display_unavailable"


class DriverTimeout(DisplayUnavailable):
    """The display did not answer within the call's time limit."""

    kind = "driver_timeout"


class AuthenticationFailed(DriverError):
    """The display refused our credentials or offers no security type we support."""

    kind = "authentication_failed"


class ProtocolError(CudError):
    """A socket message is malformed, too large or of an unknown type or version."""

    kind = "protocol"


class TooManyConnections(ProtocolError):
    """The daemon's connection slots are taken (``max_connections``, a user's share of them): try again.

    A ProtocolError by design: it was sent as one (kind ``protocol``) before it had a kind of its own, so a
    client's ``except ProtocolError`` still catches it; on the wire its kind is its own."""

    kind = "too_many_connections"


class AccessDenied(CudError):
    """The peer is not allowed to do what it asked."""

    kind = "access_denied"


class ApprovalError(CudError):
    """An approval was denied, timed out, or no longer matches the screen."""

    kind = "approval"


class NotFound(CudError):
    """What a request names (a task or approval id, a seat, an application) does not exist."""

    kind = "not_found"


class StorageFull(CudError):
    """The state directory's disk has no room: new work is refused, nothing is half-written."""

    kind = "storage_full"


class TaskTimeout(CudError):
    """A task ran past its wall-clock limit (``max_duration``) and was stopped."""

    kind = "timeout"


class TaskStuck(CudError):
    """The model repeated itself on an unchanged screen, or cycled through screens (docs/stuck.md):
    the task ends ``stuck``."""

    kind = "stuck"


class ModelApiError(CudError):
    """The model's API failed a request (an HTTP error, a lost connection); ``details.status`` is the HTTP
    status when there was one."""

    kind = "api"


class ModelRequestError(ModelApiError):
    """The model's API refused a request in a way a setting fixes; the message names the setting.

    A ModelApiError whose cause is known: its own kind, so a client can show the setting."""

    kind = "model_request"


class ComputerUseFailed(CudError):
    """The computer-use loop (the SDK's toolset) refused the model's answer: an invalid action, a malformed
    tool call; the task fails."""

    kind = "computer_use"


class InternalError(CudError):
    """A bug or an unexpected library error: the daemon keeps running, the request or task fails. The message
    names the exception's type (a request's reply says no more: the log has the traceback)."""

    kind = "internal"


class WrongState(CudError):
    """The task is not in a state that allows the request (resume a task that is not paused, say)."""

    kind = "wrong_state"


class PolicyDenied(CudError):
    """A ``[[policy.rules]]`` rule (or a submitter's rule) denied an action: it was not run."""

    kind = "policy_denied"


class AccessibilityError(CudError):
    """The accessibility bus could not be reached, or answered with an error."""

    kind = "accessibility"


class ConnectionFailed(CudError):
    """cuctl or the console could not reach the daemon, or lost it before it answered (client side only)."""

    kind = "connection"


class PathRefused(CudError):
    """A path for a seat's home leads out of it ('..', an absolute path elsewhere, a symlink out) or is no file."""

    kind = "path_refused"


class SessionError(CudError):
    """A seat's session could not do what was asked: a command did not start, a reset did not finish."""

    kind = "session"


class SpecError(CudError):
    """A task spec (docs/specs.md) is invalid: the message names the key path and the value."""

    kind = "spec"


class NotConverted(SpecError):
    """*client*: an OSWorld task that cud has no counterpart for, listed as not converted and never run
    (``cuctl eval --from-osworld --skip-unconvertible``): cud could not do its part, so its outcome is ``error``."""

    kind = "not_converted"


class SetupFailed(CudError):
    """A setup step of a task spec failed: the task fails with this, and the model was never asked."""

    kind = "setup_failed"


class BudgetExceeded(CudError):
    """A task reached one of its budgets (money or tokens, or the day's cap) and was ended: ``on_budget = "fail"``,
    or the person asked denied more."""

    kind = "budget_exceeded"


class BadRequest(CudError):
    """A request to the console's HTTP API (``cuctl console``) is malformed: a bad id, a body that is not the
    JSON object asked for. Console only, never on the socket."""

    kind = "bad_request"


class ConsoleRefused(CudError):
    """The console's gate refused a browser's request: a wrong Host or Origin, no session, a used token, no such
    page. Console only, never on the socket."""

    kind = "console"


class FleetError(CudError):
    """Ray could not carry out a fleet's attempt: its retries were spent (its nodes kept dying), or the remote
    call itself raised (client side, ``cud.fleet``, only)."""

    kind = "fleet"
