"""The service's ``recall`` (G4a) against the library's on the same chat, on SQLite and PostgreSQL.

The chat is stored through the repositories; a turn loads the recent window worth the budget, the older
candidates ``recall_candidates`` hands over, and the strategy shifts them with the same budget as the
library shifts the whole chat. Counter: ceil(len/4) a text (the window's), 4 a message.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest

from contextshift import Message, shift_with_strategy
from contextshift.service.recall import recall_candidates
from contextshift.storage import Database, Repositories, row_to_message
from tests.databases import PG_ENV, PG_SKIP, Backend, backend, pg_database

__all__ = ["PG_ENV", "PG_SKIP", "backend", "pg_database"]


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


SYSTEM = Message(role="system", content="You are helpful.", id="system")
CHATTER = [
    "Some ordinary chatter about the weather and lunch plans today.",
    "The train was late again, so I read a book on the platform.",
    "We should try the new bakery near the station this weekend.",
]


def turns() -> list[Message]:
    """A 60-turn chat: three facts, each asked for and answered over two turns, among chatter."""
    texts = [CHATTER[i % 3] for i in range(60)]
    texts[4] = "Where did you go on your trip last week, Jon?"
    texts[5] = "Rome! Loved every minute."
    texts[12] = "The gate code for warehouse NORTH is 5521."
    texts[20] = "The gate code for warehouse SOUTH is 7730."
    texts[30] = "Update: the gate code for warehouse NORTH changed to 8080."
    return [Message(role="user" if i % 2 == 0 else "assistant", content=t, id=f"t{i}") for i, t in enumerate(texts)]


@pytest.fixture
async def db(backend: Backend) -> AsyncIterator[Database]:
    database = backend.database()
    await database.start()
    try:
        yield database
    finally:
        await database.close()


async def stored_chat(db: Database, history: list[Message]) -> tuple[str, dict[str, str]]:
    """The chat's id, and each stored row's id → the turn's id."""
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="local", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="Ada", chat_model_id=model.id)
        chat = await repos.chats.create(bot_id=bot.id, title="recall")
        rows = await repos.messages.append_many(chat.id, [{"role": m.role, "content": m.content} for m in history])
        return chat.id, {r.id: m.id for r, m in zip(rows, history, strict=True)}


async def service_kept(db: Database, chat_id: str, question: Message, budget: int, full_history: int) -> list[Message]:
    async with db.session() as session:
        repos = Repositories(session)
        window = await repos.messages.recent_window(chat_id, "ceil4", budget, ceil4, store_counts=False)
        rows = window.rows
        assert window.has_more
        found = await recall_candidates(repos, chat_id, rows, question.text, full_history=full_history)
        rows = sorted([*found, *rows], key=lambda r: r.seq)
    messages = [SYSTEM, *(row_to_message(r) for r in rows), question]
    return list(shift_with_strategy(messages, ceil4, budget, strategy="recall").kept)


QUESTIONS = [
    "Which city did Jon visit on his trip last week?",
    "What are the gate codes of all the warehouses?",
    "What is the gate code for warehouse NORTH?",
]


@pytest.mark.parametrize("question", QUESTIONS)
async def test_the_service_gives_the_librarys_prompt_on_the_same_chat(db: Database, question: str) -> None:
    history = turns()
    chat_id, turn_of = await stored_chat(db, history)
    asked = Message(role="user", content=question, id="question", source="input")
    library = shift_with_strategy([SYSTEM, *history, asked], ceil4, 150, strategy="recall")
    served = await service_kept(db, chat_id, asked, 150, full_history=1000)
    assert [turn_of.get(m.id, m.id) for m in served] == [m.id for m in library.kept]
    assert [m.text for m in served] == [m.text for m in library.kept]
    assert any(library.reasons[m.id] == "recalled" for m in library.kept)


async def test_through_the_index_a_hit_comes_with_the_turn_answering_it(db: Database) -> None:
    history = turns()
    chat_id, turn_of = await stored_chat(db, history)
    asked = Message(role="user", content=QUESTIONS[0], id="question", source="input")
    library = shift_with_strategy([SYSTEM, *history, asked], ceil4, 150, strategy="recall")
    served = await service_kept(db, chat_id, asked, 150, full_history=0)
    kept = [turn_of.get(m.id, m.id) for m in served]
    assert kept == [m.id for m in library.kept]
    assert {"t4", "t5"} <= set(kept)  # the question the index found, and its answer, which holds no word of it
