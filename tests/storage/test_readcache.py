"""The database's read cache: a kept read is used until a write to its tables commits here, or its TTL ends.

Real SQLite and PostgreSQL; the TTL is read from an injected clock (no test waits on the real one).
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from contextshift.api.auth import principal_for
from contextshift.settings import Settings
from contextshift.storage import Database, Repositories
from contextshift.storage.configured import configured_database
from contextshift.storage.readcache import DEFAULT_TTL, ReadCache, TableWrites
from tests.databases import Backend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def issue_token(db: Database, name: str = "ada") -> tuple[str, str, str]:
    async with db.session() as session:
        repos = Repositories(session)
        user = await repos.users.create(name=name)
        issued = await repos.tokens.issue(user.id, name="laptop")
    return user.id, issued.token.id, issued.secret


async def read_user_name(db: Database, user_id: str) -> str | None:
    """A read through the cache, as the service's are: stamp, read, keep."""
    key = ("user-name", user_id)
    found: str | None = db.reads.get(key)
    if found is None:
        stamp = db.reads.stamp("users")
        async with db.session(write=False) as session:
            row = await Repositories(session).users.get(user_id)
        found = row.name if row is not None else None
        db.reads.put(key, found, stamp)
    return found


async def rename(db: Database, user_id: str, name: str) -> None:
    async with db.session() as session:
        await session.execute(text("UPDATE users SET name = :name WHERE id = :id"), {"name": name, "id": user_id})


async def test_a_signed_in_token_is_read_once_then_kept(db: Database) -> None:
    _user, _token, secret = await issue_token(db)
    first = await principal_for(db, secret)  # its first use is noted: a write to the tokens
    await principal_for(db, secret)  # so this one reads again
    misses = db.reads.misses
    again = [await principal_for(db, secret) for _ in range(3)]
    assert first is not None and again == [first] * 3
    assert db.reads.misses == misses and db.reads.hits >= 3


async def test_a_token_revoked_here_is_refused_on_the_next_request(db: Database) -> None:
    user_id, token_id, secret = await issue_token(db)
    assert await principal_for(db, secret) is not None
    async with db.session() as session:
        assert await Repositories(session).tokens.revoke(user_id, token_id)
    assert await principal_for(db, secret) is None


async def test_a_user_disabled_here_is_refused_on_the_next_request(db: Database) -> None:
    user_id, _token, secret = await issue_token(db)
    assert await principal_for(db, secret) is not None
    async with db.session() as session:
        await Repositories(session).users.update(user_id, {"disabled": True})
    assert await principal_for(db, secret) is None


async def test_a_write_in_sql_text_counts_for_every_table(db: Database) -> None:
    user_id, _token, secret = await issue_token(db)
    assert await principal_for(db, secret) is not None
    assert await read_user_name(db, user_id) == "ada"
    await rename(db, user_id, "grace")  # SQL text: its table is not known, so every kept read goes
    assert await read_user_name(db, user_id) == "grace"
    misses = db.reads.misses
    assert await principal_for(db, secret) is not None
    assert db.reads.misses == misses + 1


async def test_a_rolled_back_write_keeps_what_was_read(db: Database) -> None:
    user_id, _token, _secret = await issue_token(db)
    assert await read_user_name(db, user_id) == "ada"
    try:
        async with db.session() as session:
            await session.execute(text("UPDATE users SET name = 'x' WHERE id = :id"), {"id": user_id})
            raise RuntimeError("changed my mind")
    except RuntimeError:
        pass
    misses = db.reads.misses
    assert await read_user_name(db, user_id) == "ada"
    assert db.reads.misses == misses


async def test_a_write_that_lands_during_a_read_keeps_that_read_out(db: Database) -> None:
    user_id, _token, _secret = await issue_token(db)
    stamp = db.reads.stamp("users")  # a read starts...
    await rename(db, user_id, "grace")  # ...a write commits meanwhile...
    db.reads.put(("user-name", user_id), "ada", stamp)  # ...and what it read may be the old row
    assert db.reads.get(("user-name", user_id)) is None


async def test_another_processes_write_is_seen_once_the_ttl_is_over(backend: Backend) -> None:
    clock = Clock()
    service, other = backend.database(read_cache_ttl=5.0), backend.database()
    await service.start()
    await other.start()
    try:
        service.reads.clock = clock
        user_id, _token, _secret = await issue_token(service)
        assert await read_user_name(service, user_id) == "ada"
        await rename(other, user_id, "grace")  # another process: this one cannot count that write
        clock.now += 4.9
        assert await read_user_name(service, user_id) == "ada"  # at most the TTL late
        clock.now += 0.2
        assert await read_user_name(service, user_id) == "grace"
    finally:
        await other.close()
        await service.close()


async def test_a_zero_ttl_keeps_nothing(backend: Backend) -> None:
    db = backend.database(read_cache_ttl=0)
    await db.start()
    try:
        _user, _token, secret = await issue_token(db)
        assert await principal_for(db, secret) is not None
        assert await principal_for(db, secret) is not None
        assert len(db.reads) == 0 and db.reads.hits == 0
    finally:
        await db.close()


def test_the_cache_keeps_its_newest_entries_up_to_its_size() -> None:
    writes = TableWrites()
    cache = ReadCache(writes, 5.0, clock=Clock(), max_entries=3)
    for n in range(5):
        cache.put(n, f"value {n}", cache.stamp("t"))
    assert cache.get(0) is None and cache.get(1) is None
    assert [cache.get(n) for n in (2, 3, 4)] == ["value 2", "value 3", "value 4"]


def test_a_write_counted_before_its_commit_lands_is_counted_again_after() -> None:
    writes = TableWrites()
    cache = ReadCache(writes, 5.0, clock=Clock())
    writes.wrote({"users"})  # committing
    stamp = cache.stamp("users")  # a read starts before the commit is done: it may see the old row
    writes.landed()
    cache.put("k", "old", stamp)
    assert cache.get("k") is None


def test_the_ttl_is_the_setting_handed_to_the_database() -> None:
    settings = Settings.from_env({"CONTEXTSHIFT_READ_CACHE_SECONDS": "0.5"})
    assert configured_database(settings, "sqlite:///:memory:").reads.ttl == 0.5
    assert configured_database(Settings(), "sqlite:///:memory:").reads.ttl == DEFAULT_TTL == 5.0
    for wrong in ("soon", "-3"):
        with pytest.raises(ValueError, match="CONTEXTSHIFT_READ_CACHE_SECONDS"):
            Settings.from_env({"CONTEXTSHIFT_READ_CACHE_SECONDS": wrong})
