"""N5: a running turn is never pulled from under itself, and its stream always ends (SQLite, PostgreSQL).

Rewinding, deleting a message or deleting the chat while a turn streams is refused with 409 ``CHAT_BUSY`` and
changes nothing; once the turn is over the same calls succeed. Deleting the chat's owner (which deletes the
chat) mid-stream ends the stream with an ``error`` event, and nothing is logged with a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.api.conftest import Account, Service
from tests.api.test_provider_faults import sse
from tests.fakes import Reply


@asynccontextmanager
async def running_turn(service: Service, http: httpx.AsyncClient, chat_id: str) -> AsyncIterator[list[str]]:
    """A streaming turn held open by the provider until the block ends; yields the SSE text read after it."""
    hold = threading.Event()
    service.fake.script(Reply("the reply to hold", hold=hold))
    body: list[str] = []
    try:
        async with http.stream("POST", f"/api/v2/chats/{chat_id}/generate", json={"content": "go"}) as response:
            assert response.status_code == 200
            await service.fake.await_for(lambda: len(service.fake.requests) == 1)  # the turn reached the provider
            try:
                yield body
            finally:
                hold.set()
            body.append((await response.aread()).decode())
    finally:
        hold.set()


async def messages(http: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    return (await http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


CHANGES: dict[str, Callable[[httpx.AsyncClient, str, str], Awaitable[httpx.Response]]] = {
    "rewind": lambda http, chat, first: http.post(f"/api/v2/chats/{chat}/messages/{first}/rewind"),
    "delete-message": lambda http, chat, first: http.delete(f"/api/v2/chats/{chat}/messages/{first}"),
    "delete-chat": lambda http, chat, first: http.delete(f"/api/v2/chats/{chat}"),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
async def test_a_change_during_a_turn_is_refused_and_the_reply_is_stored_where_it_belongs(
    service: Service, change: str
) -> None:
    ids = await service.setup_chat()
    first = (await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "before"}))[
        "message"
    ]["id"]
    await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "assistant", "content": "answered"})
    async with running_turn(service, service.http, ids["chat"]) as body:
        before = await messages(service.http, ids["chat"])
        refused = await CHANGES[change](service.http, ids["chat"], first)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "CHAT_BUSY"
        assert await messages(service.http, ids["chat"]) == before  # nothing changed
    [*_, (kind, done)] = sse(body[0])
    assert kind == "done"
    stored = await messages(service.http, ids["chat"])
    assert [m["content"] for m in stored] == ["before", "answered", "go", "the reply to hold"]
    assert stored[-1]["reply_to"] == stored[-2]["id"] == done["message"]["reply_to"]
    after = await CHANGES[change](service.http, ids["chat"], first)  # the turn is over: the change is made
    assert after.status_code == 200, after.text


async def test_deleting_the_owner_mid_stream_ends_the_stream_with_an_error_and_no_traceback(
    service: Service, other_user: Account, caplog: pytest.LogCaptureFixture
) -> None:
    provider = await service.post(
        "/api/v2/providers", {"name": "fake", "kind": "openai", "base_url": service.fake.base_url, "api_key": "k"}
    )
    model = await service.post(
        "/api/v2/models", {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "context_window": 8000}
    )
    bot = (await other_user.http.post("/api/v2/bots", json={"name": "b", "chat_model_id": model["model"]["id"]})).json()
    chat = (await other_user.http.post("/api/v2/chats", json={"bot_id": bot["bot"]["id"]})).json()["chat"]
    caplog.set_level(logging.INFO)
    async with running_turn(service, other_user.http, chat["id"]) as body:
        deleted = await service.http.delete(f"/api/v2/users/{other_user.id}")
        assert deleted.status_code == 200, deleted.text
    events = sse(body[0])
    assert events[-1][0] == "error" and events[-1][1]["code"] == "CHAT_NOT_FOUND"
    assert not [r for r in caplog.records if r.exc_info]
    assert (await service.http.get(f"/api/v2/chats/{chat['id']}")).status_code == 404


async def test_a_turn_whose_chat_is_deleted_with_its_owner_mid_call_answers_404_and_stores_nothing(
    service: Service, other_user: Account, caplog: pytest.LogCaptureFixture
) -> None:
    provider = await service.post(
        "/api/v2/providers", {"name": "fake", "kind": "openai", "base_url": service.fake.base_url, "api_key": "k"}
    )
    model = await service.post(
        "/api/v2/models", {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "context_window": 8000}
    )
    bot = (await other_user.http.post("/api/v2/bots", json={"name": "b", "chat_model_id": model["model"]["id"]})).json()
    chat = (await other_user.http.post("/api/v2/chats", json={"bot_id": bot["bot"]["id"]})).json()["chat"]
    caplog.set_level(logging.INFO)
    hold = threading.Event()
    service.fake.script(Reply("the reply to hold", hold=hold))
    try:
        turn = asyncio.create_task(
            other_user.http.post(f"/api/v2/chats/{chat['id']}/generate", json={"content": "go", "stream": False})
        )
        await service.fake.await_for(lambda: len(service.fake.requests) == 1)  # the turn reached the provider
        deleted = await service.http.delete(f"/api/v2/users/{other_user.id}")
        assert deleted.status_code == 200, deleted.text
    finally:
        hold.set()
    answer = await turn
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "CHAT_NOT_FOUND")
    assert not [r for r in caplog.records if r.exc_info]
    assert (await service.http.get(f"/api/v2/chats/{chat['id']}")).status_code == 404
