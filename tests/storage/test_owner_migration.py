"""N2 on an existing database: what was there before users belongs to the first admin, who can sign in."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from contextshift.service.accounts import bootstrap
from contextshift.storage import Repositories, head_revision, normalize_url
from contextshift.storage.migrate import upgrade
from tests.databases import Backend

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def _rows_of_an_older_service(backend: Backend, revision: str, *, with_admin: bool = False) -> None:
    assert await upgrade(backend.url, revision, engine_options=backend.engine_options) == revision
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    async with engine.begin() as connection:
        now = NOW.replace(tzinfo=None) if backend.name == "sqlite" else NOW
        if with_admin:
            await connection.execute(
                text(
                    "INSERT INTO users (id, name, role, disabled, created_at, updated_at) VALUES "
                    "('u0', 'bob', 'user', false, :now, :now), ('u1', 'root', 'admin', false, :now, :now)"
                ),
                {"now": now},
            )
        await connection.execute(
            text(
                "INSERT INTO bots (id, name, system_prompt, persona, context_strategy, response_reserve, "
                "lorebook_ids, author_note_depth, created_at, updated_at) VALUES "
                "('b1', 'Ada', '', '', 'truncate', 1024, '[]', 4, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(
            text(
                "INSERT INTO chats (id, bot_id, type, title, history_version, last_seq, created_at, updated_at) "
                "VALUES ('c1', 'b1', 'chat', 'first', 0, 0, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(
            text("INSERT INTO lorebooks (id, name, created_at) VALUES ('l1', 'world', :now)"), {"now": now}
        )
    await engine.dispose()


async def test_rows_from_before_users_go_to_a_new_admin_who_gets_a_login_token(backend: Backend) -> None:
    await _rows_of_an_older_service(backend, "0001")
    db = backend.database()
    await db.start()
    try:
        assert await db.revision() == head_revision()
        started = await bootstrap(db, None)
        assert started.secret is not None  # shown once, as on a first start
        async with db.session() as session:
            repos = Repositories(session)
            admin = await repos.users.get(started.admin_id or "")
            assert admin is not None and (admin.name, admin.role) == ("admin", "admin")
            for row in (await repos.bots.get("b1"), await repos.chats.get("c1"), await repos.lorebooks.get("l1")):
                assert row is not None and row.owner_id == admin.id
            found = await repos.tokens.find(started.secret)
            assert found is not None and found[1].id == admin.id
        assert (await bootstrap(db, None)).secret is None  # and only once
    finally:
        await db.close()


async def test_rows_from_before_owners_go_to_the_first_admin(backend: Backend) -> None:
    await _rows_of_an_older_service(backend, "0003", with_admin=True)
    db = backend.database()
    await db.start()
    try:
        async with db.session() as session:
            repos = Repositories(session)
            for row in (await repos.bots.get("b1"), await repos.chats.get("c1"), await repos.lorebooks.get("l1")):
                assert row is not None and row.owner_id == "u1"
            assert [u.name for u in await repos.users.list_all()] == ["bob", "root"]
    finally:
        await db.close()


async def test_a_fresh_database_gets_no_admin_from_the_migration(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        async with db.session() as session:
            assert await Repositories(session).users.count() == 0
    finally:
        await db.close()
