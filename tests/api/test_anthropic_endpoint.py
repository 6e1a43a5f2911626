"""``POST /v1/messages`` (V7) with the real ``anthropic`` SDK against the real server and the fake provider.

Every SDK client is built with ``max_retries=0`` so that each test counts the requests the fake received.
The model's provider is OpenAI-compatible (the request is translated) or Anthropic (it goes as Anthropic's).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.core.groups import build_groups
from contextshift.core.messages import Message
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Account, Server, Service, bearer
from tests.databases import Backend
from tests.fakes import SECRET, Counting, Error, FakeToolCall, Reply
from tests.fakes.server import FakeProvider

PROVIDER_KEY = "sk-test-KEY-789"
WEATHER = {
    "name": "weather",
    "description": "The weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def sync_client(service: Service, token: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=service.url, api_key=token or service.token, max_retries=0)


def async_client(service: Service) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=service.url, api_key=service.token, max_retries=0)


async def setup_model(service: Service, *, kind: str = "openai", window: int | None = 8000, **model: Any) -> str:
    return (await service.setup_chat(kind=kind, context_window=window, **model))["model"]


async def audit(service: Service, audit_id: str) -> dict[str, Any]:
    response = await service.http.get(f"/api/v2/proxy-audits/{audit_id}")
    assert response.status_code == 200, response.text
    return response.json()["audit"]  # type: ignore[no-any-return]


def never_leaks(text: str) -> None:
    assert SECRET not in text and PROVIDER_KEY not in text


# -- answers ---------------------------------------------------------------------------------------------


async def test_the_sync_sdk_gets_a_message_from_an_openai_compatible_provider(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("Hello there!", input_tokens=50, cached_input_tokens=40, output_tokens=3))
    raw = sync_client(service).messages.with_raw_response.create(
        model="gpt-4o",
        max_tokens=200,
        system="Be terse.",
        messages=[{"role": "user", "content": "hi"}],
        stop_sequences=["END"],
        metadata={"user_id": "app-user-1"},
        extra_body={"temperature": 0.3},  # the 2.x SDK has no argument for it; the API still takes it
    )
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.model == "gpt-4o"
    assert [(b.type, b.text) for b in message.content] == [("text", "Hello there!")]  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens, message.usage.output_tokens) == (
        10,
        40,
        3,
    )
    sent = service.fake.last
    assert sent.path == "/chat/completions" and sent.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert sent.messages == [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]
    assert sent.json["max_tokens"] == 200 and sent.json["temperature"] == 0.3 and sent.json["stop"] == ["END"]
    assert sent.json["user"] == "app-user-1"
    assert raw.headers["x-contextshift-excluded"] == "0"
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert record["status"] == "completed" and record["usage"]["input_tokens"] == 50


async def test_a_bearer_token_signs_in_too(service: Service) -> None:
    await setup_model(service)
    client = anthropic.Anthropic(base_url=service.url, auth_token=service.token, max_retries=0)
    message = client.messages.create(model="gpt-4o", max_tokens=50, messages=[{"role": "user", "content": "ping"}])
    assert message.content[0].text == "Echo: ping"  # type: ignore[union-attr]
    assert "x-api-key" not in service.fake.last.headers  # our token never travels on


async def test_the_async_sdk_streams_anthropics_event_sequence(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("one two three", input_tokens=12, output_tokens=3))
    async with (
        async_client(service) as client,
        client.messages.stream(
            model="gpt-4o", max_tokens=50, messages=[{"role": "user", "content": "count"}]
        ) as stream,
    ):
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "one two three"
    assert final.stop_reason == "end_turn" and final.content[0].text == "one two three"  # type: ignore[union-attr]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 3)
    assert service.fake.last.stream
    with httpx.Client(base_url=service.url, timeout=20) as http:
        response = http.post(
            "/v1/messages",
            json={
                "model": "gpt-4o",
                "max_tokens": 50,
                "stream": True,
                "messages": [{"role": "user", "content": "a b"}],
            },
            headers={"x-api-key": service.token},
        )
    names = [block.split("\n")[0].removeprefix("event: ") for block in response.text.split("\n\n") if block]
    assert names == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 3,  # "Echo:", "a", "b", word by word
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert response.headers["x-contextshift-excluded"] == "0" and response.headers["x-contextshift-audit"]


async def test_tool_use_comes_back_as_blocks_streaming_or_not(service: Service) -> None:
    await setup_model(service)
    calls = [FakeToolCall("call_a", "weather", {"city": "Oslo"}), FakeToolCall("call_b", "weather", {"city": "Rome"})]
    service.fake.script(
        Reply("", tool_calls=calls, finish_reason="tool_calls"), Reply("", tool_calls=calls, finish_reason="tool_calls")
    )
    client = sync_client(service)
    asked = [{"role": "user", "content": "weather in Oslo and Rome?"}]
    message = client.messages.create(
        model="gpt-4o",
        max_tokens=100,
        messages=asked,
        tools=[WEATHER],
        tool_choice={"type": "any"},  # type: ignore[list-item]
    )
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.id, b.input) for b in message.content] == [  # type: ignore[union-attr]
        ("tool_use", "call_a", {"city": "Oslo"}),
        ("tool_use", "call_b", {"city": "Rome"}),
    ]
    sent = service.fake.last.json
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather of a city",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    assert sent["tool_choice"] == "required"
    with client.messages.stream(model="gpt-4o", max_tokens=100, messages=asked, tools=[WEATHER]) as stream:  # type: ignore[list-item]
        final = stream.get_final_message()
    assert [(b.type, b.input) for b in final.content] == [
        ("tool_use", {"city": "Oslo"}),
        ("tool_use", {"city": "Rome"}),
    ]  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use"


async def test_tool_results_and_an_anthropic_provider_get_anthropics_own_shape(service: Service) -> None:
    await setup_model(service, kind="anthropic", model="claude-x")
    service.fake.script(Reply("It is sunny.", input_tokens=30, output_tokens=4))
    history: list[Any] = [
        {"role": "user", "content": "weather in Oslo?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21C"}]},
    ]
    message = sync_client(service).messages.create(
        model="claude-x",
        max_tokens=100,
        system="Be brief.",
        messages=history,
        tools=[WEATHER],
        extra_body={"top_k": 5},  # type: ignore[list-item]
    )
    assert message.content[0].text == "It is sunny."  # type: ignore[union-attr]
    sent = service.fake.last
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == PROVIDER_KEY
    assert sent.json["system"] == "Be brief." and sent.json["max_tokens"] == 100 and sent.json["top_k"] == 5
    assert sent.json["messages"][1:] == history[1:]
    assert sent.json["tools"] == [WEATHER]


# -- fitting ---------------------------------------------------------------------------------------------


def agent_conversation(turns: int) -> list[dict[str, Any]]:
    """``turns`` rounds of question, two parallel tool_use blocks, their tool_result blocks, answer."""
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages.append({"role": "user", "content": f"Question {n}: " + "what about this topic? " * 8})
        uses = [
            {"type": "tool_use", "id": f"toolu_{n}_{k}", "name": "search", "input": {"q": f"{n}-{k}"}} for k in range(2)
        ]
        messages.append({"role": "assistant", "content": uses})
        results = [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}_{k}", "content": f"result {n}-{k} " * 20}
            for k in range(2)
        ]
        messages.append({"role": "user", "content": results})
        if n < turns - 1:
            messages.append({"role": "assistant", "content": f"Answer {n}: " + "it is like so. " * 10})
    return messages


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_400_message_agent_conversation_is_fitted_with_no_orphaned_tool_result(
    service: Service, kind: str
) -> None:
    await setup_model(service, kind=kind, window=4000, model="claude-x" if kind == "anthropic" else "gpt-4o")
    messages = agent_conversation(100)  # 4 * 100 - 1 = 399 messages and a system prompt
    assert len(messages) == 399
    raw = sync_client(service).messages.with_raw_response.create(
        model="claude-x" if kind == "anthropic" else "gpt-4o",
        max_tokens=500,
        system="You are a research agent.",
        messages=messages,  # type: ignore[arg-type]
    )
    assert raw.parse().type == "message"
    excluded = int(raw.headers["x-contextshift-excluded"])
    assert excluded > 0
    sent = service.fake.last.json
    if kind == "anthropic":
        system, wire = sent["system"], sent["messages"]
        core = [Message.from_dict({**m, "id": f"s{i}"}) for i, m in enumerate(wire)]
        uses = {
            b["id"] for m in wire if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"
        }
        results = {
            b["tool_use_id"]
            for m in wire
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_result"
        }
        assert system == "You are a research agent."
        assert wire[-3:] == messages[-3:]  # the last question, its calls and their results
    else:
        wire = sent["messages"]
        core = [Message.from_dict({**m, "id": f"s{i}"}) for i, m in enumerate(wire)]
        uses = {c["id"] for m in wire for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in wire if m["role"] == "tool"}
        assert wire[0] == {"role": "system", "content": "You are a research agent."}
        assert wire[-4]["content"] == messages[-3]["content"]  # the last question, protected
    assert uses == results and uses  # no orphaned result, no orphaned call
    assert all(len(g.members) in (1, 2, 3) for g in build_groups(core))
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert record["excluded_count"] == excluded
    real = Counting(chars_per_token=4.0)  # the window holds by the model's own profile: audit's count
    assert record["budget"]["prompt_tokens"] <= 4000 - 500
    assert real.prompt_tokens(sent) > 0


# -- errors ----------------------------------------------------------------------------------------------


async def test_a_max_tokens_at_or_above_the_window_is_refused_naming_both_before_anything_is_sent(
    service: Service,
) -> None:
    await setup_model(service, window=1000)
    with pytest.raises(anthropic.BadRequestError) as caught:
        sync_client(service).messages.create(
            model="gpt-4o", max_tokens=1200, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body == {  # type: ignore[comparison-overlap]
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "The reply reserve (1200 tokens) is at least the whole context window (1000 tokens), "
            "so no prompt can fit: set max_tokens below 1000.",
        },
    }
    assert "x-contextshift-audit" not in caught.value.response.headers
    assert service.fake.requests == []
    assert (await service.http.get("/api/v2/proxy-audits")).json()["audits"] == []


async def test_each_error_is_the_anthropic_sdks_own_class(service: Service) -> None:
    await setup_model(service, window=1000)
    client = sync_client(service)
    hi: list[Any] = [{"role": "user", "content": "x"}]
    with pytest.raises(anthropic.AuthenticationError) as wrong:
        sync_client(service, "cs_not-a-real-token").messages.create(model="gpt-4o", max_tokens=10, messages=hi)
    assert wrong.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="gpt-9", max_tokens=10, messages=hi)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as too_long:
        client.messages.create(model="gpt-4o", max_tokens=300, system="rule " * 900, messages=hi)
    assert too_long.value.body["error"]["message"].startswith("prompt is too long: ")  # type: ignore[index]
    assert too_long.value.response.headers["x-contextshift-audit"]
    assert service.fake.requests == []  # nothing over budget is ever sent
    service.fake.script(Error(429, retry_after=0), Error(429, retry_after=7))
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="gpt-4o", max_tokens=10, messages=hi)
    assert limited.value.response.headers["retry-after"] == "7"
    never_leaks(limited.value.response.text)
    service.fake.script(Error(500), Error(500))
    with pytest.raises(anthropic.InternalServerError) as upstream:
        client.messages.create(model="gpt-4o", max_tokens=10, messages=hi)
    assert upstream.value.status_code == 503 and upstream.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    never_leaks(upstream.value.response.text)
    service.fake.script(Reply("a b c d e f", abort_after=2), Reply("a b c d e f", abort_after=2))
    with (
        pytest.raises(anthropic.APIError),
        client.messages.stream(model="gpt-4o", max_tokens=10, messages=hi) as stream,
    ):
        for _ in stream:
            pass
    async with service.client(service.token) as http:
        response = await http.post("/v1/messages", json={"model": "gpt-4o", "messages": hi})  # no max_tokens
        assert response.status_code == 400
        assert response.json() == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "max_tokens: a positive integer is required."},
        }
        response = await http.post(
            "/v1/messages",
            json={"model": "gpt-4o", "max_tokens": 5, "messages": hi},
            headers={"Origin": "http://evil.example"},
        )
        assert response.status_code == 403 and response.json()["error"]["type"] == "permission_error"


async def test_the_body_limit_is_content_too_large(backend: Backend, fake_provider: FakeProvider) -> None:
    app = create_app(
        database=backend.database(), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, max_body_bytes=2000
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            service = Service(url, http, fake_provider, backend)
            await setup_model(service)
            with pytest.raises(anthropic.ContentTooLargeError) as caught:
                sync_client(service).messages.create(
                    model="gpt-4o", max_tokens=10, messages=[{"role": "user", "content": "long " * 1000}]
                )
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "request_too_large", "message": "The request body is larger than the limit of 2000 bytes."},
    }
    assert fake_provider.requests == []


async def test_a_context_length_rejection_is_recovered_in_place(service: Service) -> None:
    await setup_model(service, window=2000, model="mystery-model")
    service.fake.count_as(chars_per_token=2.6, window=2000)
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"Message {n}: the garden and dinner on day {n}."}
        for n in range(121)
    ]
    message = sync_client(service).messages.create(model="mystery-model", max_tokens=500, messages=history)  # type: ignore[arg-type]
    assert message.content[0].text.startswith("Echo: Message 120")  # type: ignore[union-attr]
    assert [r.over_limit for r in service.fake.requests] == [True, False]
    record = await audit(service, message.id.removeprefix("msg_"))
    assert [a["outcome"] for a in record["attempts"]] == ["context-length-retry", "completed"]
    assert json.dumps(record).count(SECRET) == 0


# -- sessions --------------------------------------------------------------------------------------------


async def test_a_session_appends_the_new_turn_to_the_chat_and_answers_in_anthropics_shape(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="You are the stored bot.")
    client = sync_client(service)
    resent: list[Any] = [
        {"role": "user", "content": "an earlier question the chat never saw"},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
    ]
    session = {"contextshift": {"chat_id": ids["chat"]}}
    raw = client.messages.with_raw_response.create(
        model="gpt-4o",
        max_tokens=100,
        system="The app's own system prompt, not used.",
        messages=resent,
        extra_body=session,
    )
    answer = raw.parse()
    assert answer.type == "message" and answer.role == "assistant" and answer.stop_reason == "end_turn"
    assert answer.content[0].text == "Echo: hello"  # type: ignore[union-attr]
    assert service.fake.last.messages == [
        {"role": "system", "content": "You are the stored bot."},
        {"role": "user", "content": "hello"},
    ]
    stored = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [("user", "hello"), ("assistant", "Echo: hello")]
    with client.messages.stream(
        model="gpt-4o", max_tokens=100, messages=[*resent, {"role": "user", "content": "again"}], extra_body=session
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Echo: again" and final.stop_reason == "end_turn"
    assert [m["content"] for m in service.fake.last.messages] == [
        "You are the stored bot.",
        "hello",
        "Echo: hello",
        "again",
    ]
    record = await audit(service, raw.headers["x-contextshift-audit"])  # the chat's audit, kept for the caller
    assert record["status"] == "completed" and any(e["content"] == "hello" for e in record["entries"])
    assert raw.headers["x-contextshift-excluded"] == "0"


async def test_a_session_refuses_tools_an_unknown_chat_and_another_users_chat_as_anthropic_errors(
    service: Service, other_user: Account
) -> None:
    ids = await service.setup_chat()
    client = sync_client(service)
    user: list[Any] = [{"role": "user", "content": "x"}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model="gpt-4o",
            max_tokens=10,
            messages=user,
            tools=[WEATHER],  # type: ignore[list-item]
            extra_body={"contextshift": {"chat_id": "whatever"}},
        )
    assert "tools cannot be sent" in caught.value.message
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(
            model="gpt-4o", max_tokens=10, messages=user, extra_body={"contextshift": {"chat_id": "nope"}}
        )
    with pytest.raises(anthropic.NotFoundError):  # the admin's chat, asked for by another user
        sync_client(service, other_user.token).messages.create(
            model="gpt-4o", max_tokens=10, messages=user, extra_body={"contextshift": {"chat_id": ids["chat"]}}
        )
    with pytest.raises(anthropic.BadRequestError) as blank:  # no text in the last user message
        client.messages.create(
            model="gpt-4o",
            max_tokens=10,
            messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]}],
            extra_body={"contextshift": {"chat_id": ids["chat"]}},
        )
    assert "last user message with text" in blank.value.message
    assert service.fake.requests == []
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"] == []


async def test_a_session_whose_provider_fails_is_the_sdks_error_streaming_or_not(service: Service) -> None:
    ids = await service.setup_chat()
    client = sync_client(service)
    session = {"contextshift": {"chat_id": ids["chat"]}}
    service.fake.script(Error(500), Error(500))
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(
            model="gpt-4o", max_tokens=10, messages=[{"role": "user", "content": "x"}], extra_body=session
        )
    assert caught.value.status_code >= 500
    never_leaks(caught.value.message)
    tried = len(service.fake.requests)
    service.fake.script(*[Error(500)] * tried)
    with (
        pytest.raises(anthropic.APIStatusError) as streamed,  # an error event after message_start
        client.messages.stream(
            model="gpt-4o", max_tokens=10, messages=[{"role": "user", "content": "y"}], extra_body=session
        ) as stream,
    ):
        "".join(stream.text_stream)
    never_leaks(str(streamed.value))
    stored = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert [m["role"] for m in stored if m["role"] == "assistant"] == []
