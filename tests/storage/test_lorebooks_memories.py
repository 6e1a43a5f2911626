"""Lorebooks with their entries, and memories of a bot or a chat."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from contextshift.storage import Database, InvalidValue, NotFound, Repositories

from .seed import seed_chat

ENTRIES: list[dict[str, Any]] = [
    {"keys": ["dragon"], "content": "Dragons breathe fire.", "order": 10},
    {"keys": ["castle"], "secondary_keys": ["north"], "content": "The castle stands north.", "position": "after"},
    {"keys": [], "content": "Always true.", "constant": True, "position": "depth"},
]


async def test_lorebook_entries_keep_their_order_and_defaults(db: Database) -> None:
    async with db.session() as session:
        book = await Repositories(session).lorebooks.create(name="World", entries=ENTRIES)
    async with db.session() as session:
        got = await Repositories(session).lorebooks.get(book.id)
    assert got is not None
    assert [e.content for e in got.entries] == [e["content"] for e in ENTRIES]
    first, second, third = got.entries
    assert (first.secondary_keys, first.constant, first.enabled, first.order, first.position, first.depth) == (
        [],
        False,
        True,
        10,
        "before",
        None,
    )
    assert (second.secondary_keys, second.position) == (["north"], "after")
    assert (third.constant, third.position, third.depth) == (True, "depth", 4)


async def test_updating_entries_replaces_the_whole_list(db: Database) -> None:
    async with db.session() as session:
        book = await Repositories(session).lorebooks.create(name="World", entries=ENTRIES)
    async with db.session() as session:
        updated = await Repositories(session).lorebooks.update(
            book.id, name="World v2", entries=[{"keys": ["elf"], "content": "Elves live long."}]
        )
        assert updated is not None
    async with db.session() as session:
        got = await Repositories(session).lorebooks.get(book.id)
        assert got is not None
        assert got.name == "World v2"
        assert [e.keys for e in got.entries] == [["elf"]]
        renamed = await Repositories(session).lorebooks.update(book.id, name="Only the name")
        assert renamed is not None and len(renamed.entries) == 1


async def test_invalid_entry_is_rejected_with_its_index(db: Database) -> None:
    async with db.session() as session:
        with pytest.raises(InvalidValue) as caught:
            await Repositories(session).lorebooks.create(
                name="W", entries=[{"keys": ["a"], "content": "ok"}, {"keys": ["b"], "content": "x", "position": "top"}]
            )
    assert caught.value.field == "entries[1].position"


async def test_get_many_keeps_the_asked_order_and_skips_unknown_ids(db: Database) -> None:
    async with db.session() as session:
        repos = Repositories(session)
        a = await repos.lorebooks.create(name="A")
        b = await repos.lorebooks.create(name="B")
        assert [x.name for x in await repos.lorebooks.get_many([b.id, "missing", a.id])] == ["B", "A"]
        assert [x.name for x in await repos.lorebooks.list_all()] == ["A", "B"]


async def test_deleting_a_lorebook_deletes_its_entries(db: Database) -> None:
    async with db.session() as session:
        book = await Repositories(session).lorebooks.create(name="World", entries=ENTRIES)
    async with db.session() as session:
        assert await Repositories(session).lorebooks.delete(book.id)
        count = await session.execute(
            text("SELECT count(*) FROM lorebook_entries WHERE lorebook_id = :id"),
            {"id": book.id},
        )
        assert count.scalar_one() == 0


async def test_memories_list_per_bot_and_per_chat(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        other_chat = await repos.chats.create(bot_id=seeded.bot_id)
        wide = await repos.memories.create(bot_id=seeded.bot_id, content="Likes tea.")
        mine = await repos.memories.create(bot_id=seeded.bot_id, chat_id=seeded.chat_id, content="Named the cat Tom.")
        theirs = await repos.memories.create(bot_id=seeded.bot_id, chat_id=other_chat.id, content="Lives in Oslo.")
    async with db.session() as session:
        repos = Repositories(session)
        assert [m.id for m in await repos.memories.list_for_bot(seeded.bot_id)] == [wide.id, mine.id, theirs.id]
        assert [m.id for m in await repos.memories.list_for_bot(seeded.bot_id, seeded.chat_id)] == [wide.id, mine.id]
        updated = await repos.memories.update(wide.id, content="Likes green tea.")
        assert updated is not None and updated.content == "Likes green tea."
        assert await repos.memories.delete(theirs.id)
        assert await repos.memories.get(theirs.id) is None


async def test_memory_checks_its_bot_and_chat(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        other_bot = await repos.bots.create(name="Other")
        with pytest.raises(NotFound):
            await repos.memories.create(bot_id="missing", content="x")
        with pytest.raises(NotFound):
            await repos.memories.create(bot_id=seeded.bot_id, chat_id="missing", content="x")
        with pytest.raises(InvalidValue, match="another bot"):
            await repos.memories.create(bot_id=other_bot.id, chat_id=seeded.chat_id, content="x")
        with pytest.raises(InvalidValue):
            await repos.memories.create(bot_id=seeded.bot_id, content="   ")


async def test_deleting_a_chat_deletes_its_memories_but_not_the_bots(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        await repos.memories.create(bot_id=seeded.bot_id, content="bot-wide")
        await repos.memories.create(bot_id=seeded.bot_id, chat_id=seeded.chat_id, content="chat-only")
    async with db.session() as session:
        assert await Repositories(session).chats.delete(seeded.chat_id)
    async with db.session() as session:
        left = await Repositories(session).memories.list_for_bot(seeded.bot_id)
        assert [m.content for m in left] == ["bot-wide"]
