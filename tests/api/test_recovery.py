"""N5/C10 through the service: a synchronous pass waits for another instance's running pass only so long, then
the turn goes on with shifting alone and says so; a dead instance's lease is taken over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from contextshift.api.app import create_app
from contextshift.storage import Database, Repositories
from contextshift.storage.liveness import InstanceRepository
from contextshift.storage.tables import InstanceRow
from contextshift.storage.types import utcnow
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, Service, bearer
from tests.api.test_compaction import SUMMARY, fill, is_summarizer, logs
from tests.databases import Backend
from tests.fakes import FakeProvider, Reply

FAST: dict[str, Any] = {"heartbeat_interval": 0.05, "heartbeat_expiry": 2.0}


@pytest.fixture
async def other(backend: Backend) -> AsyncIterator[Database]:
    """Another live instance on the same database."""
    db = backend.database(instance_id="other-instance", **FAST)
    await db.start()
    yield db
    await db.close()


@pytest.fixture
async def served(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[tuple[Service, Any]]:
    """The service (and its app) beating every 50 ms, a synchronous caller waiting at most 0.2 s for another
    pass. (The app runs on its own event loop: the tests reach its database through instances of their own.)"""
    app = create_app(database=backend.database(**FAST), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    app.state.compactor.sync_wait = 0.2
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake_provider, backend), app


async def _lease_held_by(db: Database, chat_id: str, instance_id: str) -> None:
    """Another instance (sharing the database) holds the chat's compaction lease and beats."""
    async with db.session() as session:
        session.info["instance_id"] = instance_id
        await InstanceRepository(session).beat(instance_id, timedelta(seconds=30))
        assert await Repositories(session).compaction.acquire_lease(chat_id, instance_id, timedelta(seconds=30))


async def test_a_turn_waits_for_another_instance_pass_only_so_long_and_says_so(
    served: tuple[Service, Any], other: Database
) -> None:
    service, _app = served
    ids = await service.setup_chat(context_window=3000, response_reserve=200)
    await fill(service, ids["chat"], 22)  # over 75%: the turn wants a synchronous pass
    await _lease_held_by(other, ids["chat"], other.instance_id)
    service.fake.script(Reply("Answered without compaction."))

    reply = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "so?", "stream": False}, 200)

    assert reply["message"]["content"] == "Answered without compaction."
    assert [is_summarizer(r) for r in service.fake.requests] == [False]  # no pass of its own
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    assert audit["status"] == "completed"
    assert any(d.startswith("compaction: another pass of this chat was still running") for d in audit["diagnostics"])
    assert await logs(service, ids["chat"]) == []


async def test_the_lease_of_a_dead_instance_is_freed_by_a_live_heartbeat(
    served: tuple[Service, Any], other: Database
) -> None:
    service, _app = served
    ids = await service.setup_chat(context_window=3000, response_reserve=200)
    await fill(service, ids["chat"], 22)
    await _lease_held_by(other, ids["chat"], "killed-instance")
    async with other.session() as session:  # killed five minutes ago
        await session.execute(
            update(InstanceRow)
            .where(InstanceRow.id == "killed-instance")
            .values(heartbeat_at=utcnow() - timedelta(minutes=5))
        )
    for _ in range(1000):  # a live instance's beat frees it; bounded by polls
        async with other.session() as session:
            if not await Repositories(session).compaction.lease_busy(ids["chat"]):
                break
        await asyncio.sleep(0.02)
    async with other.session() as session:
        assert not await Repositories(session).compaction.lease_busy(ids["chat"])
    service.fake.script(Reply(SUMMARY), Reply("Here is my answer."))

    reply = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "so?", "stream": False}, 200)

    assert reply["message"]["content"] == "Here is my answer."
    assert [is_summarizer(r) for r in service.fake.requests] == [True, False]
    assert [(e["trigger"], e["status"]) for e in await logs(service, ids["chat"])] == [("sync", "completed")]
