"""Audits of the OpenAI-compatible endpoint (V7): owned by the caller, finished once, gone when they expire."""

from __future__ import annotations

from datetime import timedelta

from contextshift.storage import Database, Repositories
from contextshift.storage.types import utcnow

PAYLOAD = {"entries": [{"identifier": "m0", "content": "with a NUL \x00 inside"}], "diagnostics": []}


async def _user(db: Database, name: str) -> str:
    async with db.session() as session:
        return (await Repositories(session).users.create(name=name)).id


async def test_an_audit_is_read_by_its_owner_only_until_it_expires(db: Database) -> None:
    alice, bob = await _user(db, "alice"), await _user(db, "bob")
    async with db.session() as session:
        audits = Repositories(session).proxy_audits
        await audits.prepare(
            "a1", user_id=alice, model="gpt-4o", payload=PAYLOAD, excluded_count=3, ttl=timedelta(hours=1)
        )
        await audits.prepare("a2", user_id=alice, model="gpt-4o", payload=PAYLOAD, excluded_count=0, ttl=timedelta(0))
    async with db.session() as session:
        audits = Repositories(session).proxy_audits
        found = await audits.get("a1", user_id=alice)
        assert found is not None and found.status == "prepared" and found.excluded_count == 3
        assert found.payload["entries"][0]["content"] == "with a NUL  inside"  # PostgreSQL refuses NUL in JSON
        assert await audits.get("a1", user_id=bob) is None
        assert await audits.get("a2", user_id=alice) is None  # expired, though not deleted yet
        assert [a.id for a in await audits.recent(user_id=alice)] == ["a1"]
        assert await audits.recent(user_id=bob) == []
        assert await audits.get("a1", user_id=alice, now=utcnow() + timedelta(hours=2)) is None


async def test_finish_ends_a_prepared_audit_once(db: Database) -> None:
    alice = await _user(db, "alice")
    async with db.session() as session:
        audits = Repositories(session).proxy_audits
        await audits.prepare("a1", user_id=alice, model="m", payload=PAYLOAD, excluded_count=0, ttl=timedelta(hours=1))
        assert await audits.finish("a1", "completed", usage={"input_tokens": 5}) is True
        assert await audits.finish("a1", "failed", error_code="PROVIDER_TIMEOUT") is False
        assert await audits.finish("no-such", "completed") is False
    async with db.session() as session:
        row = await Repositories(session).proxy_audits.get("a1", user_id=alice)
        assert row is not None and row.status == "completed" and row.usage == {"input_tokens": 5}
        assert row.error_code is None and row.finished_at is not None


async def test_expired_audits_are_deleted_and_a_users_audits_go_with_them(db: Database) -> None:
    alice, bob = await _user(db, "alice"), await _user(db, "bob")
    async with db.session() as session:
        audits = Repositories(session).proxy_audits
        await audits.prepare("old", user_id=alice, model="m", payload=PAYLOAD, excluded_count=0, ttl=timedelta(0))
        await audits.prepare("new", user_id=alice, model="m", payload=PAYLOAD, excluded_count=0, ttl=timedelta(days=1))
        await audits.prepare("bobs", user_id=bob, model="m", payload=PAYLOAD, excluded_count=0, ttl=timedelta(days=1))
    async with db.session() as session:
        assert await Repositories(session).proxy_audits.delete_expired() == 1
    async with db.session() as session:
        await Repositories(session).users.delete(bob)
    async with db.session() as session:
        audits = Repositories(session).proxy_audits
        assert await audits.delete_expired(utcnow() + timedelta(days=2)) == 1  # only alice's "new" was left
