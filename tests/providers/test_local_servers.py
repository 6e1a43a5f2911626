"""V3: wire compatibility with local OpenAI-compatible servers (llama.cpp, llama-cpp-python, vLLM, LM Studio).

Each case reproduces over a real socket what such a server does (the bodies are the ones llama-cpp-python and
llama.cpp send) and checks the normalized outcome and how many requests it cost.
"""

from __future__ import annotations

import json

import pytest

from contextshift.core import Message, ToolCall
from contextshift.providers import (
    GENERATION_FAILED,
    PROVIDER_BAD_REQUEST,
    PROVIDER_CONTEXT_LENGTH,
    PROVIDER_SERVER_ERROR,
    ChatRequest,
    Finished,
    ProviderClient,
    ProviderError,
    chat_request,
)
from contextshift.providers.openai import parse_usage
from tests.fakes import SECRET, Error, Raw
from tests.fakes.server import FakeProvider

from .conftest import ClientFactory

#: llama-cpp-python's answer to ``"content": null`` on an assistant message (a pydantic error, as a 500).
PYDANTIC_500 = {
    "error": {
        "message": f"[{{'type': 'string_type', 'loc': ('body', 'messages', 1, 'content'), "
        f"'msg': 'Input should be a valid string', 'input': None}}] {SECRET}",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


def request(kind: str = "openai", *, stream: bool = False) -> ChatRequest:
    return chat_request(kind, [Message("user", "hi")], model="local", max_tokens=16, stream=stream)


async def failure(client: ProviderClient, req: ChatRequest) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        if req.stream:
            async with client.stream(req) as events:
                async for _ in events:
                    pass
        else:
            await client.complete(req)
    return caught.value


async def test_a_tool_call_only_assistant_message_is_sent_with_empty_string_content(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    history = [
        Message("user", "weather in Oslo?"),
        Message("assistant", "", tool_calls=(ToolCall("call_1", "weather", '{"city": "Oslo"}'),)),
        Message("tool", "4 degrees, rain", tool_call_id="call_1"),
    ]
    await client_for("openai").complete(chat_request("openai", history, model="local", max_tokens=8))
    sent = fake_provider.last.messages[1]
    assert sent["content"] == "" and sent["tool_calls"][0]["id"] == "call_1"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_5xx_saying_the_request_is_invalid_is_a_bad_request_and_not_retried(
    stream: bool, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(500, body=PYDANTIC_500), Error(500, body=PYDANTIC_500), Error(500, body=PYDANTIC_500))
    error = await failure(client_for("openai", retries=2), request(stream=stream))
    assert error.code == PROVIDER_BAD_REQUEST and error.status == 500 and not error.retryable
    assert len(fake_provider.requests) == 1
    assert SECRET not in repr(error) and SECRET not in str(error.params)


async def test_a_5xx_with_an_invalid_request_error_type_is_a_bad_request(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(503, error_type="invalid_request_error"))
    error = await failure(client_for("openai"), request())
    assert error.code == PROVIDER_BAD_REQUEST and len(fake_provider.requests) == 1


async def test_a_plain_5xx_is_a_server_error_and_retried(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(500), Error(500), Error(500))
    error = await failure(client_for("openai", retries=2), request())
    assert error.code == PROVIDER_SERVER_ERROR and len(fake_provider.requests) == 3


@pytest.mark.parametrize(
    "message",
    [
        "Requested tokens (2100) exceed context window of 2048",  # llama-cpp-python
        "the request exceeds the available context size, try increasing it",  # llama.cpp server
    ],
)
@pytest.mark.parametrize("status", [400, 500])
async def test_local_servers_context_length_messages_are_recognized(
    message: str, status: int, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(status, message=message))
    error = await failure(client_for("openai"), request())
    assert error.code == PROVIDER_CONTEXT_LENGTH and not error.retryable
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_empty_200_stream_is_a_probable_overflow(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    # llama-cpp-python answers an overflowing streamed prompt with 200 text/event-stream and no event at all.
    empty = Raw(200, b"", content_type="text/event-stream")
    fake_provider.script(empty, empty)
    error = await failure(client_for(kind, retries=2), request(kind, stream=True))
    assert error.code == PROVIDER_CONTEXT_LENGTH and not error.retryable
    assert "context window" in error.message
    assert len(fake_provider.requests) == 1  # the recovery, not the transport, decides what to send next


async def test_a_stream_cut_after_some_events_is_still_a_generation_failure(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    frames = b'data: {"choices": [{"index": 0, "delta": {"content": "cut"}}]}\n\n'
    fake_provider.script(Raw(200, frames, content_type="text/event-stream"))
    error = await failure(client_for("openai", retries=0), request(stream=True))
    assert error.code == GENERATION_FAILED


def completion(usage: dict[str, object] | None = None, **extra: object) -> str:
    body: dict[str, object] = {
        "id": "x",
        "object": "chat.completion",
        "model": "local",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        **extra,
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)


@pytest.mark.parametrize(
    ("body", "cached"),
    [
        (completion({"prompt_tokens": 90, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 64}}), 64),
        (completion({"prompt_tokens": 90, "completion_tokens": 1, "prompt_cache_hit_tokens": 70}), 70),
        (completion({"prompt_tokens": 90, "completion_tokens": 1, "cache_read_input_tokens": 80}), 80),
        (completion({"prompt_tokens": 90, "completion_tokens": 1}, timings={"cache_n": 85, "prompt_n": 5}), 85),
        (completion({"prompt_tokens": 90, "completion_tokens": 1}), 0),
    ],
)
async def test_cached_prompt_tokens_are_read_from_every_field_servers_use(
    body: str, cached: int, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Raw(200, body))
    result = await client_for("openai").complete(request())
    assert result.usage is not None
    assert result.usage.input_tokens == 90 and result.usage.cached_input_tokens == cached


async def test_a_llama_cpp_stream_with_timings_but_no_usage_still_reports_usage(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "timings": {"cache_n": 40, "prompt_n": 12, "predicted_n": 2},
        },
    ]
    frames = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    fake_provider.script(Raw(200, frames, content_type="text/event-stream"))
    async with client_for("openai").stream(request(stream=True)) as events:
        finished = [e async for e in events if isinstance(e, Finished)]
    usage = finished[0].result.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (52, 2, 40)


def test_cached_tokens_never_exceed_the_prompt() -> None:
    usage = parse_usage({"prompt_tokens": 10, "completion_tokens": 1}, {"cache_n": 99})
    assert usage is not None and usage.cached_input_tokens == 10
