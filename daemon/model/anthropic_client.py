"""The Anthropic client of a ``[models]`` entry with ``api = "anthropic"``: metered as the OpenAI one is.

Imported only when the config has such an entry: the anthropic package is an optional extra
(``cud[anthropic]``).
"""

from __future__ import annotations

from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

from cud.daemon.model.client import METER_HOOKS

__all__ = ("make_anthropic_client",)


def make_anthropic_client(api_key: str, base_url: str | None, max_retries: int) -> AsyncAnthropic:
    """One client per entry, shared by every seat; each attempt counted by :func:`~cud.daemon.model.client.metering`."""
    http = DefaultAsyncHttpxClient(event_hooks=METER_HOOKS)
    return AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries, http_client=http)
