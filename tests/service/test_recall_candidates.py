"""The full-text recall's candidates hold every message the library keeps (G4a, issue 23), on SQLite and
PostgreSQL: the kinds the index missed on real conversations, and random small chats.

Each chat is stored through the repositories; the library shifts the whole chat, the service hands the
strategy the recent window and what ``recall_candidates`` finds through the index (``full_history=0``).
The kinds: a word of another form with the same Snowball stem ("enjoyable" for "enjoy": SQLite's Porter
keeps them apart), a word more than ``COMMON_WORD`` messages hold (it used to be left out), more matches
than the index used to hand over, and the dated turn the library brings beside a hit for a question about
time. Through the whole history (``full_history=1000``) the prompt is the library's exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator

import pytest

from contextshift import Message, shift_with_strategy
from contextshift.service.recall import recall_candidates
from contextshift.storage import Database, Repositories, row_to_message
from contextshift.storage.repositories.search import COMMON_WORD
from tests.databases import Backend, backend, pg_database

__all__ = ["backend", "pg_database"]

SYSTEM = Message(role="system", content="You are helpful.", id="system")
CHATTER = [
    "Some ordinary chatter about the weather and lunch today.",
    "The train was late again, so I read on the platform.",
    "We should try the new bakery near the station this weekend.",
]


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


def chat_of(texts: list[str]) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=t, id=f"t{i}") for i, t in enumerate(texts)]


@pytest.fixture
async def db(backend: Backend) -> AsyncIterator[Database]:
    database = backend.database()
    await database.start()
    try:
        yield database
    finally:
        await database.close()


async def stored(db: Database, history: list[Message]) -> tuple[str, dict[str, str]]:
    """The chat's id, and each stored row's id → the turn's id."""
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="local", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="Ada", chat_model_id=model.id)
        chat = await repos.chats.create(bot_id=bot.id, title="recall")
        rows = await repos.messages.append_many(chat.id, [{"role": m.role, "content": m.content} for m in history])
        return chat.id, {r.id: m.id for r, m in zip(rows, history, strict=True)}


async def served(
    db: Database, chat_id: str, turn_of: dict[str, str], question: Message, budget: int, full_history: int
) -> tuple[list[str], set[str]]:
    """The ids (as turn ids) the service's prompt keeps, and the turns the strategy was handed."""
    async with db.session() as session:
        repos = Repositories(session)
        window = await repos.messages.recent_window(chat_id, "ceil4", budget, ceil4, store_counts=False)
        assert window.has_more
        found = await recall_candidates(repos, chat_id, window.rows, question.text, full_history=full_history)
        rows = sorted([*found, *window.rows], key=lambda r: r.seq)
    messages = [SYSTEM, *(row_to_message(r) for r in rows), question]
    kept = shift_with_strategy(messages, ceil4, budget, strategy="recall").kept
    return [turn_of.get(m.id, m.id) for m in kept], {turn_of[r.id] for r in rows}


async def check(db: Database, history: list[Message], question: str, budget: int) -> tuple[list[str], list[str]]:
    """The library's kept ids and the service's through the index; asserts the index handed the strategy
    every turn the library keeps, and that through the whole history the prompt is the library's."""
    chat_id, turn_of = await stored(db, history)
    asked = Message(role="user", content=question, id="question", source="input")
    library = [m.id for m in shift_with_strategy([SYSTEM, *history, asked], ceil4, budget, strategy="recall").kept]
    through_index, handed = await served(db, chat_id, turn_of, asked, budget, full_history=0)
    assert {i for i in library if i.startswith("t")} <= handed
    whole, _ = await served(db, chat_id, turn_of, asked, budget, full_history=1000)
    assert whole == library
    return library, through_index


async def test_a_word_of_another_form_with_the_same_stem_is_a_candidate(db: Database) -> None:
    texts = [CHATTER[i % 3] for i in range(60)]
    texts[10] = "The pottery class was so enjoyable, and the kids were playful all afternoon."
    library, through_index = await check(db, chat_of(texts), "What did they enjoy?", 150)
    assert "t10" in library
    assert "t10" in through_index


async def test_a_word_most_of_the_chat_holds_is_still_searched(db: Database) -> None:
    texts = [f"{CHATTER[i % 3]} The garden looked fine on day {i}." for i in range(COMMON_WORD + 20)]
    texts += CHATTER * 30  # the newest turns hold no word of the input
    texts[40] = "Garden: the roses by the garden gate need water."
    library, through_index = await check(db, chat_of(texts), "What grows in the garden?", 150)
    assert "t40" in library
    assert "t40" in through_index


async def test_a_match_the_index_ranks_low_is_still_a_candidate(db: Database) -> None:
    texts = [f"The pottery teacher was nice on day {i}." if i % 4 == 0 else CHATTER[i % 3] for i in range(800)]
    texts += CHATTER * 30  # the newest turns hold no word of the input
    # Long, so the index (whole messages) ranks it last of 200; the library scores its short sentence first.
    texts[8] = " ".join(CHATTER * 2) + " Pottery teacher."
    library, through_index = await check(db, chat_of(texts), "Who is the pottery teacher?", 300)
    assert "t8" in library
    assert "t8" in through_index


async def test_a_question_about_time_gets_the_dated_turn_before_its_hit(db: Database) -> None:
    texts = [CHATTER[i % 3] for i in range(60)]
    texts[2] = "[8 May 2023, 1:56 pm] Hi there, long time no see!"
    texts[9] = "I finally moved to Lisbon, the flat is lovely."
    texts[30] = "[9 June 2023, 2:10 pm] Morning! How is everything?"
    library, through_index = await check(db, chat_of(texts), "When did you move to Lisbon?", 150)
    assert {"t2", "t9"} <= set(library)
    assert {"t2", "t9"} <= set(through_index)


WORDS = [
    "enjoy enjoyed enjoyable",
    "play playful playing",
    "fly flies flying",
    "organize organization",
    "happy happiness",
    "add added adding",
    "pie pies",
    "try tried trying",
    "garden gardens",
    "lisbon",
]


async def test_random_small_chats_hand_the_strategy_every_turn_the_library_keeps(db: Database) -> None:
    rng = random.Random(23)
    for _ in range(12):
        forms = [w for group in WORDS for w in group.split()]
        texts: list[str] = []
        for i in range(rng.randint(40, 80)):
            words = " ".join(rng.choice(forms) for _ in range(rng.randint(0, 3)))
            dated = "[8 May 2023, 1:56 pm] " if rng.random() < 0.1 else ""
            texts.append(f"{dated}{CHATTER[i % 3]} {words}".strip())
        group = rng.choice(WORDS).split()
        question = f"When did we {rng.choice(group)} with the {rng.choice(forms)}?"
        await check(db, chat_of(texts), question, rng.choice([120, 150, 250]))
