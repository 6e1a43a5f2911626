"""The drop-in OpenAI-compatible endpoint (V7) with the real openai SDK and LangChain against the real server.

The service runs under uvicorn on a loopback port; the fake provider stands in for the model's provider.
Every SDK client is built with ``max_retries=0`` so that each test counts the requests the fake received.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from contextshift.api.app import create_app
from contextshift.core.groups import build_groups
from contextshift.core.messages import Message
from contextshift.tokenizers import get_tokenizer
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Account, Server, Service, bearer
from tests.databases import Backend
from tests.fakes import SECRET, Counting, Error, FakeToolCall, Raw, Reply, closed_port_url
from tests.fakes.server import FakeProvider

PROVIDER_KEY = "sk-test-KEY-789"


def sync_client(service: Service, token: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=token or service.token, max_retries=0)


def async_client(service: Service, token: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{service.url}/v1", api_key=token or service.token, max_retries=0)


async def setup_model(service: Service, *, kind: str = "openai", window: int | None = 8000, **model: Any) -> str:
    ids = await service.setup_chat(kind=kind, context_window=window, **model)
    return ids["model"]


async def audit(service: Service, audit_id: str) -> dict[str, Any]:
    response = await service.http.get(f"/api/v2/proxy-audits/{audit_id}")
    assert response.status_code == 200, response.text
    return response.json()["audit"]  # type: ignore[no-any-return]


def never_leaks(text: str) -> None:
    assert SECRET not in text and PROVIDER_KEY not in text


# -- answers ---------------------------------------------------------------------------------------------


async def test_the_sync_sdk_gets_a_completion_with_usage_and_the_visibility_headers(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("Hello there!", input_tokens=50, cached_input_tokens=40, output_tokens=3))
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello there!"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.object == "chat.completion" and completion.model == "gpt-4o"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (50, 3)
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 40
    assert raw.headers["x-contextshift-excluded"] == "0"
    sent = service.fake.last
    assert sent.path == "/chat/completions" and sent.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert sent.messages == [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]
    assert "max_tokens" not in sent.json  # the caller set none: the provider's own limit applies
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert record["status"] == "completed" and record["model"] == "gpt-4o" and record["excluded_count"] == 0
    assert {k: record["usage"][k] for k in ("input_tokens", "output_tokens", "cached_input_tokens")} == {
        "input_tokens": 50,
        "output_tokens": 3,
        "cached_input_tokens": 40,
    }
    assert [e["reason"] for e in record["entries"]] == ["protected", "protected"]


async def test_a_model_is_named_by_its_id_too(service: Service) -> None:
    model_id = await setup_model(service)
    async with async_client(service) as client:
        completion = await client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "ping"}]
        )
    assert completion.choices[0].message.content == "Echo: ping"
    assert service.fake.last.json["model"] == "gpt-4o"  # the provider gets the model's own name


async def test_the_async_sdk_streams_text_then_usage_then_done(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("one two three", input_tokens=12, output_tokens=3))
    async with async_client(service) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (12, 3)
    assert all(c.usage is None for c in chunks[:-1])
    assert service.fake.last.stream


async def test_a_stream_without_include_usage_has_no_usage_chunk(service: Service) -> None:
    await setup_model(service)
    with httpx.Client(base_url=service.url, timeout=20) as http:
        response = http.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True},
            headers={"Authorization": f"Bearer {service.token}"},
        )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-contextshift-excluded"] == "0" and response.headers["x-contextshift-audit"]
    lines = [line for line in response.text.split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all("usage" not in c for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}


async def test_tool_calls_come_back_in_openai_shape_streaming_or_not(service: Service) -> None:
    await setup_model(service)
    calls = [FakeToolCall("call_a", "weather", {"city": "Oslo"}), FakeToolCall("call_b", "time", {"tz": "CET"})]
    service.fake.script(
        Reply(tool_calls=calls, finish_reason="tool_calls"), Reply(tool_calls=calls, finish_reason="tool_calls")
    )
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
        for n in ("weather", "time")
    ]
    client = sync_client(service)
    completion = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "weather and time?"}],
        tools=tools,  # type: ignore[arg-type]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [  # type: ignore[union-attr]
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "time", {"tz": "CET"}),
    ]
    with client.chat.completions.stream(
        model="gpt-4o",
        messages=[{"role": "user", "content": "weather and time?"}],
        tools=tools,  # type: ignore[arg-type]
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls
    assert streamed is not None and [(c.id, c.function.name) for c in streamed] == [  # type: ignore[union-attr]
        ("call_a", "weather"),
        ("call_b", "time"),
    ]
    assert final.choices[0].finish_reason == "tool_calls"


async def test_standard_fields_pass_through_and_their_tokens_count(service: Service) -> None:
    await setup_model(service)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a word up. " * 50,
                "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
            },
        }
    ]
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "define 'shift'"}],
        tools=tools,  # type: ignore[arg-type]
        tool_choice="auto",
        temperature=0.2,
        top_p=0.9,
        seed=7,
        response_format={"type": "json_object"},
        max_completion_tokens=300,
        user="app-user-1",
    )
    sent = service.fake.last.json
    assert sent["tools"] == tools and sent["tool_choice"] == "auto" and sent["temperature"] == 0.2
    assert sent["top_p"] == 0.9 and sent["seed"] == 7 and sent["response_format"] == {"type": "json_object"}
    assert sent["max_completion_tokens"] == 300 and "max_tokens" not in sent and sent["user"] == "app-user-1"
    assert "contextshift" not in sent
    record = await audit(service, raw.headers["x-contextshift-audit"])
    tools_entry = next(e for e in record["entries"] if e["identifier"] == "request.tools")
    assert tools_entry["tokens"] > 100 and tools_entry["reason"] == "protected"
    assert record["budget"]["response_reserve"] == 300 and record["budget"]["context_limit"] == 8000
    messages_tokens = sum(e["tokens"] for e in record["entries"] if e["identifier"] != "request.tools")
    assert record["budget"]["prompt_tokens"] >= messages_tokens + tools_entry["tokens"] - 8


async def test_models_lists_the_enabled_chat_models(service: Service) -> None:
    await setup_model(service)
    disabled = await setup_model(service, model="gpt-disabled")
    response = await service.http.patch(f"/api/v2/models/{disabled}", json={"enabled": False})
    assert response.status_code == 200, response.text
    listed = sync_client(service).models.list()
    assert [m.id for m in listed.data] == ["gpt-4o"] and listed.data[0].owned_by == "contextshift"


# -- fitting ---------------------------------------------------------------------------------------------


def long_agent_conversation(turns: int) -> list[dict[str, Any]]:
    """A system prompt, then ``turns`` rounds of user question, parallel tool calls, results, answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a research agent."}]
    for n in range(turns):
        messages.append({"role": "user", "content": f"Question {n}: " + "what about this topic? " * 8})
        calls = [
            {
                "id": f"call_{n}_{k}",
                "type": "function",
                "function": {"name": "search", "arguments": f'{{"q": "{n}-{k}"}}'},
            }
            for k in range(2)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for k in range(2):
            messages.append({"role": "tool", "tool_call_id": f"call_{n}_{k}", "content": f"result {n}-{k} " * 20})
        if n < turns - 1:
            messages.append({"role": "assistant", "content": f"Answer {n}: " + "it is like so. " * 10})
    return messages


async def test_a_400_message_agent_conversation_is_fitted_with_no_orphaned_tool_result(service: Service) -> None:
    await setup_model(service, window=4000)
    messages = long_agent_conversation(80)  # 1 + 80 * 5 - 1 = 400 messages, ending with tool results
    assert len(messages) == 400
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,
        max_tokens=500,  # type: ignore[arg-type]
    )
    sent = service.fake.last.messages
    excluded = int(raw.headers["x-contextshift-excluded"])
    assert excluded > 0 and len(sent) == 400 - excluded
    profile = get_tokenizer("gpt-4o")  # a fresh count of what the fake received, with the model's tokenizer
    assert profile.count_messages([Message.from_dict(m) for m in sent]) <= 4000 - 500
    assert sent[0] == messages[0]  # the system prompt is protected
    assert sent[-3:] == messages[-3:]  # the last round: its call and both results
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert messages[last_user] in sent
    call_ids = {c["id"] for m in sent for c in m.get("tool_calls") or []}
    result_ids = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert result_ids == call_ids  # no orphaned result, no orphaned call
    for m in sent:  # kept messages are forwarded exactly as sent
        assert m in messages
    groups = build_groups([Message.from_dict(m) for m in sent])
    assert all(len(g.members) in (1, 3) for g in groups)
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert record["excluded_count"] == excluded
    assert sum(1 for e in record["entries"] if not e["included"]) == excluded
    assert {e["reason"] for e in record["entries"] if not e["included"]} == {"context-shift"}


async def test_a_long_requests_audit_lists_the_start_and_the_end_of_the_prompt(service: Service) -> None:
    await setup_model(service, window=4000)
    messages = long_agent_conversation(130)  # 650 messages
    raw = sync_client(service).chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    record = await audit(service, raw.headers["x-contextshift-audit"])
    entries = record["entries"]
    assert len(entries) == 500 and record["excluded_count"] == int(raw.headers["x-contextshift-excluded"])
    assert entries[0]["identifier"] == "m0" and entries[-1]["identifier"] == "m649"
    assert "150 entries in the middle of the prompt are not listed" in record["diagnostics"]
    assert any(e["source"] == "input" and e["reason"] == "protected" for e in entries)


async def test_a_strategy_is_chosen_per_request_and_an_unknown_one_is_refused(service: Service) -> None:
    await setup_model(service, window=2000)
    messages = long_agent_conversation(30)
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,  # type: ignore[arg-type]
        extra_body={"contextshift": {"strategy": "truncate"}},
    )
    assert (await audit(service, raw.headers["x-contextshift-audit"]))["context_strategy"] == "truncate"
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(
            model="gpt-4o",
            messages=messages,
            extra_body={"contextshift": {"strategy": "no-such-strategy"}},  # type: ignore[arg-type]
        )
    assert caught.value.param == "contextshift.strategy"


# -- errors ----------------------------------------------------------------------------------------------


async def test_an_unknown_model_is_not_found(service: Service) -> None:
    await setup_model(service)
    with pytest.raises(openai.NotFoundError) as caught:
        sync_client(service).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found" and caught.value.param == "model"
    assert service.fake.requests == []


async def test_protected_messages_over_the_budget_are_context_length_exceeded(service: Service) -> None:
    await setup_model(service, window=1000)
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": "rule " * 900}, {"role": "user", "content": "hi"}],
        )
    error = caught.value
    assert error.code == "context_length_exceeded" and error.type == "invalid_request_error"
    assert "maximum context length is 1000 tokens" in error.message
    assert service.fake.requests == []  # nothing over budget is ever sent
    record = await audit(service, error.response.headers["x-contextshift-audit"])
    assert record["status"] == "failed" and record["error_code"] == "CONTEXT_LENGTH_EXCEEDED"


@pytest.mark.parametrize(("field", "reserve"), [("max_tokens", 1000), ("max_completion_tokens", 1500)])
async def test_a_reply_reserve_at_or_above_the_window_is_its_own_error_naming_both(
    service: Service, field: str, reserve: int
) -> None:
    await setup_model(service, window=1000)
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], extra_body={field: reserve}
        )
    error = caught.value
    assert error.body == {
        "message": f"The reply reserve ({reserve} tokens) is at least the whole context window (1000 tokens), "
        f"so no prompt can fit: set {field} below 1000.",
        "type": "invalid_request_error",
        "code": "response_reserve_too_large",
        "param": field,
    }
    assert "x-contextshift-audit" not in error.response.headers
    assert service.fake.requests == []  # nothing is sent
    assert (await service.http.get("/api/v2/proxy-audits")).json()["audits"] == []  # nor stored


async def test_a_rate_limit_is_passed_through_with_retry_after(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Error(429, retry_after=0), Error(429, retry_after=7))
    with pytest.raises(openai.RateLimitError) as caught:
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.code == "rate_limit_exceeded"
    never_leaks(caught.value.response.text + str(caught.value.response.headers))
    record = await audit(service, caught.value.response.headers["x-contextshift-audit"])
    assert record["status"] == "failed" and record["error_code"] == "PROVIDER_RATE_LIMITED"


async def test_upstream_failures_are_5xx_without_the_upstream_body(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Error(500), Error(500))
    with pytest.raises(openai.InternalServerError) as caught:
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 503 and caught.value.type == "upstream_error"
    never_leaks(caught.value.response.text)
    service.fake.script(Raw(200, f"garbage {SECRET}"))
    with pytest.raises(openai.InternalServerError) as caught:
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502 and caught.value.code == "upstream_error"
    never_leaks(caught.value.response.text)
    service.fake.script(Error(401))
    with pytest.raises(openai.InternalServerError) as caught:  # the provider refused our key: not the caller's
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502 and caught.value.code == "upstream_auth_failed"
    never_leaks(caught.value.response.text)


async def test_an_unreachable_provider_is_503_streaming_or_not(service: Service) -> None:
    ids = await service.setup_chat()
    response = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"base_url": closed_port_url()})
    assert response.status_code == 200, response.text
    async with async_client(service) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
        assert caught.value.status_code == 503 and caught.value.code == "upstream_unavailable"
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "x"}], stream=True
            )
        assert caught.value.status_code == 503


async def test_a_stream_that_breaks_ends_with_an_error_the_sdk_raises(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("a b c d e f", abort_after=2), Reply("a b c d e f", abort_after=2))
    stream = sync_client(service).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "x"}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        for _ in stream:
            pass
    never_leaks(str(caught.value.body))


async def test_a_malformed_request_is_a_bad_request(service: Service) -> None:
    await setup_model(service)
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "wizard", "content": "x"}])  # type: ignore[list-item,misc]
    assert caught.value.param == "messages[0]"
    response = await service.http.post("/v1/chat/completions", content=b"{not json")
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


async def test_a_wrong_token_is_an_authentication_error(service: Service) -> None:
    await setup_model(service)
    with pytest.raises(openai.AuthenticationError) as caught:
        sync_client(service, "cs_not-a-real-token").chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.code == "invalid_api_key" and caught.value.type == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        sync_client(service, "cs_not-a-real-token").models.list()
    async with service.client() as anonymous:  # no Authorization header at all
        response = await anonymous.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": []})
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
    assert service.fake.requests == []


async def test_an_audit_is_readable_by_its_caller_only(service: Service, other_user: Account) -> None:
    await setup_model(service)
    raw = sync_client(service, other_user.token).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "mine"}]
    )
    audit_id = raw.headers["x-contextshift-audit"]
    mine = await other_user.http.get(f"/api/v2/proxy-audits/{audit_id}")
    assert mine.status_code == 200 and mine.json()["audit"]["id"] == audit_id
    listed = (await other_user.http.get("/api/v2/proxy-audits")).json()["audits"]
    assert [a["id"] for a in listed] == [audit_id] and listed[0]["model"] == "gpt-4o"
    theirs = await service.http.get(f"/api/v2/proxy-audits/{audit_id}")  # even an admin sees only their own
    assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "PROXY_AUDIT_NOT_FOUND"
    assert (await service.http.get("/api/v2/proxy-audits")).json()["audits"] == []


# -- Anthropic providers ---------------------------------------------------------------------------------


async def test_an_anthropic_model_is_translated_both_ways(service: Service) -> None:
    await setup_model(service, kind="anthropic", model="claude-x")
    calls = [FakeToolCall("toolu_1", "weather", {"city": "Oslo"})]
    service.fake.script(Reply(tool_calls=calls, finish_reason="tool_calls", input_tokens=30, output_tokens=5))
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="claude-x",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "weather?"},
        ],
        tools=tools,  # type: ignore[arg-type]
        tool_choice="required",
        stop=["END"],
        response_format={"type": "json_object"},
    )
    completion = raw.parse()
    sent = service.fake.last
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == PROVIDER_KEY
    assert sent.json["system"] == "Be brief." and sent.json["messages"] == [{"role": "user", "content": "weather?"}]
    assert sent.json["tools"] == [{"name": "weather", "input_schema": {"type": "object", "properties": {}}}]
    assert sent.json["tool_choice"] == {"type": "any"} and sent.json["stop_sequences"] == ["END"]
    assert sent.json["max_tokens"] == 1024 and "response_format" not in sent.json
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    assert choice.message.tool_calls[0].id == "toolu_1"
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert any("response_format" in d for d in record["diagnostics"])


# -- LangChain -------------------------------------------------------------------------------------------


async def test_langchain_chat_openai_invokes_and_streams(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Reply("Bonjour!"), Reply("streamed words here"))
    llm = ChatOpenAI(
        model="gpt-4o",
        base_url=f"{service.url}/v1",
        api_key=service.token,
        max_retries=0,  # type: ignore[arg-type]
    )
    answer = await llm.ainvoke([SystemMessage("Speak French."), HumanMessage("hello")])
    assert answer.content == "Bonjour!"
    assert service.fake.last.messages == [
        {"role": "system", "content": "Speak French."},
        {"role": "user", "content": "hello"},
    ]
    pieces: list[str] = []
    for chunk in llm.stream("go"):
        assert isinstance(chunk, AIMessageChunk)
        pieces.append(str(chunk.content))
    assert "".join(pieces) == "streamed words here"


async def test_audits_are_kept_for_the_configured_time(backend: Backend, fake_provider: FakeProvider) -> None:
    app = create_app(
        database=backend.database(),
        client_options=CLIENT_OPTIONS,
        admin_token=ADMIN_TOKEN,
        proxy_audit_ttl=timedelta(0),
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            service = Service(url, http, fake_provider, backend)
            await setup_model(service)
            raw = sync_client(service).chat.completions.with_raw_response.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
            assert raw.parse().choices[0].message.content == "Echo: hi"
            response = await http.get(f"/api/v2/proxy-audits/{raw.headers['x-contextshift-audit']}")
            assert response.status_code == 404


# -- sessions --------------------------------------------------------------------------------------------


async def test_a_session_appends_the_new_turn_to_the_chat_and_answers_from_its_pipeline(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="You are the stored bot.")
    client = sync_client(service)
    resent = [
        {"role": "system", "content": "The app's own system prompt, not used."},
        {"role": "user", "content": "an earlier question the chat never saw"},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": "hello"},
    ]
    session = {"contextshift": {"chat_id": ids["chat"]}}
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=resent, extra_body=session)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "Echo: hello"
    assert service.fake.last.messages == [
        {"role": "system", "content": "You are the stored bot."},
        {"role": "user", "content": "hello"},
    ]
    stored = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert [(m["role"], m["content"]) for m in stored] == [("user", "hello"), ("assistant", "Echo: hello")]
    with client.chat.completions.stream(
        model="gpt-4o",
        messages=[*resent, {"role": "user", "content": "again"}],
        extra_body=session,  # type: ignore[arg-type]
    ) as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
    assert text == "Echo: again"
    assert [m["content"] for m in service.fake.last.messages] == [
        "You are the stored bot.",
        "hello",
        "Echo: hello",
        "again",
    ]
    record = await audit(service, raw.headers["x-contextshift-audit"])  # the chat's audit, kept for the caller
    assert record["status"] == "completed" and any(e["content"] == "hello" for e in record["entries"])


async def test_a_session_refuses_tools_an_unknown_chat_and_another_users_chat(
    service: Service, other_user: Account
) -> None:
    ids = await service.setup_chat()
    client = sync_client(service)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "x"}],
            tools=tools,  # type: ignore[arg-type]
            extra_body={"contextshift": {"chat_id": "whatever"}},
        )
    assert caught.value.param == "tools"
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "x"}],
            extra_body={"contextshift": {"chat_id": "nope"}},
        )
    assert missing.value.code == "chat_not_found"
    with pytest.raises(openai.NotFoundError) as foreign:  # the admin's chat, asked for by another user
        sync_client(service, other_user.token).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "x"}],
            extra_body={"contextshift": {"chat_id": ids["chat"]}},
        )
    assert foreign.value.code == "chat_not_found"
    assert service.fake.requests == []
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"] == []


async def test_a_sessions_reply_reserve_at_or_above_the_window_is_its_own_error(service: Service) -> None:
    ids = await service.setup_chat(context_window=1000)
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=1000,
            extra_body={"contextshift": {"chat_id": ids["chat"]}},
        )
    error = caught.value
    assert error.code == "response_reserve_too_large" and error.param == "max_tokens"
    assert "(1000 tokens) is at least the whole context window (1000 tokens)" in error.message
    assert service.fake.requests == []
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"] == []


# -- recovery from a context-length rejection (T5) -------------------------------------------------------

DENSE = 2.6  # characters a token of the fake model: about 1.5x denser than contextshift's 4-characters estimate


def chatter(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You remember gardens."}]
    for n in range(turns):
        role = "user" if n % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"Message {n}: the garden, the weather and dinner on day {n}."})
    messages.append({"role": "user", "content": "What should I plant next?"})
    return messages


async def test_a_context_length_rejection_is_refitted_and_sent_once_more(service: Service) -> None:
    model_id = await setup_model(service, window=2000, model="mystery-model")  # approximate profile
    service.fake.count_as(chars_per_token=DENSE, window=2000)
    raw = sync_client(service).chat.completions.with_raw_response.create(
        model="mystery-model",
        messages=chatter(120),
        max_tokens=500,  # type: ignore[arg-type]
    )
    assert raw.parse().choices[0].message.content == "Echo: What should I plant next?"
    first, second = service.fake.requests
    assert first.over_limit and not second.over_limit
    real = Counting(DENSE).prompt_tokens(first.json)
    assert len(second.messages) < len(first.messages)
    assert Counting(DENSE).prompt_tokens(second.json) + 500 <= 2000
    excluded = int(raw.headers["x-contextshift-excluded"])
    assert excluded == 122 - len(second.messages)  # the header tells the fit that was sent
    record = await audit(service, raw.headers["x-contextshift-audit"])
    assert record["status"] == "completed" and record["excluded_count"] == excluded
    retry, final = record["attempts"]
    assert retry["outcome"] == "context-length-retry" and retry["error_code"] == "PROVIDER_CONTEXT_LENGTH"
    assert retry["reported_tokens"] == real
    assert retry["ratio"] == pytest.approx(real / retry["estimated_tokens"], rel=1e-3)
    assert final["outcome"] == "completed" and final["prompt_tokens"] == record["budget"]["prompt_tokens"]
    assert any("fitted again" in d for d in record["diagnostics"])
    model = (await service.http.get(f"/api/v2/models/{model_id}")).json()["model"]
    assert model["calibration"]["calls"] == 2  # the rejection's stated count, then the success's usage
    never_leaks(json.dumps(record))


async def test_a_stream_is_recovered_before_its_first_chunk(service: Service) -> None:
    await setup_model(service, window=2000, model="mystery-model")
    service.fake.count_as(chars_per_token=DENSE, window=2000)
    async with async_client(service) as client:
        stream = await client.chat.completions.create(
            model="mystery-model",
            messages=chatter(120),
            max_tokens=500,
            stream=True,  # type: ignore[arg-type]
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Echo: What should I plant next?"
    assert [r.over_limit for r in service.fake.requests] == [True, False]
    assert all(r.stream for r in service.fake.requests)


async def test_protected_messages_over_the_real_limit_are_context_length_exceeded_after_one_try(
    service: Service,
) -> None:
    await setup_model(service, window=2000, model="mystery-model")
    service.fake.count_as(chars_per_token=1.0, window=2000)  # four times our estimate
    long_system = {"role": "system", "content": "Rule: be kind to plants. " * 70}  # 1,750 real tokens
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(
            model="mystery-model",
            messages=[long_system, *chatter(10)[1:]],
            max_tokens=500,  # type: ignore[list-item]
        )
    error = caught.value
    assert error.code == "context_length_exceeded" and "provider counted the prompt" in error.message
    assert len(service.fake.requests) == 1  # nothing is sent that cannot fit
    record = await audit(service, error.response.headers["x-contextshift-audit"])
    assert record["status"] == "failed" and record["error_code"] == "CONTEXT_LENGTH_EXCEEDED"
    assert [a["outcome"] for a in record["attempts"]] == ["context-length-retry", "failed"]


async def test_another_provider_error_is_not_resent(service: Service) -> None:
    await setup_model(service)
    service.fake.script(Error(400, message="bad tool schema", error_type="invalid_request_error"))
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(service).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "upstream_rejected_request"
    assert len(service.fake.requests) == 1
    never_leaks(caught.value.response.text)


# -- a model's strategy ----------------------------------------------------------------------------------


async def test_a_models_strategy_applies_when_the_request_names_none(service: Service) -> None:
    model_id = await setup_model(service, window=2000)
    response = await service.http.patch(f"/api/v2/models/{model_id}", json={"context_strategy": "summarize"})
    assert response.status_code == 200 and response.json()["model"]["context_strategy"] == "summarize"
    client = sync_client(service)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=long_agent_conversation(30))  # type: ignore[arg-type]
    assert (await audit(service, raw.headers["x-contextshift-audit"]))["context_strategy"] == "summarize"
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=long_agent_conversation(30),  # type: ignore[arg-type]
        extra_body={"contextshift": {"strategy": "truncate"}},  # the request's own choice wins
    )
    assert (await audit(service, raw.headers["x-contextshift-audit"]))["context_strategy"] == "truncate"
    refused = await service.http.patch(f"/api/v2/models/{model_id}", json={"context_strategy": "no-such"})
    assert refused.status_code == 422
    cleared = await service.http.patch(f"/api/v2/models/{model_id}", json={"context_strategy": None})
    assert cleared.json()["model"]["context_strategy"] is None


async def test_a_tokens_strategy_applies_before_the_models_and_after_the_requests(service: Service) -> None:
    model_id = await setup_model(service, window=2000)
    await service.http.patch(f"/api/v2/models/{model_id}", json={"context_strategy": "summarize"})
    made = await service.http.post("/api/v2/tokens", json={"name": "agent", "context_strategy": "recall"})
    assert made.status_code == 201 and made.json()["token"]["context_strategy"] == "recall"
    token_id, secret = made.json()["token"]["id"], made.json()["secret"]
    client = sync_client(service, secret)

    async def strategy_used(**extra: Any) -> str:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=long_agent_conversation(30),
            **extra,  # type: ignore[arg-type]
        )
        return str((await audit(service, raw.headers["x-contextshift-audit"]))["context_strategy"])

    assert await strategy_used() == "recall"  # the token's, not the model's summarize
    assert await strategy_used(extra_body={"contextshift": {"strategy": "truncate"}}) == "truncate"
    raw = sync_client(service).chat.completions.with_raw_response.create(  # the admin's token names none
        model="gpt-4o",
        messages=long_agent_conversation(30),  # type: ignore[arg-type]
    )
    assert (await audit(service, raw.headers["x-contextshift-audit"]))["context_strategy"] == "summarize"

    refused = await service.http.patch(f"/api/v2/tokens/{token_id}", json={"context_strategy": "no-such"})
    assert refused.status_code == 422
    listed = (await service.http.get("/api/v2/tokens")).json()["tokens"]
    assert [t["context_strategy"] for t in listed if t["id"] == token_id] == ["recall"]  # nothing changed
    cleared = await service.http.patch(f"/api/v2/tokens/{token_id}", json={"context_strategy": None})
    assert cleared.status_code == 200
    assert {k: v for k, v in cleared.json()["token"].items() if k != "last_used_at"} == {
        **{k: v for k, v in made.json()["token"].items() if k != "last_used_at"},
        "context_strategy": None,
    }
    assert await strategy_used() == "summarize"


async def test_a_token_is_changed_only_by_its_own_user(service: Service, other_user: Account) -> None:
    made = (await service.http.post("/api/v2/tokens", json={"name": "mine"})).json()["token"]
    response = await other_user.http.patch(f"/api/v2/tokens/{made['id']}", json={"context_strategy": "recall"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "TOKEN_NOT_FOUND"
    listed = (await service.http.get("/api/v2/tokens")).json()["tokens"]
    assert [t["context_strategy"] for t in listed if t["id"] == made["id"]] == [None]


# -- forwarding as written -------------------------------------------------------------------------------


async def test_kept_messages_reach_the_provider_as_the_same_json_values(service: Service) -> None:
    await setup_model(service, window=4000)
    messages = long_agent_conversation(40)
    messages[2]["content"] = None  # as the app wrote it (not the "" contextshift would write)
    messages[-4]["content"] = "unicode: é – 漢字 \u2028 and an emoji 🌱"
    messages[-6]["name"] = "agent"  # a key contextshift does not write, after the others
    messages.insert(1, {"role": "developer", "content": "Be brief.", "pinned": False})
    texts = [json.dumps(m, indent=3, ensure_ascii=True) for m in messages]  # an unusual but valid layout
    body = '{"model": "gpt-4o",\n "max_tokens": 300,\n "messages": [' + ",\n".join(texts) + "]}"
    async with service.client(service.token) as http:
        response = await http.post(
            "/v1/chat/completions", content=body.encode(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 200, response.text
    sent = service.fake.last
    forwarded = sent.raw.decode()
    excluded = int(response.headers["x-contextshift-excluded"])
    assert excluded > 0 and len(sent.messages) == len(messages) - excluded
    assert sent.messages[1] == {"role": "system", "content": "Be brief."}  # developer read as system, no pinned
    kept = [n for n, m in enumerate(messages) if m in sent.messages]
    assert len(kept) == len(sent.messages) - 1
    compact = [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in messages]
    for n in kept:
        if n != 1:
            assert compact[n] in forwarded  # each kept message as the caller's values, in the caller's key order
    assert all(compact[n] not in forwarded for n in range(len(messages)) if n not in kept)
    assert '"content":null' in forwarded and "漢字 \u2028 and an emoji 🌱" in forwarded


async def test_a_body_orjson_refuses_is_read_as_json_reads_it(service: Service) -> None:
    await setup_model(service, window=4000)
    big = 2**70  # past 64 bits: orjson refuses the body, json reads it; the message goes on as written
    body = (
        '{"model": "gpt-4o", "max_tokens": 300, "messages": [{"role": "system", "content": "Be brief."},'
        f' {{"role": "user", "content": "hello", "metadata_id": {big}}}]}}'
    )
    async with service.client(service.token) as http:
        response = await http.post(
            "/v1/chat/completions", content=body.encode(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 200, response.text
    assert service.fake.last.messages[-1] == {"role": "user", "content": "hello", "metadata_id": big}
    assert f'"metadata_id": {big}' in service.fake.last.raw.decode()


# -- refusals decided before the route, in OpenAI's shape -----------------------------------------------


def assert_openai_shape(response: httpx.Response, code: str) -> None:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code", "param"}
    assert body["error"]["code"] == code and body["error"]["message"]


async def test_middleware_refusals_on_v1_are_openai_errors_the_sdk_raises(service: Service) -> None:
    await setup_model(service)
    hi = [{"role": "user", "content": "x"}]
    foreign_host = openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.token, max_retries=0, default_headers={"Host": "evil.example"}
    )
    with pytest.raises(openai.BadRequestError) as host:
        foreign_host.chat.completions.create(model="gpt-4o", messages=hi)  # type: ignore[arg-type]
    assert_openai_shape(host.value.response, "host_not_allowed")
    assert host.value.response.headers["x-frame-options"] == "DENY"  # the guard's headers are kept
    with pytest.raises(openai.PermissionDeniedError) as origin:
        sync_client(service).chat.completions.create(
            model="gpt-4o",
            messages=hi,  # type: ignore[arg-type]
            extra_headers={"Origin": "http://evil.example"},
        )
    assert_openai_shape(origin.value.response, "origin_not_allowed")
    with pytest.raises(openai.APIStatusError) as media:
        sync_client(service).chat.completions.create(
            model="gpt-4o",
            messages=hi,  # type: ignore[arg-type]
            extra_headers={"Content-Type": "text/plain"},
        )
    assert media.value.status_code == 415
    assert_openai_shape(media.value.response, "unsupported_media_type")
    with pytest.raises(openai.NotFoundError) as route:
        sync_client(service).get("/no-such-route", cast_to=object)
    assert_openai_shape(route.value.response, "not_found")
    async with service.client() as anonymous:  # no token at all
        refused = await anonymous.get("/v1/models")
    assert refused.status_code == 401
    assert_openai_shape(refused, "invalid_api_key")
    assert refused.headers["www-authenticate"] == 'Bearer realm="contextshift"'
    assert service.fake.requests == []


async def test_the_body_limit_on_v1_is_a_413_the_sdk_raises_with_the_limit(
    backend: Backend, fake_provider: FakeProvider
) -> None:
    app = create_app(
        database=backend.database(), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, max_body_bytes=2000
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            service = Service(url, http, fake_provider, backend)
            await setup_model(service)
            with pytest.raises(openai.APIStatusError) as caught:
                sync_client(service).chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": "long " * 1000}]
                )
    assert caught.value.status_code == 413
    assert_openai_shape(caught.value.response, "payload_too_large")
    assert "limit of 2000 bytes" in caught.value.message
    assert fake_provider.requests == []
