"""The chat search in every language (issue 27), on SQLite (FTS5 trigram) and PostgreSQL (pg_trgm): a Chinese
word inside a sentence, another form of a Russian word, emoji; keys of every script are matched as substrings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextshift.core.search_keys import query_words, search_keys, word_key
from contextshift.storage import Database, Repositories
from contextshift.storage.repositories.search import search_chats

from .seed import seed_chat


async def add(db: Database, chat_id: str, *texts: str) -> list[str]:
    async with db.session() as session:
        rows = await Repositories(session).messages.append_many(
            chat_id, [{"role": "user", "content": t} for t in texts]
        )
        return [r.id for r in rows]


async def found(db: Database, query: str) -> list[tuple[str, str | None]]:
    async with db.session() as session:
        hits = await search_chats(session, query, owner_id=None, limit=10)
        return [(chat_id, row.id if row is not None else None) for chat_id, row in hits]


async def test_a_chinese_word_inside_a_sentence_is_found(db: Database) -> None:
    seeded = await seed_chat(db)
    (said,) = await add(db, seeded.chat_id, "你好，我叫山姆。")
    assert await found(db, "山姆") == [(seeded.chat_id, said)]
    assert await found(db, "我叫山姆") == [(seeded.chat_id, said)]
    assert await found(db, "山姆 你好") == [(seeded.chat_id, said)]
    assert await found(db, "山羊") == []


async def test_a_russian_word_finds_its_other_forms(db: Database) -> None:
    seeded = await seed_chat(db)
    (said,) = await add(db, seeded.chat_id, "Встретимся в пятницу у вокзала")
    assert await found(db, "пятница") == [(seeded.chat_id, said)]
    assert await found(db, "ПЯТНИЦА вокзал") == [(seeded.chat_id, said)]
    assert await found(db, "суббота") == []


async def test_an_emoji_and_a_short_word_are_found(db: Database) -> None:
    seeded = await seed_chat(db)
    party, _ = await add(db, seeded.chat_id, "Happy birthday 🎉 see you", "No party here")
    assert await found(db, "🎉") == [(seeded.chat_id, party)]
    assert await found(db, "happy 🎉") == [(seeded.chat_id, party)]
    assert await found(db, "🎂") == []


async def test_every_key_must_be_held_by_one_message(db: Database) -> None:
    seeded = await seed_chat(db)
    other = await seed_chat(db)
    may, _ = await add(db, seeded.chat_id, "Growth was 5% in May", "Growth was 7% in June")
    (zebra,) = await add(db, other.chat_id, "The zebras crossed the road")
    assert await found(db, "growth 5% may") == [(seeded.chat_id, may)]
    assert await found(db, "june may") == []
    assert await found(db, "zebra road") == [(other.chat_id, zebra)]
    assert await found(db, "zebra giraffe") == []


async def test_an_edit_and_a_delete_keep_the_substring_index_in_step(db: Database) -> None:
    seeded = await seed_chat(db)
    (said,) = await add(db, seeded.chat_id, "我们去北京")
    async with db.session() as session:
        await Repositories(session).messages.edit_content(seeded.chat_id, said, "我们去上海")
    assert await found(db, "北京") == []
    assert await found(db, "上海") == [(seeded.chat_id, said)]
    async with db.session() as session:
        await Repositories(session).messages.delete(seeded.chat_id, said)
    assert await found(db, "上海") == []


def test_query_words_cut_at_spaces_and_punctuation_only() -> None:
    assert query_words("你好，我叫山姆。") == ["你好", "我叫山姆"]
    assert query_words("Happy 🎉, happy!") == ["happy", "🎉"]
    assert word_key("пятница") == "пятниц"
    assert word_key("happy") == "happ"
    assert word_key("山姆") == "山姆"
    assert search_keys("zebras closed") == ["zebra", "close"]


@given(st.text(max_size=40))
def test_every_key_is_a_beginning_of_a_word_of_the_query(query: str) -> None:
    words = query_words(query)
    keys = search_keys(query)
    assert len(keys) <= 12
    for key in keys:
        assert key and any(word.startswith(key) for word in words)


async def test_words_in_content_parts_are_found(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        (row,) = await Repositories(session).messages.append_many(
            seeded.chat_id, [{"role": "user", "content": [{"type": "text", "text": "我叫山姆，住在Москве 🎉"}]}]
        )
    assert await found(db, "山姆") == [(seeded.chat_id, row.id)]
    assert await found(db, "москва") == [(seeded.chat_id, row.id)]
    assert await found(db, "🎉") == [(seeded.chat_id, row.id)]
