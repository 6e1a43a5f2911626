"""``MessageRepository.put_version``: a reply's version written in place (a streaming regenerate or continue kept
up to date while it streams, N5), or added as a new last version, and shown."""

from __future__ import annotations

import pytest

from contextshift.storage import Database, InvalidValue, Repositories

from .seed import seed_chat


async def test_a_version_is_added_then_written_in_place_and_shown_with_the_users_own_meta_kept(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        reply = await repos.messages.append(
            seeded.chat_id,
            {"role": "assistant", "content": "First.", "meta": {"finish_reason": "stop", "manualExcluded": True}},
        )
        put = await repos.messages.put_version(
            seeded.chat_id, reply.id, None, {"content": "Sec", "meta": {"partial": True}}
        )
        assert put is not None and put[1] == 1
        put = await repos.messages.put_version(
            seeded.chat_id, reply.id, 1, {"content": "Second.", "meta": {"finish_reason": "stop"}}
        )
        assert put is not None and put[1] == 1
    async with db.session() as session:
        row = await Repositories(session).messages.get(reply.id)
        assert row is not None
        assert (row.content, row.alternative, row.meta) == (
            "Second.",
            1,
            {"manualExcluded": True, "finish_reason": "stop"},
        )
        assert [v["content"] for v in row.alternatives or []] == ["First.", "Second."]
        assert row.alternatives is not None and row.alternatives[0]["meta"] == {"finish_reason": "stop"}


async def test_the_only_version_is_written_in_place_without_a_list_of_versions(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        reply = await repos.messages.append(seeded.chat_id, {"role": "assistant", "content": "First."})
        put = await repos.messages.put_version(seeded.chat_id, reply.id, 0, {"content": "First. And more"})
        assert put is not None and (put[0].content, put[0].alternatives, put[1]) == ("First. And more", None, 0)


async def test_a_version_that_does_not_exist_is_refused_and_a_missing_reply_is_none(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        reply = await repos.messages.append(seeded.chat_id, {"role": "assistant", "content": "First."})
        with pytest.raises(InvalidValue):
            await repos.messages.put_version(seeded.chat_id, reply.id, 1, {"content": "x"})
        assert await repos.messages.put_version(seeded.chat_id, "missing", None, {"content": "x"}) is None
        row = await repos.messages.get(reply.id)
        assert row is not None and (row.content, row.alternatives) == ("First.", None)
