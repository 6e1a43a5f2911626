"""The chat's maintained message counts (migration 0020): every write keeps them equal to a recount, so a turn
reads them instead of counting the chat."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from alembic import command
from sqlalchemy import func, select, true
from sqlalchemy.engine import Connection

from contextshift.storage import Database, Repositories
from contextshift.storage.migrate import alembic_config, connect_for_migrations, current_revision, upgrade
from contextshift.storage.tables import ChatRow, MessageRow
from tests.databases import Backend

from .seed import seed_chat


async def _recount(db: Database, chat_id: str) -> tuple[int, int]:
    """``(raw, summarized)`` counted the slow way, over the whole chat."""
    raw = (
        select(func.count())
        .select_from(MessageRow)
        .where(MessageRow.chat_id == chat_id, MessageRow.summary_id.is_(None), MessageRow.pinned != true())
    )
    summarized = (
        select(func.count())
        .select_from(MessageRow)
        .where(
            MessageRow.chat_id == chat_id,
            MessageRow.summary_id.is_not(None),
            MessageRow.pinned != true(),
            MessageRow.standing != true(),
        )
    )
    async with db.session() as session:
        return int(await session.scalar(raw) or 0), int(await session.scalar(summarized) or 0)


async def _kept(db: Database, chat_id: str) -> tuple[int, int]:
    async with db.session() as session:
        row = (
            await session.execute(
                select(ChatRow.raw_messages, ChatRow.summarized_messages).where(ChatRow.id == chat_id)
            )
        ).one()
        return int(row[0]), int(row[1])


async def _append(db: Database, chat_id: str, texts: list[str], pinned: bool = False) -> list[str]:
    messages = [{"role": "user", "content": t, "pinned": pinned} for t in texts]
    async with db.session() as session:
        return [r.id for r in await Repositories(session).messages.append_many(chat_id, messages)]


async def _fold(db: Database, chat_id: str, ids: list[str], supersedes: Sequence[str] = ()) -> str:
    async with db.session() as session:
        repos = Repositories(session)
        version = await repos.compaction.history_version(chat_id)
        assert version is not None
        summary = await repos.compaction.commit_summary(
            chat_id, version, content="summary", covers=ids, supersedes=list(supersedes)
        )
        assert summary is not None
        return summary.id


async def test_every_write_keeps_the_chat_counts_equal_to_a_recount(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    ids = await _append(db, chat_id, [f"message {i}" for i in range(10)])
    ids += await _append(db, chat_id, ["pinned one"], pinned=True)
    assert await _kept(db, chat_id) == (10, 0)
    first = await _fold(db, chat_id, [*ids[:4], ids[10]])  # 4 raw folded; the pinned one stays pinned
    assert await _kept(db, chat_id) == (6, 4)
    async with db.session() as session:
        messages = Repositories(session).messages
        await messages.patch(chat_id, ids[0], {"pinned": True})  # a summarized message pinned: raw in prompts
        await messages.patch(chat_id, ids[5], {"pinned": True})
        await messages.patch(chat_id, ids[1], {"standing": True})
        await messages.patch(chat_id, ids[10], {"pinned": False})  # summarized, unpinned: the summary's again
    assert await _kept(db, chat_id) == (5, 3)
    await _fold(db, chat_id, ids[6:8], supersedes=[first])  # rows of the superseded summary stay summarized
    assert await _kept(db, chat_id) == (3, 5)
    async with db.session() as session:
        messages = Repositories(session).messages
        await messages.edit_content(chat_id, ids[1], "nothing standing here")  # standing again decided by text
        assert await messages.delete(chat_id, ids[2])
        assert await messages.delete_after(chat_id, 8) == 3  # seqs 9, 10, 11: two raw, one summarized
    assert await _kept(db, chat_id) == (1, 4)
    assert await _kept(db, chat_id) == await _recount(db, chat_id)


async def test_a_standing_instruction_replaced_gives_its_summarized_message_back_to_the_count(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    ids = await _append(db, chat_id, ["Always answer in French.", "bonjour"])
    await _fold(db, chat_id, ids)
    assert await _kept(db, chat_id) == (0, 1) == await _recount(db, chat_id)  # the standing one is not counted
    await _append(db, chat_id, ["Stop answering in French."])
    assert await _kept(db, chat_id) == await _recount(db, chat_id)


async def test_random_writes_keep_the_counts_equal_to_a_recount(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    chance = random.Random(26)
    ids: list[str] = []
    for step in range(60):
        move = chance.choice(("append", "append", "pin", "stand", "fold", "delete", "rewind"))
        if move == "append" or not ids:
            ids += await _append(
                db, chat_id, [f"m{step}-{i}" for i in range(chance.randint(1, 4))], chance.random() < 0.2
            )
        elif move == "fold":
            await _fold(db, chat_id, chance.sample(ids, min(len(ids), 3)))
        else:
            async with db.session() as session:
                messages = Repositories(session).messages
                target = chance.choice(ids)
                if move == "pin":
                    await messages.patch(chat_id, target, {"pinned": chance.random() < 0.5})
                elif move == "stand":
                    await messages.patch(chat_id, target, {"standing": chance.random() < 0.5})
                elif move == "delete":
                    await messages.delete(chat_id, target)
                else:
                    row = await messages.get(target, chat_id)
                    if row is not None:
                        await messages.delete_after(chat_id, row.seq)
                alive = {r.id for r in await messages.chronological(chat_id)}
            ids = [i for i in ids if i in alive]
        assert await _kept(db, chat_id) == await _recount(db, chat_id), f"step {step}: {move}"


async def test_older_raw_messages_are_counted_from_the_kept_total(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    ids = await _append(db, chat_id, [f"message {i}" for i in range(20)])  # seqs 1..20
    await _fold(db, chat_id, ids[:5])  # seqs 1..5
    async with db.session() as session:
        messages = Repositories(session).messages
        await messages.patch(chat_id, ids[7], {"pinned": True})  # seq 8
        assert await messages.count_older_raw(chat_id, 16) == 9  # seqs 6..15 less the pinned 8
        assert await messages.count_older_raw(chat_id, 1) == 0
        assert await messages.count_older_raw(chat_id, 99) == 14
        assert await messages.count_summarized(chat_id) == 5


def _downgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


async def test_the_migration_fills_the_counts_of_chats_already_stored(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        chat_id = (await seed_chat(db)).chat_id
        ids = await _append(db, chat_id, ["Always answer in French."] + [f"message {i}" for i in range(8)])
        ids += await _append(db, chat_id, ["pinned"], pinned=True)
        await _fold(db, chat_id, ids[:4])
        expected: Any = await _recount(db, chat_id)
    finally:
        await db.close()
    assert expected == (5, 3)
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        await connection.run_sync(_downgrade, "0019")
        assert await current_revision(connection) == "0019"
    assert await upgrade(backend.url, engine_options=backend.engine_options) is not None
    db = backend.database()
    await db.start()
    try:
        assert await _kept(db, chat_id) == expected
    finally:
        await db.close()
