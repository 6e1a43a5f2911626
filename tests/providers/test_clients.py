"""V3: both protocols over real sockets against the fake — complete, stream, usage, tool calls, the wire."""

from __future__ import annotations

import json

import pytest

from contextshift.core import Message
from contextshift.providers import ChatResult, Finished, TextDelta, Usage, chat_request
from contextshift.providers.base import ProviderClient
from tests.fakes import FakeToolCall, Raw, Reply
from tests.fakes.server import FakeProvider

from .conftest import API_KEY, ClientFactory

KINDS = ["openai", "anthropic"]

CONVERSATION = [
    Message("system", "You are terse."),
    Message("user", "Say hello."),
]


async def collect(client: ProviderClient, kind: str, **kwargs: object) -> tuple[list[str], ChatResult]:
    request = chat_request(kind, CONVERSATION, model="fake-model", stream=True, **kwargs)  # type: ignore[arg-type]
    deltas: list[str] = []
    finished: list[ChatResult] = []
    async with client.stream(request) as events:
        async for event in events:
            assert not finished, "nothing may follow Finished"
            if isinstance(event, TextDelta):
                deltas.append(event.text)
            else:
                assert isinstance(event, Finished)
                finished.append(event.result)
    assert len(finished) == 1
    return deltas, finished[0]


@pytest.mark.parametrize("kind", KINDS)
async def test_complete_returns_text_finish_and_usage_with_cached_tokens(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("Hello!", input_tokens=1200, cached_input_tokens=1000, output_tokens=3))
    client = client_for(kind)
    result = await client.complete(chat_request(kind, CONVERSATION, model="fake-model", max_tokens=64))
    assert result.text == "Hello!"
    assert result.finish_reason == "stop"
    assert result.tool_calls == ()
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cached_input_tokens) == (1200, 3, 1000)
    assert result.model == "fake-model"
    sent = fake_provider.last
    assert sent.json["max_tokens"] == 64
    assert not sent.stream


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_yields_deltas_then_one_finished_with_usage(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("one two three four", input_tokens=50, cached_input_tokens=40, output_tokens=4))
    deltas, result = await collect(client_for(kind), kind, max_tokens=32)
    assert deltas == ["one", " two", " three", " four"]
    assert result.text == "one two three four"
    assert result.finish_reason == "stop"
    assert result.usage == Usage(input_tokens=50, output_tokens=4, cached_input_tokens=40)
    sent = fake_provider.last
    assert sent.stream
    if kind == "openai":
        assert sent.json["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_tool_calls_are_returned(
    kind: str, stream: bool, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    calls = [
        FakeToolCall("call_a", "weather", {"city": "Paris"}),
        FakeToolCall("call_b", "weather", {"city": "Rome", "unit": "C"}),
    ]
    fake_provider.script(Reply("Checking.", tool_calls=calls, finish_reason="tool_calls"))
    client = client_for(kind)
    if stream:
        _, result = await collect(client, kind)
    else:
        result = await client.complete(chat_request(kind, CONVERSATION, model="fake-model"))
    assert result.finish_reason == "tool_calls"
    assert result.text == "Checking."
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_a", "weather"), ("call_b", "weather")]
    assert [json.loads(c.arguments) for c in result.tool_calls] == [
        {"city": "Paris"},
        {"city": "Rome", "unit": "C"},
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("scripted", "expected"), [("length", "length"), ("content_filter", "content_filter"), ("stop", "stop")]
)
async def test_finish_reasons_are_normalized(
    kind: str, stream: bool, scripted: str, expected: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("cut", finish_reason=scripted))
    client = client_for(kind)
    if stream:
        _, result = await collect(client, kind)
    else:
        result = await client.complete(chat_request(kind, CONVERSATION, model="fake-model"))
    assert result.finish_reason == expected
    if kind == "anthropic" and scripted == "length":
        assert result.raw_finish_reason == "max_tokens"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
async def test_missing_usage_is_none(
    kind: str, stream: bool, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("no usage", usage=False))
    client = client_for(kind)
    if stream:
        _, result = await collect(client, kind)
    else:
        result = await client.complete(chat_request(kind, CONVERSATION, model="fake-model"))
    assert result.usage is None
    assert result.text == "no usage"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_body_sent_is_exactly_request_body(
    kind: str, stream: bool, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    client = client_for(kind)
    request = chat_request(
        kind,
        CONVERSATION,
        model="fake-model",
        max_tokens=99,
        temperature=0.3,
        stream=stream,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    )
    if stream:
        async with client.stream(request) as events:
            async for _ in events:
                pass
    else:
        await client.complete(request)
    assert fake_provider.last.json == client.request_body(request)


async def test_openai_wire_shape(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    client = client_for("openai")
    await client.complete(chat_request("openai", CONVERSATION, model="gpt-x"))
    sent = fake_provider.last
    assert sent.path == "/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert "x-api-key" not in sent.headers
    assert sent.json == {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello."},
        ],
        "stream": False,
    }


async def test_openai_base_url_with_v1(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    client = client_for("openai", base_url=fake_provider.base_url + "/v1/")
    result = await client.complete(chat_request("openai", CONVERSATION, model="m"))
    assert result.text == "Echo: Say hello."
    assert fake_provider.last.path == "/v1/chat/completions"


async def test_anthropic_wire_shape(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    client = client_for("anthropic")
    await client.complete(chat_request("anthropic", CONVERSATION, model="claude-x"))
    sent = fake_provider.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.json == {
        "model": "claude-x",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Say hello."}],
        "system": "You are terse.",
    }


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_anthropic_base_url_with_or_without_v1(
    suffix: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    client = client_for("anthropic", base_url=fake_provider.base_url + suffix)
    result = await client.complete(chat_request("anthropic", CONVERSATION, model="m"))
    assert result.text == "Echo: Say hello."
    assert fake_provider.last.path == "/v1/messages"


@pytest.mark.parametrize("kind", KINDS)
async def test_no_api_key_sends_no_auth_header(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    await client_for(kind, api_key=None).complete(chat_request(kind, CONVERSATION, model="m"))
    headers = fake_provider.last.headers
    assert "authorization" not in headers
    assert "x-api-key" not in headers


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_ignores_stream_still_works(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    if kind == "openai":
        body = {
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}],
        }
    else:
        body = {"type": "message", "content": [{"type": "text", "text": "plain"}], "stop_reason": "end_turn"}
    fake_provider.script(Raw(200, json.dumps(body)))
    deltas, result = await collect(client_for(kind), kind)
    assert deltas == ["plain"]
    assert result.text == "plain"
    assert result.finish_reason == "stop"


@pytest.mark.parametrize("kind", KINDS)
async def test_tool_conversation_is_accepted_by_the_strict_fake(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    from contextshift.core import ToolCall

    conversation = [
        Message("system", "sys"),
        Message("user", "weather?"),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "weather", '{"city": "Paris"}'), ToolCall("c2", "weather", "not json")),
        ),
        Message("tool", "18C", tool_call_id="c1"),
        Message("tool", "21C", tool_call_id="c2"),
        Message("system", "Summary of earlier turns.", source="summary"),
        Message("user", "thanks"),
    ]
    result = await client_for(kind).complete(chat_request(kind, conversation, model="m", max_tokens=10))
    assert fake_provider.last.rejected is None
    assert result.text == "Echo: thanks"
