"""Migration 0024: the partial index of a chat's raw messages in order, which a compaction pass reads a page of
at a time (issue 26): the page query is LIMIT rows of it, never a read and sort of every raw row of the chat."""

from __future__ import annotations

from alembic import command
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection

from contextshift.storage import Database, Repositories
from contextshift.storage.migrate import alembic_config, connect_for_migrations, current_revision, upgrade
from contextshift.storage.tables import MessageRow
from tests.databases import Backend

from .seed import seed_chat

INDEX = "ix_messages_chat_id_seq_unsummarized"


def _index_names(connection: Connection) -> set[str]:
    return {str(index["name"]) for index in inspect(connection).get_indexes("messages")}


def _downgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


async def _plan(db: Database, chat_id: str) -> str:
    """The plan of the pass's page query (the repository's ``unsummarized``), without statistics."""
    query = (
        select(MessageRow)
        .where(MessageRow.chat_id == chat_id, MessageRow.summary_id.is_(None), MessageRow.seq > 10)
        .order_by(MessageRow.seq)
        .limit(500)
    )
    async with db.session() as session:
        dialect = db.engine.dialect
        sql = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        explain = "EXPLAIN QUERY PLAN " if dialect.name == "sqlite" else "EXPLAIN "
        rows = (await session.execute(text(explain + sql))).all()
    return "\n".join(str(row[-1]) for row in rows)


async def test_the_pass_page_is_read_in_order_from_an_index_without_a_sort(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        chat_id = (await seed_chat(db)).chat_id
        async with db.session() as session:
            messages = [{"role": "user", "content": f"message {i}"} for i in range(600)]
            await Repositories(session).messages.append_many(chat_id, messages)
        plan = await _plan(db, chat_id)
    finally:
        await db.close()
    if backend.name == "postgresql":
        assert INDEX in plan and "Sort" not in plan, plan
    else:  # SQLite takes the order from either index on summary_id; what matters is no sort of the chat
        assert "TEMP B-TREE" not in plan and "USING INDEX" in plan, plan


async def test_the_migration_adds_the_index_and_its_downgrade_drops_it(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    await db.close()
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        assert INDEX in await connection.run_sync(_index_names)
        await connection.run_sync(_downgrade, "0023")
        assert await current_revision(connection) == "0023"
        assert INDEX not in await connection.run_sync(_index_names)
    assert await upgrade(backend.url, engine_options=backend.engine_options) is not None
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        assert INDEX in await connection.run_sync(_index_names)
