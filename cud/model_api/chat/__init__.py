"""Open models served OpenAI-style (chat completions): each model family's prompt and action grammar.

A *format* is one module of this package, named in a ``[models.NAME]`` entry's ``format``. Each
format module follows its model's own repository (its published prompt, its output parser, its
coordinate space) and exposes the names of :class:`ChatFormat`; the daemon's chat adapter and the
scripted chat server use nothing else of it, so a new format is a module beside the others plus a
line in :data:`FORMATS`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:  # the config names formats without Pillow, which a format's module needs (cud[...] extras)
    from cud.model_api.scaling import ScreenScale

__all__ = ("FORMATS", "ChatFormat", "Reply", "Turn", "format_for")

#: Each format's module (a config's ``format`` must name one of these).
FORMATS = {
    "ui-tars": "cud.model_api.chat.uitars",
    "opencua": "cud.model_api.chat.opencua",
    "qwen-vl": "cud.model_api.chat.qwenvl",
}


@dataclasses.dataclass(frozen=True)
class Turn:
    """One past step of a run, as the format puts it back into the next request."""

    #: The screenshot the model was shown at that step (PNG, as sent), or None if it was not kept.
    screenshot: bytes | None
    #: The model's answer at that step, verbatim.
    text: str


@dataclasses.dataclass(frozen=True)
class Reply:
    """One parsed answer of the model.

    ``actions`` are the protocol's action dicts (``click``, ``double_click``, ``drag``, ``keypress``,
    ``move``, ``scroll``, ``type``, ``wait``) at native pixels, every coordinate already mapped with
    :meth:`ScreenScale.to_screen` (which refused any point off the model's screen) and every key
    checked against :mod:`cud.drivers.keys`. Where a grammar acts where the pointer is (pyautogui's
    ``scroll(n)``, a Qwen click without ``coordinate``), the action has no point: a ``click``,
    ``double_click`` or ``scroll`` without ``x``/``y``, a ``drag`` whose ``path`` is its end alone; the
    adapter puts in the native point it last sent the pointer to (and refuses the action if there is
    none). ``final`` is the model's final message when it says it
    is done (the loop ends); ``gave_up`` is true when it ends saying the task failed (OpenCUA's and
    Qwen's ``terminate`` with status failure; ``final`` then holds its words); ``call_user`` its
    question when it asks the user (an approval).
    """

    actions: list[dict[str, Any]]
    thought: str | None = None
    final: str | None = None
    call_user: str | None = None
    gave_up: bool = False


class ChatFormat(Protocol):
    #: The format's name, a key of :data:`FORMATS`.
    NAME: str
    #: At most this many past turns go back into a request (bounded: a step's cost does not grow with the run).
    HISTORY: int

    def space(self, width: int, height: int) -> ScreenScale:
        """The coordinate space the model answers in, for a native ``width`` x ``height`` screen."""

    def image(self, png: bytes, space: ScreenScale) -> bytes:
        """The screenshot as the request carries it (PNG)."""

    def request(self, instruction: str, past: Sequence[Turn], screenshot: bytes,
                space: ScreenScale) -> list[dict[str, Any]]:
        """The chat ``messages`` of one request: the format's prompt with the task's ``instruction``,
        the ``past`` turns the format keeps, and the current ``screenshot`` (from :meth:`image`)."""

    def parse(self, text: str, space: ScreenScale) -> Reply:
        """The model's answer ``text`` as a :class:`Reply`; ComputerUseFailed quoting ``text`` if it does
        not parse (never a guessed action), OutOfBounds or UnknownKey naming the bad coordinate or key."""

    def render(self, actions: Sequence[dict[str, Any]], thought: str = "", final: str | None = None,
               call_user: str | None = None, gave_up: bool = False) -> str:
        """What the model would answer for protocol ``actions`` whose coordinates are in the model's
        space (the scripted chat server's answers): :meth:`parse` of it gives them back at native pixels.
        ValueError for what the format cannot say (an action it has no call for, ``gave_up`` or
        ``call_user`` in a format without them)."""


def format_for(name: str) -> ChatFormat:
    """The format module named ``name`` (the config refused any other name at the daemon's start)."""
    return cast("ChatFormat", importlib.import_module(FORMATS[name]))
