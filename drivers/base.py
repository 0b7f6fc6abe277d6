"""What every cud driver offers beyond the SDK's ``ComputerDriver`` protocol.

The openai SDK calls the nine action methods. The daemon also needs to know the
screen size, to release whatever a crashed run left held, to compare the pixels
around an action's target with what an approver saw, and to close cleanly.
Concrete drivers (``x11``, ``vnc``) validate every action with
:mod:`cud.drivers.actions` before anything reaches the display.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .actions import plan

if TYPE_CHECKING:
    from openai.lib.computer import ComputerActionInput, Screenshot

__all__ = ()


class Driver(abc.ABC):
    """A synchronous driver for one display. Not thread-safe: use it from one thread."""

    #: Seconds a model's ``wait`` action waits.
    wait_seconds: float = 1.0

    @property
    @abc.abstractmethod
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of the screen in native pixels, as of now."""

    # -- the SDK's ComputerDriver methods --------------------------------------------
    # Every input action is validated as a whole and then executed by ``_act``; the
    # driver decides how its plan reaches the display.
    @abc.abstractmethod
    def _act(self, action: ComputerActionInput) -> object:
        """Validate ``action`` with ``actions.plan`` and run it; send nothing if it is invalid."""

    def click(self, action: ComputerActionInput) -> None:
        self._act(action)

    def double_click(self, action: ComputerActionInput) -> None:
        self._act(action)

    def drag(self, action: ComputerActionInput) -> None:
        self._act(action)

    def keypress(self, action: ComputerActionInput) -> None:
        self._act(action)

    def move(self, action: ComputerActionInput) -> None:
        self._act(action)

    def scroll(self, action: ComputerActionInput) -> None:
        self._act(action)

    def type(self, action: ComputerActionInput) -> None:
        self._act(action)

    def wait(self, action: ComputerActionInput, cancelled: Callable[[], bool] | None = None) -> None:
        """Sleep ``wait_seconds``; the SDK passes ``cancelled`` so a cancel ends it early."""
        plan(action, (1, 1))  # a wait has nothing to check but its type
        deadline = time.monotonic() + self.wait_seconds
        while (left := deadline - time.monotonic()) > 0:
            if cancelled is not None and cancelled():
                return
            time.sleep(min(left, 0.05))

    @abc.abstractmethod
    def screenshot(self) -> Screenshot: ...

    # -- what the daemon needs besides ----------------------------------------------
    @abc.abstractmethod
    def peek(self) -> Screenshot:
        """The screen as it is now, for a person (``cuctl screenshot``).

        Unlike ``screenshot()`` it neither waits for the screen to settle nor becomes
        the frame approvals are bound to: looking must not change what was approved.
        """

    @abc.abstractmethod
    def probe(self) -> tuple[int, int]:
        """One round trip to the display, sending no input: its screen size if it answers.

        Raises DisplayUnavailable or DriverTimeout if it does not (the daemon's seat
        health check, so it must cost next to nothing).
        """

    def rest(self) -> None:  # noqa: B027 (a hook with nothing to do by default, not abstract)
        """Between tasks: let go of what only a task needs — the last screenshot's frame (approvals
        bind to it) and the encoder's copy of it. The next screenshot makes them again."""

    @property
    def pid(self) -> int | None:
        """The process that talks to the display when it is not this one (:mod:`cud.drivers.worker`), else None."""
        return None

    @abc.abstractmethod
    def release_all(self) -> None:
        """Release every key and mouse button held on the display (start-up after a crash)."""

    @abc.abstractmethod
    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        """Raw pixels of the square of ``radius`` around (x, y), clipped to the screen.

        With ``from_last_screenshot`` the pixels come from the frame behind the last
        ``screenshot()`` this driver returned (what the model and an approver saw);
        otherwise from the screen as it is now. Equal bytes mean an unchanged target.
        """

    @abc.abstractmethod
    def fingerprint(self) -> Any:
        """The fingerprint (:class:`cud.drivers.frames.Fingerprinter`) of the frame behind the last
        ``screenshot()``: a small array, one hash per tile, that a task's stuck guard keeps."""

    def screenshot_and_fingerprint(self) -> tuple[Screenshot, Any]:
        """``screenshot()`` and the fingerprint of its frame, in one call: a task's stuck guard wants both each
        step, and each call that crosses to the driver's thread (or process) waits its turn on a busy daemon."""
        shot = self.screenshot()
        return shot, self.fingerprint()

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything held and drop the connection. Never hangs."""

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
