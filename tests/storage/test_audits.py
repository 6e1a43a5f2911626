"""Prompt-context audits (A1–A3): replaced per chat, finished once, stale finishes rejected, cascades."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select

from contextshift.storage import Database, InvalidValue, NotFound, Repositories, normalize_error_code
from contextshift.storage.tables import AuditRow

from .conftest import Backend
from .seed import seed_chat

CODE = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")


async def _audit_rows(db: Database) -> int:
    async with db.session() as session:
        return int((await session.execute(select(func.count()).select_from(AuditRow))).scalar_one())


async def test_prepare_creates_a_prepared_audit(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        audit = await Repositories(session).audits.prepare(seeded.chat_id, "gen-1", {"blocks": [{"id": "m1"}]})
    assert (audit.chat_id, audit.generation_id, audit.status, audit.error_code) == (
        seeded.chat_id,
        "gen-1",
        "prepared",
        None,
    )
    assert audit.payload == {"blocks": [{"id": "m1"}]} and audit.usage is None and audit.finished_at is None
    async with db.session() as session:
        assert await Repositories(session).audits.get("another-chat") is None
        with pytest.raises(NotFound):
            await Repositories(session).audits.prepare("missing-chat", "gen-1", {})


async def test_a_new_generation_replaces_the_previous_audit(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        audits = Repositories(session).audits
        await audits.prepare(seeded.chat_id, "gen-1", {"n": 1})
        assert await audits.finish(seeded.chat_id, "gen-1", "failed", "PROVIDER_TIMEOUT", usage={"prompt": 3})
    async with db.session() as session:
        replaced = await Repositories(session).audits.prepare(seeded.chat_id, "gen-2", {"n": 2})
    assert (replaced.generation_id, replaced.status, replaced.error_code, replaced.usage, replaced.finished_at) == (
        "gen-2",
        "prepared",
        None,
        None,
        None,
    )
    assert replaced.payload == {"n": 2}
    assert await _audit_rows(db) == 1


async def test_finish_completes_once_and_a_second_finish_is_rejected(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        await Repositories(session).audits.prepare(seeded.chat_id, "gen-1", {"blocks": [], "keep": "me"})
    async with db.session() as session:
        audits = Repositories(session).audits
        assert await audits.finish(
            seeded.chat_id,
            "gen-1",
            "completed",
            usage={"prompt_tokens": 10, "cached_tokens": 4},
            payload_updates={"final_messages": [{"role": "user", "content": "hi"}], "blocks": [1]},
        )
        assert not await audits.finish(seeded.chat_id, "gen-1", "failed", "GENERATION_FAILED")
        audit = await audits.get(seeded.chat_id)
    assert audit is not None
    assert (audit.status, audit.error_code, audit.usage) == (
        "completed",
        None,
        {"prompt_tokens": 10, "cached_tokens": 4},
    )
    assert audit.payload == {"blocks": [1], "keep": "me", "final_messages": [{"role": "user", "content": "hi"}]}
    assert audit.finished_at is not None and audit.finished_at >= audit.created_at


async def test_a_finish_from_an_older_generation_is_rejected(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        audits = Repositories(session).audits
        await audits.prepare(seeded.chat_id, "gen-old", {})
        await audits.prepare(seeded.chat_id, "gen-new", {})
        assert not await audits.finish(seeded.chat_id, "gen-old", "completed")
        current = await audits.get(seeded.chat_id)
        assert current is not None and (current.generation_id, current.status) == ("gen-new", "prepared")
        assert await audits.finish(seeded.chat_id, "gen-new", "cancelled")
        current = await audits.get(seeded.chat_id)
        assert current is not None and (current.status, current.error_code) == ("cancelled", None)


async def test_concurrent_generations_leave_exactly_one_audit(db: Database) -> None:
    seeded = await seed_chat(db)

    async def generation(n: int) -> None:
        async with db.session() as session:
            await Repositories(session).audits.prepare(seeded.chat_id, f"gen-{n}", {"n": n})

    await asyncio.gather(*(generation(n) for n in range(6)))
    assert await _audit_rows(db) == 1
    async with db.session() as session:
        audit = await Repositories(session).audits.get(seeded.chat_id)
    assert audit is not None and audit.payload == {"n": int(audit.generation_id.removeprefix("gen-"))}


async def test_concurrent_finishes_succeed_exactly_once(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        await Repositories(session).audits.prepare(seeded.chat_id, "gen-1", {})

    async def finish(status: str) -> bool:
        async with db.session() as session:
            return await Repositories(session).audits.finish(seeded.chat_id, "gen-1", status)

    results = await asyncio.gather(finish("completed"), finish("cancelled"), finish("failed"))
    assert sorted(results) == [False, False, True]


@pytest.mark.parametrize(
    ("given_code", "stored"),
    [
        ("PROVIDER_RATE_LIMITED", "PROVIDER_RATE_LIMITED"),
        ("TOKEN_BUDGET_EXCEEDED", "TOKEN_BUDGET_EXCEEDED"),
        ("invalid_api_key", "GENERATION_FAILED"),
        ('{"error": "Incorrect API key sk-abc"}', "GENERATION_FAILED"),
        ("A" * 129, "GENERATION_FAILED"),
        ("PROVIDER_AUTH\n", "GENERATION_FAILED"),
        (None, "GENERATION_FAILED"),
    ],
)
async def test_error_codes_are_normalized(db: Database, given_code: str | None, stored: str) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        audits = Repositories(session).audits
        await audits.prepare(seeded.chat_id, "gen-1", {})
        assert await audits.finish(seeded.chat_id, "gen-1", "failed", given_code)
        audit = await audits.get(seeded.chat_id)
    assert audit is not None and audit.error_code == stored


@given(st.one_of(st.text(max_size=140), st.from_regex(CODE, fullmatch=True), st.none(), st.integers()))
def test_normalized_error_code_is_always_a_stable_code(code: object) -> None:
    out = normalize_error_code(code)
    assert CODE.fullmatch(out)
    assert out == code or out == "GENERATION_FAILED"


async def test_finish_validates_its_input(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        audits = Repositories(session).audits
        await audits.prepare(seeded.chat_id, "gen-1", {})
        with pytest.raises(InvalidValue, match="status"):
            await audits.finish(seeded.chat_id, "gen-1", "prepared")
        with pytest.raises(InvalidValue, match="payload_updates"):
            await audits.finish(seeded.chat_id, "gen-1", "completed", payload_updates={"a.b": 1})
        with pytest.raises(InvalidValue, match="payload"):
            await audits.prepare(seeded.chat_id, "gen-2", {"x": float("nan")})


async def test_deleting_the_chat_deletes_its_audit(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        await Repositories(session).audits.prepare(seeded.chat_id, "gen-1", {})
    async with db.session() as session:
        assert await Repositories(session).chats.delete(seeded.chat_id)
    assert await _audit_rows(db) == 0


async def test_start_closes_audits_left_unfinished_by_a_crash(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    crashed = await seed_chat(db)
    finished = await seed_chat(db, api_key=None)
    async with db.session() as session:
        audits = Repositories(session).audits
        await audits.prepare(crashed.chat_id, "gen-crashed", {"blocks": []})
        await audits.prepare(finished.chat_id, "gen-done", {})
        assert await audits.finish(finished.chat_id, "gen-done", "completed")
    await db.close()  # the process "dies" with gen-crashed still prepared

    restarted = backend.database()
    await restarted.start()
    try:
        async with restarted.session() as session:
            audits = Repositories(session).audits
            closed = await audits.get(crashed.chat_id)
            done = await audits.get(finished.chat_id)
            assert closed is not None and (closed.status, closed.error_code) == ("failed", "GENERATION_INTERRUPTED")
            assert closed.finished_at is not None and closed.payload == {"blocks": []}
            assert done is not None and (done.status, done.error_code) == ("completed", None)
            assert not await audits.finish(crashed.chat_id, "gen-crashed", "completed")  # too late now
    finally:
        await restarted.close()


async def test_start_can_spare_recent_generations_of_other_instances(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    seeded = await seed_chat(db)
    async with db.session() as session:
        await Repositories(session).audits.prepare(seeded.chat_id, "gen-running", {})
    other_instance = backend.database(stale_audit_age=timedelta(minutes=10))
    await other_instance.start()
    try:
        async with other_instance.session() as session:
            audit = await Repositories(session).audits.get(seeded.chat_id)
        assert audit is not None and audit.status == "prepared"
    finally:
        await other_instance.close()
        await db.close()
