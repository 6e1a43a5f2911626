"""V3/C5: ``make_client`` kinds, the ``openai-codex`` flag, options and client hygiene."""

from __future__ import annotations

import httpx
import pytest

from contextshift.core import Message
from contextshift.providers import (
    KINDS,
    AnthropicClient,
    OpenAIClient,
    OpenAICodexClient,
    ProviderClient,
    RetryPolicy,
    Timeouts,
    UnknownProviderKind,
    chat_request,
    enforces_output_limit,
    make_client,
)
from tests.fakes.server import FakeProvider

from .conftest import API_KEY, ClientFactory


def test_kinds() -> None:
    assert set(KINDS) == {"openai", "anthropic", "openai-codex"}


@pytest.mark.parametrize(
    ("kind", "cls", "enforces"),
    [("openai", OpenAIClient, True), ("anthropic", AnthropicClient, True), ("openai-codex", OpenAICodexClient, False)],
)
async def test_make_client_builds_the_right_client(kind: str, cls: type, enforces: bool) -> None:
    client = make_client(kind, "http://127.0.0.1:1", API_KEY)
    try:
        assert type(client) is cls
        assert isinstance(client, ProviderClient)
        assert client.kind == kind
        assert client.enforces_output_limit is enforces
        assert enforces_output_limit(kind) is enforces
        assert API_KEY not in repr(client)
    finally:
        await client.aclose()


async def test_openai_codex_speaks_the_openai_protocol(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    client = client_for("openai-codex")
    assert client.enforces_output_limit is False
    result = await client.complete(chat_request("openai-codex", [Message("user", "hi")], model="codex", max_tokens=9))
    assert result.text == "Echo: hi"
    sent = fake_provider.last
    assert sent.protocol == "openai"
    assert sent.path == "/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


def test_unknown_kind() -> None:
    with pytest.raises(UnknownProviderKind) as caught:
        make_client("gemini", "http://127.0.0.1:1")
    assert caught.value.code == "UNKNOWN_PROVIDER_KIND"
    assert isinstance(caught.value, ValueError)
    with pytest.raises(UnknownProviderKind):
        enforces_output_limit("gemini")


async def test_timeouts_and_retries_are_configurable() -> None:
    client = make_client("openai", "http://127.0.0.1:1", connect_timeout=1.5, read_timeout=7.0, retries=4)
    try:
        assert isinstance(client, OpenAIClient)
        assert client.timeouts == Timeouts(connect=1.5, read=7.0)
        assert client.retry.retries == 4
    finally:
        await client.aclose()
    defaults = make_client("anthropic", "http://127.0.0.1:1")
    try:
        assert isinstance(defaults, AnthropicClient)
        assert (defaults.timeouts.connect, defaults.timeouts.read, defaults.retry.retries) == (10.0, 120.0, 2)
    finally:
        await defaults.aclose()
    policy = RetryPolicy(retries=0)
    explicit = make_client("openai", "http://127.0.0.1:1", retry=policy, timeouts=Timeouts(read=1))
    try:
        assert isinstance(explicit, OpenAIClient)
        assert explicit.retry is policy
        assert explicit.timeouts.read == 1
    finally:
        await explicit.aclose()


async def test_a_shared_http_client_is_used_and_not_closed(fake_provider: FakeProvider) -> None:
    async with httpx.AsyncClient(timeout=30) as shared:
        client = make_client("anthropic", fake_provider.base_url, API_KEY, http_client=shared)
        result = await client.complete(chat_request("anthropic", [Message("user", "hi")], model="m"))
        assert result.text == "Echo: hi"
        await client.aclose()
        assert not shared.is_closed


async def test_clients_are_async_context_managers(fake_provider: FakeProvider) -> None:
    client = make_client("openai", fake_provider.base_url, API_KEY)
    assert isinstance(client, OpenAIClient)
    async with client:
        await client.complete(chat_request("openai", [Message("user", "hi")], model="m"))
    assert client._client.is_closed
