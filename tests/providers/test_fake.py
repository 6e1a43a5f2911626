"""The fake provider itself: default echo, recording, API-key check, strict validation."""

from __future__ import annotations

import httpx
import pytest

from contextshift.core import Message
from contextshift.providers import PROVIDER_AUTH, PROVIDER_BAD_REQUEST, ChatRequest, ProviderError, chat_request
from tests.fakes import Reply
from tests.fakes.server import FakeProvider

from .conftest import API_KEY, ClientFactory


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_default_reply_echoes_the_last_user_message(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    messages = [Message("user", "first"), Message("assistant", "ok"), Message("user", "second")]
    result = await client_for(kind).complete(chat_request(kind, messages, model="m"))
    assert result.text == "Echo: second"
    assert result.finish_reason == "stop"
    assert result.usage is not None and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert fake_provider.last.answered_with is None


async def test_the_script_is_consumed_in_order(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    fake_provider.script(Reply("one"), Reply("two"))
    client = client_for("openai")
    request = chat_request("openai", [Message("user", "x")], model="m")
    assert [(await client.complete(request)).text for _ in range(3)] == ["one", "two", "Echo: x"]
    assert len(fake_provider.requests) == 3
    assert fake_provider.pending == 0


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_expected_api_key(kind: str, client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    fake_provider.expected_api_key = API_KEY
    request = chat_request(kind, [Message("user", "x")], model="m")
    assert (await client_for(kind).complete(request)).text == "Echo: x"
    with pytest.raises(ProviderError) as caught:
        await client_for(kind, api_key="sk-wrong").complete(request)
    assert caught.value.code == PROVIDER_AUTH


async def test_strict_mode_rejects_what_anthropic_would(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    bad = ChatRequest(model="m", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(ProviderError) as caught:
        await client_for("anthropic").complete(bad)
    assert caught.value.code == PROVIDER_BAD_REQUEST
    assert fake_provider.last.rejected == "messages: first message must use the user role"
    fake_provider.strict = False
    assert (await client_for("anthropic").complete(bad)).text == "Echo: "


def test_models_route_and_sync_use(fake_provider: FakeProvider) -> None:
    response = httpx.get(f"{fake_provider.base_url}/v1/models", timeout=30)
    assert response.json()["data"][0]["id"] == "fake-model"
    response = httpx.post(f"{fake_provider.base_url}/nowhere", json={}, timeout=30)
    assert response.status_code == 404
    assert fake_provider.wait_for(lambda: len(fake_provider.requests) == 1)


def test_a_private_server_can_be_started_and_stopped() -> None:
    with FakeProvider() as fake:
        fake.script(Reply("private"))
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        response = httpx.post(f"{fake.base_url}/v1/chat/completions", json=body, timeout=30)
        assert response.json()["choices"][0]["message"]["content"] == "private"
        assert fake.last.path == "/v1/chat/completions"
