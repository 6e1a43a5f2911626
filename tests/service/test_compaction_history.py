"""What a compaction pass reads of a long chat (issue 26): its oldest part and its newest, never the whole."""

from __future__ import annotations

from contextshift.service.compaction import HISTORY_PAGE, read_pass_history
from contextshift.storage import Database, Repositories
from contextshift.tokenizers import get_tokenizer
from tests.databases import Backend, backend, pg_database

__all__ = ["backend", "pg_database"]

CHAT = 3_000
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


async def _chat(db: Database) -> str:
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="p", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="b", chat_model_id=model.id)
        chat = await repos.chats.create(bot_id=bot.id, title="long")
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(WORDS[(i + k) % 10] for k in range(40))}
            for i in range(CHAT)
        ]
        await repos.messages.append_many(chat.id, messages)
        return chat.id


async def test_a_pass_reads_the_oldest_part_and_counts_the_newest_as_beyond(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        chat_id = await _chat(db)
        profile = get_tokenizer("gpt-4o")
        part = await read_pass_history(db, chat_id, profile, reach=2_000, tail=5_000)
        whole = await read_pass_history(db, chat_id, profile, reach=None, tail=5_000)
        assert part.version == whole.version is not None
        assert len(whole.messages) == CHAT and whole.beyond == 0
        assert len(part.messages) == HISTORY_PAGE  # 2,000 tokens are passed within the first page
        assert [m.id for m in part.messages] == [m.id for m in whole.messages[:HISTORY_PAGE]]
        assert 5_000 < part.beyond < 8_000  # the newest messages' compactable tokens, just past the tail asked
        near = await read_pass_history(db, chat_id, profile, reach=2_000, tail=200_000)  # the two reads meet
        assert [m.id for m in near.messages] == [m.id for m in whole.messages] and near.beyond == 0
    finally:
        await db.close()
