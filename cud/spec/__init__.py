"""A task spec: the prompt, setup steps, checks and what to collect, checked once for cuctl and the daemon.

The schema (docs/specs.md) is defined here only: ``cuctl submit --spec`` parses a
file with it, and the daemon parses what arrives over the socket with it again.
"""

from __future__ import annotations

from cud.spec.checks import Check, CheckKind
from cud.spec.matching import Match
from cud.spec.schema import Collect, Spec, parse_spec
from cud.spec.setup import SetupKind, SetupStep, WaitFor

__all__ = ("Check", "CheckKind", "Collect", "Match", "SetupKind", "SetupStep", "Spec", "WaitFor", "parse_spec")
