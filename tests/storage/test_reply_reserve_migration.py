"""Migration 0017: a bot's reply reserve is 0 (not set) by default, and the old default 1024 becomes 0."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from contextshift.storage import Repositories, normalize_url
from contextshift.storage.migrate import alembic_config, connect_for_migrations, current_revision, upgrade
from tests.databases import Backend

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BOT_COLUMNS = "id, owner_id, name, system_prompt, persona, context_strategy, lorebook_ids, author_note_depth"


def _now(backend: Backend) -> datetime:
    return NOW.replace(tzinfo=None) if backend.name == "sqlite" else NOW


async def _add_bot(connection: AsyncConnection, backend: Backend, bot_id: str, reserve: int | None) -> None:
    """A bot row as a service at that revision writes it (``reserve`` None: the column's server default)."""
    columns, values = BOT_COLUMNS, f"'{bot_id}', 'u1', '{bot_id}', '', '', 'truncate', '[]', 4"
    if reserve is not None:
        columns, values = f"{columns}, response_reserve", f"{values}, {reserve}"
    await connection.execute(
        text(f"INSERT INTO bots ({columns}, created_at, updated_at) VALUES ({values}, :now, :now)"),
        {"now": _now(backend)},
    )


async def _reserves(connection: AsyncConnection) -> dict[str, int]:
    rows = await connection.execute(text("SELECT id, response_reserve FROM bots"))
    return {str(bot_id): int(reserve) for bot_id, reserve in rows}


def _downgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


async def test_bots_holding_the_old_default_1024_read_as_not_set_after_the_migration(backend: Backend) -> None:
    assert await upgrade(backend.url, "0016", engine_options=backend.engine_options) == "0016"
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    async with engine.begin() as connection:  # rows written by a 0016-era service
        await connection.execute(
            text(
                "INSERT INTO users (id, name, role, disabled, created_at, updated_at) "
                "VALUES ('u1', 'root', 'admin', false, :now, :now)"
            ),
            {"now": _now(backend)},
        )
        await _add_bot(connection, backend, "defaulted", None)
        await _add_bot(connection, backend, "old-default", 1024)
        await _add_bot(connection, backend, "chosen", 2048)
        await _add_bot(connection, backend, "small", 300)
        await _add_bot(connection, backend, "unset", 0)
        assert (await _reserves(connection))["defaulted"] == 1024
    await engine.dispose()
    db = backend.database()
    await db.start()
    try:
        async with db.session() as session:
            bot = await Repositories(session).bots.get("old-default")
            assert bot is not None and bot.response_reserve == 0
        async with db.engine.begin() as connection:
            await _add_bot(connection, backend, "new", None)
            assert await _reserves(connection) == {
                "defaulted": 0,
                "old-default": 0,
                "chosen": 2048,
                "small": 300,
                "unset": 0,
                "new": 0,
            }
    finally:
        await db.close()
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        await connection.run_sync(_downgrade, "0016")
        assert await current_revision(connection) == "0016"
        await _add_bot(connection, backend, "after-downgrade", None)
        reserves = await _reserves(connection)
    assert reserves["after-downgrade"] == 1024  # the old default is back
    assert reserves["old-default"] == 0  # and the rows stay as they are
