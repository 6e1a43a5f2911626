"""Generation, the context audit and provider failures over HTTP (A1-A4, V3, N1, N2; seed 13.4 cases 22-23)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from contextshift import get_tokenizer
from contextshift.core.messages import Message
from tests.api.conftest import Service
from tests.fakes import SECRET, Error, Reply


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines["event"], json.loads(lines["data"])))
    return events


async def audit_of(service: Service, chat_id: str) -> dict[str, Any]:
    response = await service.http.get(f"/api/v2/chats/{chat_id}/context-audit")
    assert response.status_code == 200
    return response.json()["audit"]  # type: ignore[no-any-return]


async def messages_of(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


async def test_the_audit_is_null_before_any_generation(service: Service) -> None:
    ids = await service.setup_chat()
    assert await audit_of(service, ids["chat"]) is None


async def test_a_generation_stores_the_reply_and_a_completed_audit(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="You are terse.")
    service.fake.script(Reply("Hello there!", input_tokens=50, cached_input_tokens=40, output_tokens=3))
    response = await service.post(
        f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi there", "stream": False}, 200
    )
    assert response["message"]["role"] == "assistant" and response["message"]["content"] == "Hello there!"
    assert response["usage"] == {
        "input_tokens": 50,
        "output_tokens": 3,
        "cached_input_tokens": 40,
        "estimated": False,
    }
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "completed" and audit["error_code"] is None
    assert audit["provider_kind"] == "openai" and audit["model"] == "gpt-4o"
    assert audit["tokenizer"] == {"profile": "o200k_base", "approximate": False}
    assert audit["usage"]["cached_input_tokens"] == 40
    user_entry = next(e for e in audit["entries"] if e["content"] == "hi there")
    assert user_entry["included"] and user_entry["reason"] == "protected" and user_entry["role"] == "user"
    assert {"role": "user", "content": "hi there"} in audit["provider_messages"]
    assert [m["role"] for m in await messages_of(service, ids["chat"])] == ["user", "assistant"]
    sent = service.fake.last.json
    assert sent["model"] == "gpt-4o" and sent["max_tokens"] == 1024
    assert sent["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_a_second_generation_replaces_the_audit(service: Service) -> None:
    ids = await service.setup_chat()
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "first", "stream": False}, 200)
    first = await audit_of(service, ids["chat"])
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "second", "stream": False}, 200)
    second = await audit_of(service, ids["chat"])
    assert second["generation_id"] != first["generation_id"]
    assert any(e["content"] == "second" and e["included"] for e in second["entries"])


async def test_streaming_sends_tokens_then_one_done_event(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("one two three", output_tokens=3))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "count"})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"token"} and len(kinds) >= 3
    assert "".join(data["text"] for kind, data in events if kind == "token") == "one two three"
    done = events[-1][1]
    assert done["message"]["content"] == "one two three" and done["usage"]["output_tokens"] == 3
    assert (await audit_of(service, ids["chat"]))["status"] == "completed"


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (Error(500), "PROVIDER_SERVER_ERROR", 502),
        (Error(401), "PROVIDER_AUTH", 502),
        (Error(429, retry_after=0), "PROVIDER_RATE_LIMITED", 502),
        (Error.context_length(), "PROVIDER_CONTEXT_LENGTH", 502),
    ],
)
async def test_provider_failures_are_normalized_and_leak_nothing(
    service: Service, caplog: pytest.LogCaptureFixture, error: Error, code: str, status: int
) -> None:
    caplog.set_level(logging.DEBUG)
    ids = await service.setup_chat()
    service.fake.script(*[error] * 4)  # two calls, each with one retry where the code is retryable
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    streamed = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "again"})
    [(kind, data)] = sse_events(streamed.text)
    assert kind == "error" and data["code"] == code and data["message"] == response.json()["error"]["message"]
    kept = await messages_of(service, ids["chat"])
    assert data["input_message_id"] == kept[-1]["id"]  # N5: the input is kept, marked failed
    assert response.json()["error"]["params"]["input_message_id"] == kept[0]["id"]
    assert [m["meta"]["failed"]["code"] for m in kept] == [code, code]
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "failed" and audit["error_code"] == code
    everything = response.text + streamed.text + json.dumps(audit) + caplog.text
    assert SECRET not in everything and "sk-test-KEY-789" not in everything
    roles = [m["role"] for m in await messages_of(service, ids["chat"])]
    assert "assistant" not in roles


async def test_a_provider_timeout_is_reported_as_such(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("late", delay=5.0), Reply("late", delay=5.0))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 504 and response.json()["error"]["code"] == "PROVIDER_TIMEOUT"
    assert (await audit_of(service, ids["chat"]))["error_code"] == "PROVIDER_TIMEOUT"


async def test_a_prompt_that_cannot_fit_is_rejected_before_any_call_and_audited_as_failed(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="rule " * 3000, context_window=2000)
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "TOKEN_BUDGET_EXCEEDED"
    # No reserve set: the smaller of 1,024, the model's output limit and a quarter of the window.
    assert error["params"]["context_limit"] == 2000 and error["params"]["response_reserve"] == 500
    assert error["params"]["prompt_tokens"] > 1500
    assert service.fake.requests == []
    assert await messages_of(service, ids["chat"]) == []  # the rejected input is not stored
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "failed" and audit["error_code"] == "TOKEN_BUDGET_EXCEEDED"
    streamed = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi"})
    assert sse_events(streamed.text)[0][1]["code"] == "TOKEN_BUDGET_EXCEEDED"


async def test_a_chat_without_a_usable_model_is_rejected_with_a_clear_code(service: Service) -> None:
    ids = await service.setup_chat()
    await service.http.patch(f"/api/v2/models/{ids['model']}", json={"enabled": False})
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 422 and response.json()["error"]["code"] == "MODEL_DISABLED"
    assert await messages_of(service, ids["chat"]) == []


async def test_the_provider_never_receives_more_tokens_than_the_budget(service: Service) -> None:
    ids = await service.setup_chat(context_window=600, response_reserve=100)
    for n in range(40):
        await service.post(
            f"/api/v2/chats/{ids['chat']}/messages",
            {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} " + "filler words " * 10},
        )
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "and now?", "stream": False}, 200)
    sent = [Message.from_dict(m) for m in service.fake.last.json["messages"]]
    assert get_tokenizer("gpt-4o").count_messages(sent) <= 500
    audit = await audit_of(service, ids["chat"])
    assert audit["budget"]["prompt_tokens"] <= 500
    dropped = [e for e in audit["entries"] if not e["included"] and e["source"] == "history"]
    assert dropped and all(e["reason"] == "context-shift" for e in dropped)
    empty = {e["identifier"] for e in audit["entries"] if e["reason"] == "empty"}
    assert empty == {"core.system-prompt", "core.persona"}


async def test_anthropic_providers_get_the_system_prompt_folded_out_of_the_messages(service: Service) -> None:
    ids = await service.setup_chat(kind="anthropic", model="claude-test", system_prompt="Be kind.")
    response = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "hello", "stream": False}, 200)
    assert response["message"]["content"] == "Echo: hello"
    sent = service.fake.last.json
    assert sent["system"] == "Be kind." and sent["messages"] == [{"role": "user", "content": "hello"}]
    assert (await audit_of(service, ids["chat"]))["tokenizer"]["approximate"] is True


async def test_two_generations_in_one_chat_leave_one_audit_the_newer_one(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("slow", delay=1.0), Reply("fast"))
    url = f"/api/v2/chats/{ids['chat']}/generate"
    slow = asyncio.create_task(service.http.post(url, json={"content": "first", "stream": False}))
    await service.fake.await_for(lambda: len(service.fake.requests) == 1)
    fast = await service.http.post(url, json={"content": "second", "stream": False})
    assert fast.status_code == 200
    newer = await audit_of(service, ids["chat"])
    assert (await slow).status_code == 200
    final = await audit_of(service, ids["chat"])
    assert final["generation_id"] == newer["generation_id"] and final["status"] == "completed"
    assert any(e["content"] == "second" for e in final["entries"])


async def test_a_client_that_disconnects_mid_stream_cancels_the_generation(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("a b c d e f g h i j k l m n o p", chunk_delay=0.2))
    async with service.http.stream(
        "POST", f"/api/v2/chats/{ids['chat']}/generate", json={"content": "talk"}
    ) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: token"):
                break
    request = service.fake.last
    await service.fake.await_for(lambda: request.disconnected.is_set(), timeout=10)
    for _ in range(100):
        audit = await audit_of(service, ids["chat"])
        if audit["status"] != "prepared":
            break
        await asyncio.sleep(0.05)
    assert audit["status"] == "cancelled" and audit["error_code"] == "GENERATION_CANCELLED"
    stored = await messages_of(service, ids["chat"])  # N5: what was streamed is kept, marked partial
    assert [m["role"] for m in stored] == ["user", "assistant"]
    reply = stored[1]
    assert reply["meta"]["partial"] is True and reply["meta"]["partial_reason"] == "cancelled"
    assert reply["content"] and "a b c d e f g h i j k l m n o p".startswith(reply["content"])
    assert reply["reply_to"] == stored[0]["id"] and audit["reply_message_id"] == reply["id"]


async def test_an_empty_reply_is_a_failure_not_a_message(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply(""))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 502 and response.json()["error"]["code"] == "EMPTY_RESPONSE"
    assert (await audit_of(service, ids["chat"]))["error_code"] == "EMPTY_RESPONSE"


async def test_http_client_sees_json_errors_for_unknown_chats_even_when_streaming(service: Service) -> None:
    response = await service.http.post("/api/v2/chats/missing/generate", json={"content": "hi"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "CHAT_NOT_FOUND"
    assert isinstance(response, httpx.Response)
