"""The one error hierarchy of cud.

Every error carries a message that names the offending value and a ``details``
dict with the same facts in machine-readable form, so the daemon can put them
in a task record and ``cuctl`` can print them without parsing the message.
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
    "AccessDenied",
    "ApprovalError",
    "NotFound",
    "TaskTimeout",
    "StorageFull",
    "ModelRequestError",
    "PolicyDenied",
    "AccessibilityError",
    "ConnectionFailed",
    "PathRefused",
    "SessionError",
    "SpecError",
    "SetupFailed",
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


class ModelRequestError(CudError):
    """The model's API refused a request in a way a setting fixes; the message names the setting."""

    kind = "model_request"


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


class SetupFailed(CudError):
    """A setup step of a task spec failed: the task fails with this, and the model was never asked."""

    kind = "setup_failed"


class BudgetExceeded(CudError):
    """A task reached one of its budgets (money or tokens, or the day's cap) and was ended: ``on_budget = "fail"``,
    or the person asked denied more."""

    kind = "budget_exceeded"
