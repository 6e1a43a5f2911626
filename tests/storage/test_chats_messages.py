"""Chats and messages: seq, history_version, paging, pins, patches, deletes, core conversion."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from sqlalchemy import func, select

from contextshift.core.messages import Message, ToolCall
from contextshift.storage import Database, InvalidValue, NotFound, Repositories, row_to_message
from contextshift.storage.tables import ChatRow, MessageRow

from .seed import Seeded, seed_chat


async def _version(db: Database, chat_id: str) -> int:
    async with db.session() as session:
        return int((await session.execute(select(ChatRow.history_version).where(ChatRow.id == chat_id))).scalar_one())


async def _append(db: Database, chat_id: str, *messages: Mapping[str, Any]) -> list[MessageRow]:
    async with db.session() as session:
        return await Repositories(session).messages.append_many(chat_id, messages)


async def test_chat_crud_and_listing(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        second = await repos.chats.create(bot_id=seeded.bot_id, type="discuss")
        assert (second.type, second.title, second.history_version) == ("discuss", "", 0)
        other_bot = await repos.bots.create(name="Other")
        await repos.chats.create(bot_id=other_bot.id, type="pipeline")
        with pytest.raises(NotFound) as caught:
            await repos.chats.create(bot_id="missing")
        assert caught.value.code == "BOT_NOT_FOUND"
        with pytest.raises(InvalidValue):
            await repos.chats.create(bot_id=seeded.bot_id, type="group")
    async with db.session() as session:
        repos = Repositories(session)
        assert {c.id for c in await repos.chats.list_all(bot_id=seeded.bot_id)} == {seeded.chat_id, second.id}
        assert len(await repos.chats.list_all()) == 3
        assert len(await repos.chats.list_all(limit=2)) == 2
        retitled = await repos.chats.update(seeded.chat_id, {"title": "renamed"})
        assert retitled is not None and retitled.title == "renamed"
        assert (await repos.chats.list_all(limit=1))[0].id == seeded.chat_id  # most recently updated first
        assert await repos.chats.delete(second.id)
        assert not await repos.chats.delete(second.id)
        with pytest.raises(NotFound):
            await repos.chats.require(second.id)


async def test_append_assigns_increasing_seq_and_bumps_history_version(db: Database) -> None:
    seeded = await seed_chat(db)
    first = await _append(db, seeded.chat_id, {"role": "user", "content": "hi"})
    rest = await _append(
        db, seeded.chat_id, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "?"}
    )
    assert [r.seq for r in first + rest] == [1, 2, 3]
    assert await _version(db, seeded.chat_id) == 3
    async with db.session() as session:
        assert await Repositories(session).messages.count(seeded.chat_id) == 3
        with pytest.raises(NotFound) as caught:
            await Repositories(session).messages.append("missing", {"role": "user", "content": "x"})
        assert caught.value.code == "CHAT_NOT_FOUND"


async def test_patch_and_delete_bump_history_version_and_seq_is_never_reused(db: Database) -> None:
    seeded = await seed_chat(db)
    rows = await _append(db, seeded.chat_id, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    version = await _version(db, seeded.chat_id)
    async with db.session() as session:
        patched = await Repositories(session).messages.patch(seeded.chat_id, rows[0].id, {"pinned": True})
        assert patched is not None and patched.pinned
    assert await _version(db, seeded.chat_id) == version + 1
    async with db.session() as session:
        assert await Repositories(session).messages.delete(seeded.chat_id, rows[1].id)
        assert not await Repositories(session).messages.delete(seeded.chat_id, rows[1].id)
    assert await _version(db, seeded.chat_id) == version + 2
    (again,) = await _append(db, seeded.chat_id, {"role": "assistant", "content": "c"})
    assert again.seq == 3


async def test_patch_merges_meta_and_rejects_other_fields(db: Database) -> None:
    seeded = await seed_chat(db)
    (row,) = await _append(db, seeded.chat_id, {"role": "user", "content": "a", "meta": {"lang": "en", "x": 1}})
    async with db.session() as session:
        repos = Repositories(session)
        patched = await repos.messages.patch(seeded.chat_id, row.id, {"meta": {"manualExcluded": True, "x": None}})
        assert patched is not None and patched.meta == {"lang": "en", "manualExcluded": True}
        with pytest.raises(InvalidValue, match="content"):
            await repos.messages.patch(seeded.chat_id, row.id, {"content": "rewritten"})
        with pytest.raises(InvalidValue):
            await repos.messages.patch(seeded.chat_id, row.id, {"pinned": "yes"})
        assert await repos.messages.patch("other-chat", row.id, {"pinned": True}) is None
    async with db.session() as session:
        stored = await Repositories(session).messages.get(row.id, seeded.chat_id)
        assert stored is not None and stored.meta == {"lang": "en", "manualExcluded": True} and not stored.pinned


async def test_message_round_trips_to_core_message(db: Database) -> None:
    seeded = await seed_chat(db)
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "tea"}'}}
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    given: list[dict[str, Any]] = [
        {"role": "user", "content": parts, "name": "ann", "workspace": "ws-1", "meta": {"k": [1, 2]}},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "found", "tool_call_id": "call_1", "pinned": True},
    ]
    rows = await _append(db, seeded.chat_id, *given)
    async with db.session() as session:
        stored = [await Repositories(session).messages.get(r.id) for r in rows]
    messages = [row_to_message(r) for r in stored if r is not None]
    assert [m.id for m in messages] == [r.id for r in rows]
    assert all(m.source == "history" for m in messages)
    user, assistant, tool = messages
    assert user.content == tuple(parts) and user.name == "ann" and user.workspace == "ws-1"
    assert user.meta == {"k": [1, 2]}
    assert assistant.content is None
    assert assistant.tool_calls == (ToolCall.from_dict(call),)
    assert assistant.to_dict()["tool_calls"] == [call]
    assert (tool.tool_call_id, tool.pinned, tool.content) == ("call_1", True, "found")


async def test_core_message_objects_can_be_appended(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        row = await Repositories(session).messages.append(
            seeded.chat_id, Message(role="assistant", content="ok", id="ignored", source="input")
        )
    assert row.id != "ignored" and row.role == "assistant" and row.content == "ok"


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "robot", "content": "x"},
        {"role": "user", "content": 42},
        {"role": "user", "content": "x", "meta": {"when": object()}},
        {"role": "user", "content": "nul \x00 byte"},
        {"role": "user", "content": "x", "name": "n" * 201},
    ],
)
async def test_invalid_messages_are_rejected_and_nothing_is_stored(db: Database, bad: dict[str, object]) -> None:
    seeded = await seed_chat(db)
    with pytest.raises(InvalidValue):
        await _append(db, seeded.chat_id, {"role": "user", "content": "fine"}, bad)
    async with db.session() as session:
        assert await Repositories(session).messages.count(seeded.chat_id) == 0
    assert await _version(db, seeded.chat_id) == 0


async def test_list_page_walks_the_chat_newest_first(db: Database) -> None:
    seeded = await seed_chat(db)
    await _append(db, seeded.chat_id, *({"role": "user", "content": f"m{i}"} for i in range(7)))
    seen: list[int] = []
    before: int | None = None
    async with db.session() as session:
        while True:
            page = await Repositories(session).messages.list_page(seeded.chat_id, before_seq=before, limit=3)
            seen += [r.seq for r in page.rows]
            if not page.has_more:
                break
            before = page.rows[-1].seq
        chronological = await Repositories(session).messages.chronological(seeded.chat_id)
    assert seen == [7, 6, 5, 4, 3, 2, 1]
    assert [r.seq for r in chronological] == [1, 2, 3, 4, 5, 6, 7]


async def test_pinned_returns_only_pinned_messages_in_order(db: Database) -> None:
    seeded = await seed_chat(db)
    rows = await _append(
        db,
        seeded.chat_id,
        *({"role": "user", "content": f"m{i}", "pinned": i in (1, 4)} for i in range(6)),
    )
    async with db.session() as session:
        pinned = await Repositories(session).messages.pinned(seeded.chat_id)
    assert [r.id for r in pinned] == [rows[1].id, rows[4].id]


async def test_concurrent_appends_get_distinct_consecutive_seqs(db: Database) -> None:
    seeded = await seed_chat(db)

    async def one(i: int) -> int:
        (row,) = await _append(db, seeded.chat_id, {"role": "user", "content": f"c{i}"})
        return row.seq

    seqs = await asyncio.gather(*(one(i) for i in range(8)))
    assert sorted(seqs) == list(range(1, 9))
    assert await _version(db, seeded.chat_id) == 8


async def test_deleting_a_chat_deletes_its_messages(db: Database) -> None:
    seeded: Seeded = await seed_chat(db)
    await _append(db, seeded.chat_id, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    async with db.session() as session:
        assert await Repositories(session).chats.delete(seeded.chat_id)
    async with db.session() as session:
        left = (await session.execute(select(func.count()).select_from(MessageRow))).scalar_one()
    assert left == 0
