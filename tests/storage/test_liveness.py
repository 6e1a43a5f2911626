"""N5/A3/C10 crash recovery in storage, on SQLite and PostgreSQL: instances beat, a dead instance's audits,
logs, leases and jobs are closed or freed by a live one, and another live instance's work is never touched.

A "dead" instance is one whose row has a heartbeat an hour old (what a ``kill -9`` leaves once the expiry
has passed); the real-process version of this is ``tests/crash``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, update
from sqlalchemy.util import await_only

from contextshift.storage import Database, Repositories
from contextshift.storage.liveness import COMPACTION_INTERRUPTED, JOB_INTERRUPTED, InstanceRepository, Recovered
from contextshift.storage.tables import ChatRow, InstanceRow, JobRow
from contextshift.storage.types import utcnow
from tests.databases import Backend
from tests.storage.seed import Seeded, seed_chat

EXPIRY = timedelta(seconds=30)


async def _work_of(db: Database, instance_id: str, seeded: Seeded) -> tuple[str, str]:
    """An instance ``instance_id`` that registered and started a generation, a pass, a lease and a job."""
    async with db.session() as session:
        session.info["instance_id"] = instance_id
        repos = Repositories(session)
        await InstanceRepository(session).beat(instance_id, EXPIRY)
        await repos.audits.prepare(seeded.chat_id, f"gen-{instance_id}", {"blocks": []})
        entry = await repos.compaction.start_log(
            bot_id=seeded.bot_id, chat_id=seeded.chat_id, trigger="background", model="gpt-4o"
        )
        assert await repos.compaction.acquire_lease(seeded.chat_id, instance_id, EXPIRY)
        assert await repos.jobs.enqueue("compaction.pass", {"chat_id": seeded.chat_id}, lock=f"chat:{seeded.chat_id}")
        job = await repos.jobs.claim(EXPIRY, instance_id)
        assert job is not None and job.instance_id == instance_id
        await repos.job_attempts.start(runner="local", job_id=job.id, task=job.task, attempt=job.attempts)
        return entry.id, job.id


async def _stop_heartbeat_of(db: Database, instance_id: str) -> None:
    async with db.session() as session:
        await session.execute(
            update(InstanceRow).where(InstanceRow.id == instance_id).values(heartbeat_at=utcnow() - timedelta(hours=1))
        )


async def test_a_live_instance_closes_and_frees_what_a_dead_instance_left(db: Database) -> None:
    seeded = await seed_chat(db)
    log_id, job_id = await _work_of(db, "dead", seeded)
    await _stop_heartbeat_of(db, "dead")

    recovered = await db.heartbeat.beat()

    assert recovered == Recovered(audits=1, logs=1, leases=1, jobs=1, instances=1, attempts=1)
    async with db.session() as session:
        repos = Repositories(session)
        audit = await repos.audits.get(seeded.chat_id)
        assert audit is not None and (audit.status, audit.error_code) == ("failed", "GENERATION_INTERRUPTED")
        entry = await repos.compaction.get_log(log_id)
        assert entry is not None and (entry.status, entry.error_code) == ("failed", COMPACTION_INTERRUPTED)
        assert entry.completed_at is not None
        assert not await repos.compaction.lease_busy(seeded.chat_id)
        assert await repos.compaction.acquire_lease(seeded.chat_id, db.instance_id, EXPIRY)
        attempt = (await repos.job_attempts.of_jobs("local", [job_id]))[job_id][0]
        assert (attempt.status, attempt.error_code) == ("interrupted", JOB_INTERRUPTED)
        again = await repos.jobs.claim(EXPIRY, db.instance_id)  # queued again, claimed by the live instance
        assert again is not None and again.id == job_id and again.attempts == 2
        assert again.instance_id == db.instance_id
        assert await InstanceRepository(session).heartbeat_of("dead") is None
    assert await db.heartbeat.beat() == Recovered()  # nothing twice


async def test_an_instance_that_dies_while_a_beat_recovers_keeps_no_lease_past_the_next_beat(
    backend: Backend, db: Database
) -> None:
    """Under READ COMMITTED each statement of a recovery sees the commits before it: an instance whose expiry
    passes between the statement that frees the dead's leases and the one that deletes the dead must not be
    deleted with its lease still held (no later beat would find its owner to free it)."""
    if backend.name != "postgresql":
        pytest.skip("SQLite's write lock admits no commit between a recovery's statements")
    seeded = await seed_chat(db)
    async with db.session() as session:
        await InstanceRepository(session).beat("dying", EXPIRY)
        assert await Repositories(session).compaction.acquire_lease(seeded.chat_id, "dying", EXPIRY)
    aged: list[str] = []

    def age_the_dying_before_the_delete(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM INSTANCES") and not aged:
            aged.append(statement)
            await_only(_stop_heartbeat_of(db, "dying"))  # another connection commits meanwhile

    event.listen(db.engine.sync_engine, "before_cursor_execute", age_the_dying_before_the_delete)
    try:
        await db.heartbeat.beat()
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", age_the_dying_before_the_delete)
    assert aged, "the recovery deleted no instance row"

    await db.heartbeat.beat()

    async with db.session() as session:
        assert not await Repositories(session).compaction.lease_busy(seeded.chat_id)
        assert await InstanceRepository(session).heartbeat_of("dying") is None


async def test_another_live_instance_work_is_never_touched(backend: Backend, db: Database) -> None:
    seeded = await seed_chat(db)
    log_id, _job = await _work_of(db, "alive", seeded)

    assert await db.heartbeat.beat() == Recovered()
    starting = backend.database()  # a third instance starting meanwhile
    await starting.start()
    try:
        assert await starting.heartbeat.beat() == Recovered()
    finally:
        await starting.close()
    async with db.session() as session:
        repos = Repositories(session)
        audit = await repos.audits.get(seeded.chat_id)
        assert audit is not None and audit.status == "prepared"
        entry = await repos.compaction.get_log(log_id)
        assert entry is not None and entry.status == "running"
        assert await repos.compaction.lease_busy(seeded.chat_id)
        assert await repos.jobs.claim(EXPIRY, db.instance_id) is None


async def test_a_restart_under_the_same_instance_id_closes_its_own_earlier_life_at_once(
    backend: Backend, db: Database
) -> None:
    seeded = await seed_chat(db)
    log_id, _job = await _work_of(db, "node-1", seeded)  # node-1 was killed a moment ago: its beat is fresh

    restarted = backend.database(instance_id="node-1")
    await restarted.start()
    try:
        async with restarted.session() as session:
            repos = Repositories(session)
            audit = await repos.audits.get(seeded.chat_id)
            assert audit is not None and (audit.status, audit.error_code) == ("failed", "GENERATION_INTERRUPTED")
            entry = await repos.compaction.get_log(log_id)
            assert entry is not None and entry.error_code == COMPACTION_INTERRUPTED
            assert not await repos.compaction.lease_busy(seeded.chat_id)
            job = await repos.jobs.claim(EXPIRY, "node-1")
            assert job is not None and job.attempts == 2
    finally:
        await restarted.close()


async def test_the_heartbeat_renews_the_leases_and_claims_it_holds(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.compaction.acquire_lease(seeded.chat_id, db.instance_id, timedelta(seconds=1))
        assert await repos.jobs.enqueue("compaction.pass", {"chat_id": seeded.chat_id})
        job = await repos.jobs.claim(timedelta(seconds=1), db.instance_id)
        assert job is not None
        chat_before = await session.get(ChatRow, seeded.chat_id)
        assert chat_before is not None
        lease_before, updated_before = chat_before.compaction_lease_until, chat_before.updated_at
    await db.heartbeat.beat()
    async with db.session() as session:
        chat = await session.get(ChatRow, seeded.chat_id, populate_existing=True)
        claimed = await session.get(JobRow, job.id, populate_existing=True)
        assert chat is not None and claimed is not None
        assert lease_before is not None and chat.compaction_lease_until is not None
        assert chat.compaction_lease_until - lease_before >= db.heartbeat.expiry - timedelta(seconds=2)
        assert chat.updated_at == updated_before  # a renewal is no edit of the chat
        assert claimed.lease_until is not None and job.lease_until is not None
        assert claimed.lease_until - job.lease_until >= db.heartbeat.expiry - timedelta(seconds=2)


async def test_a_started_database_beats_on_its_own_and_leaves_on_close(backend: Backend) -> None:
    db = backend.database(heartbeat_interval=0.01, heartbeat_expiry=5)
    await db.start()
    try:
        for _ in range(2000):  # bounded by polls, not by the clock
            if db.heartbeat.beats >= 3:
                break
            await asyncio.sleep(0.01)
        assert db.heartbeat.beats >= 3
        async with db.session() as session:
            assert await InstanceRepository(session).heartbeat_of(db.instance_id) is not None
    finally:
        await db.close()
    other = backend.database()
    await other.start()
    try:
        async with other.session() as session:
            assert await InstanceRepository(session).heartbeat_of(db.instance_id) is None
    finally:
        await other.close()


async def test_ownerless_prepared_audits_of_an_older_version_are_closed_on_start(
    backend: Backend, db: Database
) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        session.info.pop("instance_id")  # written by a version without instances
        await Repositories(session).audits.prepare(seeded.chat_id, "gen-old", {})
    restarted = backend.database()
    await restarted.start()
    try:
        async with restarted.session() as session:
            audit = await Repositories(session).audits.get(seeded.chat_id)
            assert audit is not None and audit.error_code == "GENERATION_INTERRUPTED"
    finally:
        await restarted.close()
