"""The full-text index recall searches (G4a), on SQLite (FTS5 + triggers) and PostgreSQL (tsvector + GIN).

Inserts, edits and deletes keep it in step; messages a compaction summary covers, messages of other chats
and messages at or after the window's start never come back; tool groups come back with their neighbours.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import create_async_engine

from contextshift.storage import Database, Repositories, normalize_url
from contextshift.storage.migrate import upgrade
from contextshift.storage.repositories.search import search_history, search_message_ids
from contextshift.storage.tables import MessageRow

from .conftest import Backend
from .seed import seed_chat

BIG = 10_000


async def ids_for(db: Database, chat_id: str, *words: str, before: int = BIG, limit: int = 10) -> list[str]:
    async with db.session() as session:
        return await search_message_ids(session, chat_id, list(words), before_seq=before, limit=limit)


async def add(db: Database, chat_id: str, *messages: dict[str, object]) -> list[str]:
    async with db.session() as session:
        rows = await Repositories(session).messages.append_many(chat_id, messages)
        return [r.id for r in rows]


async def test_the_index_finds_stemmed_words_best_match_first_and_only_in_the_chat(db: Database) -> None:
    seeded = await seed_chat(db)
    other = await seed_chat(db)
    falcon, weather, both = await add(
        db,
        seeded.chat_id,
        {"role": "user", "content": "The vault code for project Falcon is 48213."},
        {"role": "assistant", "content": "The weather is fine today."},
        {"role": "user", "content": "Falcon: the vault was opened, the vault code worked."},
    )
    await add(db, other.chat_id, {"role": "user", "content": "Falcon vault in another chat."})
    found = await ids_for(db, seeded.chat_id, "vaults", "falcon")
    assert set(found) == {falcon, both}
    assert found[0] == both  # "vault" twice
    assert await ids_for(db, seeded.chat_id, "weather") == [weather]
    assert await ids_for(db, seeded.chat_id, "nothing-like-this") == []
    assert await ids_for(db, seeded.chat_id) == []


async def test_content_parts_and_tool_calls_are_indexed(db: Database) -> None:
    seeded = await seed_chat(db)
    parts, call = await add(
        db,
        seeded.chat_id,
        {"role": "user", "content": [{"type": "text", "text": "Ticket zebra-42 is open"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "osprey"}'}}
            ],
        },
    )
    assert await ids_for(db, seeded.chat_id, "zebra") == [parts]
    assert await ids_for(db, seeded.chat_id, "osprey") == [call]


async def test_an_edit_reindexes_and_a_delete_removes_a_message(db: Database) -> None:
    seeded = await seed_chat(db)
    first, second = await add(
        db,
        seeded.chat_id,
        {"role": "user", "content": "The heron code is 111."},
        {"role": "user", "content": "The osprey code is 222."},
    )
    async with db.session() as session:  # content is immutable through the API; the index follows any edit
        await session.execute(
            update(MessageRow).where(MessageRow.id == first).values(content="The kestrel code is 333.")
        )
    assert await ids_for(db, seeded.chat_id, "heron") == []
    assert await ids_for(db, seeded.chat_id, "kestrel") == [first]
    async with db.session() as session:
        assert await Repositories(session).messages.delete(seeded.chat_id, second)
    assert await ids_for(db, seeded.chat_id, "osprey") == []
    async with db.session() as session:
        assert await Repositories(session).chats.delete(seeded.chat_id)
    assert await ids_for(db, seeded.chat_id, "kestrel") == []


async def test_messages_a_summary_covers_and_messages_from_the_window_on_are_not_found(db: Database) -> None:
    seeded = await seed_chat(db)
    old, covered, recent = await add(
        db,
        seeded.chat_id,
        {"role": "user", "content": "Falcon one"},
        {"role": "user", "content": "Falcon two"},
        {"role": "user", "content": "Falcon three"},
    )
    async with db.session() as session:
        repos = Repositories(session)
        chat = await repos.chats.get(seeded.chat_id)
        assert chat is not None
        summary = await repos.compaction.commit_summary(
            seeded.chat_id, chat.history_version, content="Falcon was discussed.", covers=[covered]
        )
        assert summary is not None
        rows = {r.id: r.seq for r in await repos.messages.chronological(seeded.chat_id)}
    assert await ids_for(db, seeded.chat_id, "falcon") == [recent, old]  # equal scores: newest first
    assert await ids_for(db, seeded.chat_id, "falcon", before=rows[recent]) == [old]


async def test_a_found_tool_result_comes_with_the_messages_around_it(db: Database) -> None:
    seeded = await seed_chat(db)
    messages: list[dict[str, object]] = [{"role": "user", "content": f"chatter {n}"} for n in range(20)]
    messages[10] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
    }
    messages[11] = {"role": "tool", "tool_call_id": "t1", "content": "Falcon vault code 48213"}
    made = await add(db, seeded.chat_id, *messages)
    async with db.session() as session:
        rows, matching = await search_history(
            session, seeded.chat_id, ["falcon"], before_seq=BIG, limit=5, neighbours=2
        )
    assert matching == [made[11]]
    assert [r.id for r in rows] == made[9:14]


async def test_the_migration_indexes_the_messages_stored_before_it(backend: Backend) -> None:
    assert await upgrade(backend.url, "0002", engine_options=backend.engine_options) == "0002"
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    async with engine.begin() as connection:  # a message written by a 0002-era service
        await connection.execute(
            text(
                "INSERT INTO bots (id, name, system_prompt, persona, context_strategy, response_reserve, "
                "lorebook_ids, author_note_depth, created_at, updated_at) VALUES "
                "('b1', 'Ada', '', '', 'recall', 1024, '[]', 4, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(
            text(
                "INSERT INTO chats (id, bot_id, type, title, history_version, last_seq, created_at, updated_at) "
                "VALUES ('c1', 'b1', 'chat', 'first', 1, 1, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(
            text(
                "INSERT INTO messages (id, chat_id, seq, role, content, pinned, meta, created_at) VALUES "
                "('m1', 'c1', 1, 'user', :content, false, '{}', :now)"
            ),
            {"content": '"The peregrine code is 4711."', "now": now},
        )
    await engine.dispose()
    database = backend.database()
    await database.start()
    try:
        assert await ids_for(database, "c1", "peregrine") == ["m1"]
    finally:
        await database.close()
