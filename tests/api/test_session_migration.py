"""Migration 0019 (N2, issue 25 point 4): sessions opened before it name no token and are ended; afterwards a
session names its token, and deleting the token deletes the session in the database itself (the foreign key
cascades, on SQLite and PostgreSQL); a downgrade drops the column and keeps the rows."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from contextshift.storage import normalize_url
from contextshift.storage.migrate import alembic_config, connect_for_migrations, current_revision, upgrade
from tests.databases import Backend

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TOKEN = (
    "INSERT INTO api_tokens (id, user_id, name, kind, token_hash, created_at) "
    "VALUES (:id, 'u1', '', :kind, :hash, :now)"
)


def _downgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


async def test_old_sessions_end_and_new_ones_go_with_their_token(backend: Backend) -> None:
    now = NOW.replace(tzinfo=None) if backend.name == "sqlite" else NOW
    assert await upgrade(backend.url, "0017", engine_options=backend.engine_options) == "0017"
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    async with engine.begin() as connection:  # rows of a 0017-era service
        await connection.execute(
            text(
                "INSERT INTO users (id, name, role, disabled, created_at, updated_at) "
                "VALUES ('u1', 'root', 'admin', false, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(text(TOKEN), {"id": "api1", "kind": "api", "hash": "a" * 64, "now": now})
        await connection.execute(text(TOKEN), {"id": "old-session", "kind": "session", "hash": "b" * 64, "now": now})
    await engine.dispose()
    assert await upgrade(backend.url, "0019", engine_options=backend.engine_options) == "0019"
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    try:
        async with engine.begin() as connection:
            ids = (await connection.execute(text("SELECT id FROM api_tokens ORDER BY id"))).scalars().all()
            assert ids == ["api1"]  # the session that names no token is ended
            await connection.execute(
                text(
                    "INSERT INTO api_tokens (id, user_id, name, kind, token_hash, created_at, opened_by) "
                    "VALUES ('s1', 'u1', 'browser', 'session', :hash, :now, 'api1')"
                ),
                {"hash": "c" * 64, "now": now},
            )
        async with engine.connect() as connection:
            if backend.name == "sqlite":  # as the service's connections do (outside a transaction: SQLite's rule)
                await connection.execute(text("PRAGMA foreign_keys = ON"))
                await connection.commit()
            await connection.execute(text("DELETE FROM api_tokens WHERE id = 'api1'"))
            left = (await connection.execute(text("SELECT id FROM api_tokens"))).scalars().all()
            assert left == []  # the session went with its token
            await connection.commit()
    finally:
        await engine.dispose()
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        await connection.run_sync(_downgrade, "0017")
        assert await current_revision(connection) == "0017"
