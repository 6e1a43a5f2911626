"""No lost work (N5): turns serialized per chat, replies linked to their input, partial replies kept,
failed inputs kept but left out of prompts until retried."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.service.turns import TurnPolicy
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, Service, bearer
from tests.databases import Backend
from tests.fakes import Error, FakeProvider, Reply


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


@pytest.fixture
async def tuned(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Service]:
    """The service with a short turn wait (0.3 s) and a 0.05 s heartbeat."""
    app = create_app(database=backend.database(), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    app.state.generations.turns.policy = TurnPolicy(wait=0.3)
    app.state.generations.heartbeat_seconds = 0.05
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake_provider, backend)


async def messages_of(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


async def audit_of(service: Service, chat_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]  # type: ignore[no-any-return]


async def test_a_reply_records_the_input_it_answers_in_the_message_and_the_audit(service: Service) -> None:
    ids = await service.setup_chat()
    done = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": False}, 200)
    question, answer = await messages_of(service, ids["chat"])
    assert done["message"]["reply_to"] == question["id"] == answer["reply_to"]
    assert question["reply_to"] is None
    audit = await audit_of(service, ids["chat"])
    assert audit["input_message_id"] == question["id"] and audit["reply_message_id"] == answer["id"]


async def test_a_second_turn_on_a_busy_chat_waits_then_gets_chat_busy_and_stores_nothing(tuned: Service) -> None:
    ids = await tuned.setup_chat()
    tuned.fake.script(Reply("slow", delay=1.5))
    url = f"/api/v2/chats/{ids['chat']}/generate"
    first = asyncio.create_task(tuned.http.post(url, json={"content": "first", "stream": False}))
    assert await tuned.fake.await_for(lambda: len(tuned.fake.requests) == 1)
    second = await tuned.http.post(url, json={"content": "second", "stream": False})
    assert second.status_code == 409 and second.json()["error"]["code"] == "CHAT_BUSY"
    assert (await first).status_code == 200
    assert [m["content"] for m in await messages_of(tuned, ids["chat"])] == ["first", "slow"]
    assert len(tuned.fake.requests) == 1


async def test_a_stream_dropped_mid_reply_is_stored_as_partial_and_counts_as_history(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("one two three four five", abort_after=2))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "count"})
    events = sse(response.text)
    assert [k for k, _ in events] == ["token", "token", "error"]
    error = events[-1][1]
    assert error["code"] == "PROVIDER_UNAVAILABLE"
    question, partial = await messages_of(service, ids["chat"])
    assert error["partial"]["id"] == partial["id"] and partial["content"] == "one two"
    assert partial["meta"]["partial"] is True and partial["meta"]["partial_reason"] == "provider-error"
    assert partial["meta"]["error_code"] == "PROVIDER_UNAVAILABLE" and partial["reply_to"] == question["id"]
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "failed" and audit["error_code"] == "PROVIDER_UNAVAILABLE"
    assert audit["reply_message_id"] == partial["id"]
    assert len(service.fake.requests) == 1  # text had been sent: not retried
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "go on", "stream": False}, 200)
    sent = service.fake.last.messages
    assert [m["content"] for m in sent] == ["count", "one two", "go on"]


async def test_a_failed_input_is_kept_left_out_of_prompts_and_can_be_retried(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Error(401))
    url = f"/api/v2/chats/{ids['chat']}/generate"
    failed = await service.http.post(url, json={"content": "lost?", "stream": False})
    assert failed.status_code == 502
    params = failed.json()["error"]["params"]
    [kept] = await messages_of(service, ids["chat"])
    assert params == {"input_message_id": kept["id"], "input_kept": True, "retry_with": "retry_of"}
    assert kept["content"] == "lost?" and kept["meta"]["failed"] == {"code": "PROVIDER_AUTH"}

    await service.post(url, {"content": "hello", "stream": False}, 200)
    assert [m["content"] for m in service.fake.last.messages] == ["hello"]  # the failed input is left out
    stale = await service.http.post(url, json={"retry_of": kept["id"], "stream": False})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "RETRY_NOT_POSSIBLE"


async def test_retrying_the_newest_failed_input_sends_it_again_without_a_copy(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Error(401))
    url = f"/api/v2/chats/{ids['chat']}/generate"
    assert (await service.http.post(url, json={"content": "again", "stream": False})).status_code == 502
    [kept] = await messages_of(service, ids["chat"])
    retried = await service.http.post(url, json={"retry_of": kept["id"]})
    assert [k for k, _ in sse(retried.text)][-1] == "done"
    question, answer = await messages_of(service, ids["chat"])
    assert question["id"] == kept["id"] and "failed" not in question["meta"]
    assert answer["reply_to"] == kept["id"] and answer["content"] == "Echo: again"
    both = await service.http.post(url, json={"retry_of": kept["id"], "content": "x"})
    assert both.status_code == 422


async def test_the_stream_sends_heartbeat_comments_while_waiting_for_the_first_token(tuned: Service) -> None:
    ids = await tuned.setup_chat()
    tuned.fake.script(Reply("finally", delay=0.6))
    response = await tuned.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "wait"})
    before_first_token = response.text.split("event: token")[0]
    assert before_first_token.count(": heartbeat\n\n") >= 2
    assert [k for k, _ in sse(response.text)][-1] == "done"
