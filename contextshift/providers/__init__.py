"""Provider adapters (V3): OpenAI-compatible Chat Completions and Anthropic Messages over ``httpx``.

Typical use::

    from contextshift.providers import make_client, chat_request

    client = make_client("anthropic", base_url, api_key)
    request = chat_request(client.kind, messages, model="claude-x", max_tokens=512, stream=True)
    body = client.request_body(request)          # exactly what will be sent: count it (N1)
    async with client.stream(request) as events:
        async for event in events:               # TextDelta ..., then one Finished
            ...
    await client.aclose()

Every failure is a :class:`ProviderError` with a normalized ``code`` (A2) and contextshift's own message.
"""

from ..core.vocabulary import ProviderKind
from .anthropic import AnthropicClient
from .base import (
    ERROR_CODES,
    GENERATION_FAILED,
    PROVIDER_AUTH,
    PROVIDER_BAD_REQUEST,
    PROVIDER_CONNECTION_REFUSED,
    PROVIDER_CONTEXT_LENGTH,
    PROVIDER_DNS_FAILED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_SERVER_ERROR,
    PROVIDER_TIMEOUT,
    PROVIDER_TLS_FAILED,
    PROVIDER_UNAVAILABLE,
    REPLY_TOO_LARGE,
    ChatRequest,
    ChatResult,
    ChatStream,
    Finished,
    ListedModel,
    ProviderClient,
    ProviderError,
    StreamEvent,
    TextDelta,
    UnknownProviderKind,
    Usage,
)
from .http import MAX_REPLY_BYTES, RetryPolicy, Timeouts, reply_cap
from .openai import OpenAIClient, OpenAICodexClient
from .registry import KINDS, enforces_output_limit, make_client
from .serialize import (
    anthropic_body,
    chat_request,
    openai_body,
    request_body,
    to_anthropic_messages,
    to_openai_messages,
)

__all__ = [
    "ERROR_CODES",
    "GENERATION_FAILED",
    "KINDS",
    "MAX_REPLY_BYTES",
    "PROVIDER_AUTH",
    "PROVIDER_BAD_REQUEST",
    "PROVIDER_CONNECTION_REFUSED",
    "PROVIDER_CONTEXT_LENGTH",
    "PROVIDER_DNS_FAILED",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_SERVER_ERROR",
    "PROVIDER_TIMEOUT",
    "PROVIDER_TLS_FAILED",
    "PROVIDER_UNAVAILABLE",
    "REPLY_TOO_LARGE",
    "AnthropicClient",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "Finished",
    "ListedModel",
    "OpenAIClient",
    "OpenAICodexClient",
    "ProviderClient",
    "ProviderError",
    "ProviderKind",
    "RetryPolicy",
    "StreamEvent",
    "TextDelta",
    "Timeouts",
    "UnknownProviderKind",
    "Usage",
    "anthropic_body",
    "chat_request",
    "enforces_output_limit",
    "make_client",
    "openai_body",
    "reply_cap",
    "request_body",
    "to_anthropic_messages",
    "to_openai_messages",
]
