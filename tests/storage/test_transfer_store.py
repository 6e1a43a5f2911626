"""A chat exported as our JSON document and imported again is the same chat (issue 27), on SQLite and
PostgreSQL: messages, versions, pins, exclusions, standing marks, summaries (active and rolled up), times."""

from __future__ import annotations

import json
from typing import Any

from contextshift.service.transfer import export_document, parse_import
from contextshift.storage import Database, Repositories
from contextshift.storage.repositories.branches import branch_from, show_branch
from contextshift.storage.repositories.transfer import add_chat_contents, chat_contents
from contextshift.storage.tables import ChatRow

from .seed import seed_chat
from .test_message_counts import _recount


async def _document(db: Database, chat_id: str) -> dict[str, Any]:
    async with db.session() as session:
        chat = await Repositories(session).chats.require(chat_id)
        messages, summaries = await chat_contents(session, chat_id)
        fields = {"title": chat.title, "type": chat.type, "created_at": chat.created_at.isoformat()}
        return export_document(fields, messages, summaries, "2026-12-06T00:00:00+00:00")


def _same(document: dict[str, Any]) -> dict[str, Any]:
    """The document without what an import makes anew: ids (messages and summaries are compared through them)."""
    ids = {m["id"]: f"m{n}" for n, m in enumerate(document["messages"])}
    ids |= {s["id"]: f"s{n}" for n, s in enumerate(document["summaries"])}
    messages = [{**m, "id": ids[m["id"]], "summary_id": ids.get(m["summary_id"])} for m in document["messages"]]
    summaries = [
        {**s, "id": ids[s["id"]], "covers": [ids[c] for c in s["covers"]], "superseded_by": ids.get(s["superseded_by"])}
        for s in document["summaries"]
    ]
    return {**document, "chat": {**document["chat"], "created_at": None}, "messages": messages, "summaries": summaries}


async def test_an_exported_chat_imports_as_the_same_chat(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        rows = await repos.messages.append_many(
            seeded.chat_id,
            [
                {"role": "user", "content": "Always answer in French."},
                {"role": "assistant", "content": "D'accord."},
                {"role": "user", "content": [{"type": "text", "text": "你好，我叫山姆。"}]},
                {"role": "assistant", "content": "Bonjour Sam.", "meta": {"manualExcluded": True}},
                {"role": "user", "content": "Встретимся в пятницу", "pinned": True},
                {"role": "assistant", "content": "First reply"},
            ],
        )
        await repos.messages.add_alternative(seeded.chat_id, rows[5].id, {"content": "Second reply"})
        await repos.messages.choose_alternative(seeded.chat_id, rows[5].id, 0)
        version = await repos.compaction.history_version(seeded.chat_id)
        assert version is not None
        first = await repos.compaction.commit_summary(
            seeded.chat_id, version, content="They greeted.", covers=[rows[1].id, rows[2].id], model="m"
        )
        assert first is not None
        await repos.compaction.commit_summary(
            seeded.chat_id, version, content="They greeted; Sam.", covers=[rows[3].id], supersedes=[first.id]
        )
    exported = await _document(db, seeded.chat_id)
    assert [m["standing"] for m in exported["messages"]] == [True, False, False, False, False, False]
    assert [len(m["alternatives"] or []) for m in exported["messages"]] == [0, 0, 0, 0, 0, 2]
    assert len(exported["summaries"]) == 2
    (imported,) = parse_import(json.dumps(exported))
    other = await seed_chat(db)
    async with db.session() as session:
        chat = await Repositories(session).chats.create(bot_id=other.bot_id, title=imported.title)
        await add_chat_contents(session, chat.id, imported.messages, imported.summaries)
    again = await _document(db, chat.id)
    assert again["chat"]["title"] == "first"
    assert _same(again) == _same(exported)
    async with db.session() as session:
        stored = await session.get(ChatRow, chat.id)
        assert stored is not None
        kept = (stored.raw_messages, stored.summarized_messages)
    assert kept == await _recount(db, chat.id) == (2, 3)  # the imported summaries count as folded


async def test_a_refused_import_rolls_back_and_leaves_no_chat(db: Database) -> None:
    seeded = await seed_chat(db)
    before = await _count_chats(db)
    bad = [{"ref": "0", "role": "user", "content": "fine"}, {"ref": "1", "role": "user", "content": {"x": 1}}]
    try:
        async with db.session() as session:
            chat = await Repositories(session).chats.create(bot_id=seeded.bot_id, title="half")
            await add_chat_contents(session, chat.id, bad, [])
    except Exception as exc:  # the storage refuses the message content; the transaction rolls back
        assert type(exc).__name__ == "InvalidValue"
    else:
        raise AssertionError("the import was not refused")
    assert await _count_chats(db) == before


async def _count_chats(db: Database) -> int:
    async with db.session() as session:
        return len(await Repositories(session).chats.list_all(limit=500))


async def test_a_branched_chat_imports_with_the_branch_shown_and_every_version_text(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        rows = await repos.messages.append_many(
            seeded.chat_id,
            [
                {"role": "user", "content": "Plan a trip"},
                {"role": "assistant", "content": "To Rome?"},
                {"role": "user", "content": "Yes"},
            ],
        )
        await branch_from(repos.messages, seeded.chat_id, rows[0].id, "Plan a hike")
    exported = await _document(db, seeded.chat_id)
    assert [m["content"] for m in exported["messages"]] == ["Plan a hike"]
    (imported,) = parse_import(json.dumps(exported))
    other = await seed_chat(db)
    async with db.session() as session:
        chat = await Repositories(session).chats.create(bot_id=other.bot_id, title=imported.title)
        await add_chat_contents(session, chat.id, imported.messages, imported.summaries)
    again = await _document(db, chat.id)
    [message] = again["messages"]
    assert [v["content"] for v in message["alternatives"]] == ["Plan a trip", "Plan a hike"]
    assert all("tail" not in v for v in message["alternatives"])  # the exported chat's rows stay there
    async with db.session() as session:  # showing the other version is a plain version switch, nothing inserted
        await show_branch(Repositories(session).messages, chat.id, message["id"], 0)
    assert [m["content"] for m in (await _document(db, chat.id))["messages"]] == ["Plan a trip"]
    assert [m["content"] for m in (await _document(db, seeded.chat_id))["messages"]] == ["Plan a hike"]
