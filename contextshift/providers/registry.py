"""``make_client``: a :class:`ProviderClient` for a provider kind (V3)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from .anthropic import AnthropicClient
from .base import ProviderClient, UnknownProviderKind
from .http import MAX_REPLY_BYTES, HTTPProviderClient, RetryPolicy, Timeouts
from .openai import OpenAIClient, OpenAICodexClient

CLIENT_CLASSES: Mapping[str, type[HTTPProviderClient]] = {
    "openai": OpenAIClient,
    "anthropic": AnthropicClient,
    "openai-codex": OpenAICodexClient,
}

#: The provider kinds the service accepts.
KINDS: tuple[str, ...] = tuple(CLIENT_CLASSES)


def enforces_output_limit(kind: str) -> bool:
    """C5: whether models of this provider kind honour ``max_tokens`` (False for ``openai-codex``)."""
    try:
        return CLIENT_CLASSES[kind].enforces_output_limit
    except KeyError:
        raise UnknownProviderKind(kind) from None


def make_client(
    kind: str,
    base_url: str,
    api_key: str | None = None,
    *,
    connect_timeout: float = 10.0,
    read_timeout: float = 120.0,
    timeouts: Timeouts | None = None,
    retries: int = 2,
    retry: RetryPolicy | None = None,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> ProviderClient:
    """A client for ``kind`` (``openai``, ``anthropic`` or ``openai-codex``).

    ``timeouts`` / ``retry`` override ``connect_timeout``, ``read_timeout`` and ``retries`` when given.
    A passed ``http_client`` is shared and not closed by ``aclose``. ``max_reply_bytes`` is the hard limit of
    a reply's text (a stream is cut there and kept; see :func:`~contextshift.providers.http.reply_cap`).
    """
    try:
        cls = CLIENT_CLASSES[kind]
    except KeyError:
        raise UnknownProviderKind(kind) from None
    return cls(
        base_url,
        api_key,
        timeouts=timeouts or Timeouts(connect=connect_timeout, read=read_timeout),
        retry=retry or RetryPolicy(retries=retries),
        headers=headers,
        http_client=http_client,
        max_reply_bytes=max_reply_bytes,
    )
