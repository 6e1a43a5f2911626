"""Provider faults over a real socket (N5): what each leaves stored, the audit, and how many requests the
fake saw (bounds in the fake's own terms: request counts, never the clock).

The provider here has ``timeout_seconds`` 1 (so the turn's deadline is 5 s) and the service uses the
provider's own deadline (no ``timeouts`` client option); retries back off for a few milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.providers import RetryPolicy, reply_cap
from tests.api.conftest import ADMIN_TOKEN, Server, Service, bearer
from tests.databases import Backend
from tests.fakes import Error, FakeProvider, Raw, Reply

FAULT_OPTIONS: dict[str, Any] = {
    "retry": RetryPolicy(retries=2, backoff_base=0.01, backoff_max=0.02, retry_after_cap=120.0)
}
BIG = 20 * 1024 * 1024


@pytest.fixture
async def faulty(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Service]:
    app = create_app(database=backend.database(), client_options=FAULT_OPTIONS, admin_token=ADMIN_TOKEN)
    app.state.generations.heartbeat_seconds = 0.05
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake_provider, backend)


async def chat(service: Service, **bot: Any) -> str:
    ids = await service.setup_chat(**bot)
    patched = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"timeout_seconds": 1})
    assert patched.status_code == 200 and patched.json()["provider"]["timeout_seconds"] == 1
    return ids["chat"]


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line.startswith(("event: ", "data: ")))
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


async def stored(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


async def audit(service: Service, chat_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]  # type: ignore[no-any-return]


async def test_timeout_seconds_defaults_to_60_and_is_bounded(service: Service) -> None:
    ids = await service.setup_chat()
    provider = (await service.http.get(f"/api/v2/providers/{ids['provider']}")).json()["provider"]
    assert provider["timeout_seconds"] == 60
    for bad in (0, 601, "30"):
        response = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"timeout_seconds": bad})
        assert response.status_code == 422, bad


async def test_a_provider_that_hangs_before_headers_is_asked_once_and_the_input_is_kept(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Reply("never", delay=60), Reply("never", delay=60))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 504 and response.json()["error"]["code"] == "PROVIDER_TIMEOUT"
    assert len(faulty.fake.requests) == 1  # it reached the provider: not sent again
    [kept] = await stored(faulty, chat_id)
    assert kept["meta"]["failed"] == {"code": "PROVIDER_TIMEOUT"}
    assert (await audit(faulty, chat_id))["status"] == "failed"


async def test_a_stream_waiting_for_its_first_token_gets_heartbeats_then_a_timeout(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Reply("never", delay=60))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi"})
    assert response.text.count(": heartbeat\n\n") >= 1
    [(kind, error)] = sse(response.text)
    assert kind == "error" and error["code"] == "PROVIDER_TIMEOUT" and "input_message_id" in error
    assert len(faulty.fake.requests) == 1


async def test_a_stream_that_stalls_after_the_first_token_keeps_that_token_as_a_partial_reply(
    faulty: Service,
) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Reply("first then nothing", hang_after=1))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi"})
    kinds = [k for k, _ in sse(response.text)]
    assert kinds == ["token", "error"] and sse(response.text)[-1][1]["code"] == "PROVIDER_TIMEOUT"
    question, partial = await stored(faulty, chat_id)
    assert partial["content"] == "first" and partial["meta"]["partial"] is True
    assert partial["meta"]["error_code"] == "PROVIDER_TIMEOUT" and partial["reply_to"] == question["id"]
    assert (await audit(faulty, chat_id))["error_code"] == "PROVIDER_TIMEOUT"
    assert len(faulty.fake.requests) == 1


async def test_a_slow_stream_within_the_timeout_is_stored_whole(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Reply("slow but steady words", chunk_delay=0.2))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi"})
    assert [k for k, _ in sse(response.text)] == ["token"] * 4 + ["done"]
    assert (await stored(faulty, chat_id))[-1]["content"] == "slow but steady words"
    assert len(faulty.fake.requests) == 1


async def test_a_stream_dropped_mid_reply_is_kept_partial_and_not_retried(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Reply("a b c d e", abort_after=3))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi"})
    assert [k for k, _ in sse(response.text)] == ["token"] * 3 + ["error"]
    assert (await stored(faulty, chat_id))[-1]["content"] == "a b c"
    assert (await audit(faulty, chat_id))["status"] == "failed"
    assert len(faulty.fake.requests) == 1


@pytest.mark.parametrize(
    ("answer", "stream"),
    [
        (Raw(body=b"{not json"), False),
        (Raw(body=b"data: {not json\n\n", content_type="text/event-stream"), True),
    ],
    ids=["invalid-json", "invalid-sse"],
)
async def test_garbage_from_the_provider_fails_the_turn_once_and_keeps_the_input(
    faulty: Service, answer: Raw, stream: bool
) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(answer, answer, answer)
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": stream})
    code = sse(response.text)[-1][1]["code"] if stream else response.json()["error"]["code"]
    assert code == "GENERATION_FAILED"
    assert len(faulty.fake.requests) == 1
    [kept] = await stored(faulty, chat_id)
    assert kept["meta"]["failed"] == {"code": "GENERATION_FAILED"}


async def test_a_429_with_retry_after_is_retried_after_the_wait(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Error(429, retry_after=0.1), Reply("at last"))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 200 and response.json()["message"]["content"] == "at last"
    assert len(faulty.fake.requests) == 2


async def test_a_429_asking_to_wait_past_the_deadline_is_not_retried(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Error(429, retry_after=30), Reply("too late"))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 502 and response.json()["error"]["code"] == "PROVIDER_RATE_LIMITED"
    assert len(faulty.fake.requests) == 1


async def test_5xx_before_any_byte_is_retried_with_backoff(faulty: Service) -> None:
    chat_id = await chat(faulty)
    faulty.fake.script(Error(503), Error(500), Reply("third time"))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi"})
    assert sse(response.text)[-1][1]["message"]["content"] == "third time"
    assert len(faulty.fake.requests) == 3


async def test_a_20_mb_stream_is_stopped_at_its_cap_and_what_came_is_kept(faulty: Service) -> None:
    # Issue 25, point 10 (this test used to assert the 20 MB reply was stored whole).
    chat_id = await chat(faulty)
    piece = "x" * (1024 * 1024 - 1) + " "
    faulty.fake.script(Reply(piece * 20, chunks=[piece] * 20))
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": True})
    assert response.status_code == 200
    events = sse(response.text)
    cap = reply_cap(faulty.fake.requests[0].json.get("max_tokens"))
    streamed = "".join(data["text"] for kind, data in events if kind == "token")
    assert events[-1][0] == "done" and len(streamed) == cap < BIG
    reply = (await stored(faulty, chat_id))[-1]
    assert reply["role"] == "assistant" and reply["content"] == streamed
    assert reply["meta"]["cut"] == "reply_too_large" and reply["meta"]["finish_reason"] == "length"
    assert len(faulty.fake.requests) == 1


async def test_a_json_reply_over_its_cap_is_cut_and_one_over_the_hard_limit_fails(faulty: Service) -> None:
    # The first reply fills half the window, which would start a background compaction pass: its summarizer
    # call would be a third request to the fake, racing this test's count.
    chat_id = await chat(faulty, compaction_enabled=False)
    faulty.fake.script(Reply("y" * 100_000))  # well under the hard limit, over 16 bytes a token of max_tokens
    response = await faulty.http.post(
        f"/api/v2/chats/{chat_id}/generate", json={"content": "hi", "stream": False, "max_tokens": 100}
    )
    assert response.status_code == 200, response.text
    message = response.json()["message"]
    cap = reply_cap(faulty.fake.requests[0].json["max_tokens"])
    assert message["content"] == "y" * cap and message["meta"]["cut"] == "reply_too_large"
    faulty.fake.script(Reply("z" * BIG))  # a body that cannot be cut: JSON is parsed whole or not at all
    response = await faulty.http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "more", "stream": False})
    assert response.status_code == 502 and response.json()["error"]["code"] == "GENERATION_FAILED"
    assert (await stored(faulty, chat_id))[-1]["meta"]["failed"] == {"code": "GENERATION_FAILED"}
    assert len(faulty.fake.requests) == 2
