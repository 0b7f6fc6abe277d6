"""cuctl metrics: the daemon's metrics in the Prometheus text format, printed as the daemon made them."""

from __future__ import annotations

import argparse
import sys

from cud.cuctl.client import Client

__all__ = ()


def metrics(client: Client, args: argparse.Namespace) -> int:
    # The text format is already machine-readable, so --json prints the same text:
    # one output for people and for tools (prometheus_client's parser reads it).
    text = client.call("metrics")
    sys.stdout.write(text)
    return 0
