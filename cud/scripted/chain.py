"""The scripted model's stored responses: ``store`` and ``previous_response_id`` as the API has them.

A response is stored unless its request said ``store: false``. A request naming
``previous_response_id`` continues that response: its input holds only the new
items, and the turn count, the open computer calls and the context's token count
carry on along the chain. An id that was never stored (unknown, or made with
``store: false``) is a 400, as the API answers ``previous_response_not_found``.

Only what the scripted answers need is kept per response (counts and call ids, no
screenshots), and at most :data:`MAX_STORED` responses, oldest dropped first, so a
long-lived server stays small.

Server-side compaction (``context_management: [{"type": "compaction",
"compact_threshold": N}]``) is played too: when a request's context passes the
threshold, the answer starts with a ``compaction`` item (opaque content) and the
context's token count starts again from that item.

Turns are numbered by the computer call a request answers last (see
:class:`CallTurns`), so a client that leaves old turns out of a replayed history,
or drops what a compaction item supersedes, still gets the right next turn.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import threading
from typing import Any

__all__ = ()

MAX_STORED = 10_000
#: Tokens the scripted model charges for one image, whatever its size (the API's are similar per tile).
IMAGE_TOKENS = 1000


@dataclasses.dataclass(frozen=True)
class Stored:
    turns: int  # computer_call_output items along the chain, this response's request included
    calls: dict[str, tuple[str, ...]]  # this response's computer calls: call_id -> pending safety check ids
    context_tokens: int  # tokens of the whole context this response saw, plus its output


@dataclasses.dataclass(frozen=True)
class Context:
    """What a request continues: the turns before its input and the calls it may answer."""

    turns: int = 0
    calls: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    tokens: int = 0  # tokens of the context before this request's input (cached by the API)


class ChainError(Exception):
    def __init__(self, message: str, code: str, param: str) -> None:
        super().__init__(message)
        self.code, self.param = code, param


class Chains:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: collections.OrderedDict[str, Stored] = collections.OrderedDict()

    def context(self, previous: object) -> Context:
        if previous is None:
            return Context()
        if not isinstance(previous, str) or not previous:
            raise ChainError(f"Invalid 'previous_response_id': {previous!r}.", "invalid_value", "previous_response_id")
        with self._lock:
            stored = self._stored.get(previous)
        if stored is None:
            raise ChainError(f"Previous response with id '{previous}' not found.", "previous_response_not_found",
                             "previous_response_id")
        return Context(turns=stored.turns, calls=stored.calls, tokens=stored.context_tokens)

    def keep(self, response_id: str, stored: Stored) -> None:
        with self._lock:
            self._stored[response_id] = stored
            while len(self._stored) > MAX_STORED:
                self._stored.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._stored)


def compaction_threshold(body: dict[str, Any]) -> int | None:
    for entry in body.get("context_management") or []:
        if isinstance(entry, dict) and entry.get("type") == "compaction":
            threshold = entry.get("compact_threshold")
            return threshold if isinstance(threshold, int) and not isinstance(threshold, bool) else 0
    return None


def compaction_item(item_id: str, secret: str) -> dict[str, Any]:
    return {"type": "compaction", "id": item_id, "encrypted_content": base64.b64encode(secret.encode()).decode()}


class CallTurns:
    """The turn of every computer call the server made (the newest :data:`MAX_STORED` of them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: collections.OrderedDict[str, int] = collections.OrderedDict()

    def add(self, call_id: str, turn: int) -> None:
        with self._lock:
            self._turns[call_id] = turn
            while len(self._turns) > MAX_STORED:
                self._turns.popitem(last=False)

    def get(self, call_id: object) -> int | None:
        with self._lock:
            return self._turns.get(call_id) if isinstance(call_id, str) else None
