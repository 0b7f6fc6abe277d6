"""The socket protocol between ``cud`` and ``cuctl``: every message, its framing and its checks.

One room, imported by both sides as one module (``from cud.protocol import ...``):

- :mod:`cud.protocol.framing`: one JSON object per line, the version, the reply envelope
  and the streamed messages (``event``, ``chunk``, ``file``, ``ready``);
- :mod:`cud.protocol.requests`: what a client may send, one TypedDict per type;
- :mod:`cud.protocol.request_checks`: each request's fields, their checks and limits;
- :mod:`cud.protocol.replies`: what replies contain (tasks, approvals, events, seats) and their states;
- :mod:`cud.protocol.element_states`: the accessibility state names both sides speak.

Each module's ``__all__`` is its public part, and this package star-imports them all. It keeps
no list of its own: a star import re-exports for type checkers too, while a computed
``__all__`` (``+= framing.__all__``) is one mypy cannot read, and would hide every name.
"""

from __future__ import annotations

from cud.errors import ProtocolError as ProtocolError  # what the checks raise
from cud.protocol.element_states import *
from cud.protocol.framing import *
from cud.protocol.replies import *
from cud.protocol.request_checks import *
from cud.protocol.requests import *
