"""recent_window: a turn reads only the newest messages it can use, plus the pinned ones (T4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select

from contextshift.storage import Database, Repositories
from contextshift.storage.tables import MessageTokensRow

from .seed import seed_chat

LONG_CHAT = 5_000


class Counter:
    """A ``count_fn`` (one token per word) that remembers how often it was called."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return len(text.split())


def _must_not_count(text: str) -> int:
    raise AssertionError(f"counted {text!r} again")


async def _long_chat(db: Database, n: int = LONG_CHAT, pinned: tuple[int, ...] = ()) -> str:
    seeded = await seed_chat(db)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} has five words", "pinned": i in pinned}
        for i in range(n)
    ]
    async with db.session() as session:
        await Repositories(session).messages.append_many(seeded.chat_id, messages)
    return seeded.chat_id


async def _stored_counts(db: Database, profile: str | None = None) -> int:
    query = select(func.count()).select_from(MessageTokensRow)
    if profile is not None:
        query = query.where(MessageTokensRow.profile == profile)
    async with db.session() as session:
        return int((await session.execute(query)).scalar_one())


async def _window(
    db: Database, chat_id: str, budget: int, count_fn: Callable[[str], int], profile: str = "words", **kw: bool
) -> tuple[list[int], bool, int, int, int]:
    async with db.session() as session:
        w = await Repositories(session).messages.recent_window(chat_id, profile, budget, count_fn, **kw)
    return [r.seq for r in w.rows], w.has_more, w.rows_read, w.counted, w.total_tokens


async def test_window_on_a_long_chat_reads_few_rows_and_stores_their_counts(db: Database) -> None:
    chat_id = await _long_chat(db)
    counter = Counter()
    seqs, has_more, rows_read, counted, total = await _window(db, chat_id, 100, counter)
    # five tokens a message: the 21st newest one crosses 100 tokens and is the last one read
    assert seqs == list(range(LONG_CHAT - 20, LONG_CHAT + 1))
    assert has_more and total == 105
    assert rows_read < 100 < LONG_CHAT  # one small page, not the history
    assert counter.calls == counted == rows_read
    assert await _stored_counts(db) == rows_read

    again = await _window(db, chat_id, 100, _must_not_count)  # counts are reused: nothing is counted twice
    assert again[:2] == (seqs, True) and again[3] == 0


async def test_larger_budgets_read_more_pages_and_count_only_new_rows(db: Database) -> None:
    chat_id = await _long_chat(db)
    await _window(db, chat_id, 100, Counter())
    stored = await _stored_counts(db)
    counter = Counter()
    seqs, has_more, rows_read, counted, _ = await _window(db, chat_id, 2_000, counter)
    assert len(seqs) == 401 and has_more
    assert rows_read < 1_000
    assert counted == counter.calls == rows_read - stored
    assert await _stored_counts(db) == rows_read


async def test_pinned_messages_are_always_included(db: Database) -> None:
    chat_id = await _long_chat(db, pinned=(0, 2_500))
    seqs, has_more, rows_read, _, total = await _window(db, chat_id, 50, Counter())
    assert seqs[:2] == [1, 2_501]
    assert seqs[2:] == list(range(LONG_CHAT - 10, LONG_CHAT + 1))
    assert has_more and total == 13 * 5
    assert rows_read < 100


async def test_short_chat_returns_everything_and_nothing_remains(db: Database) -> None:
    chat_id = await _long_chat(db, n=10)
    seqs, has_more, rows_read, _, total = await _window(db, chat_id, 10_000, Counter())
    assert seqs == list(range(1, 11)) and not has_more and rows_read == 10 and total == 50


async def test_window_extends_over_tool_results_to_the_call(db: Database) -> None:
    seeded = await seed_chat(db)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "result one two three"},
        {"role": "tool", "tool_call_id": "c1", "content": "result four five six"},
        {"role": "user", "content": "newest"},
    ]
    async with db.session() as session:
        await Repositories(session).messages.append_many(seeded.chat_id, messages)
    seqs, has_more, *_ = await _window(db, seeded.chat_id, 2, Counter())
    assert seqs == [2, 3, 4, 5]  # never starts with a tool result cut from its call
    assert has_more


async def test_manually_excluded_messages_are_returned_but_cost_no_budget(db: Database) -> None:
    chat_id = await _long_chat(db, n=100)
    async with db.session() as session:
        newest = (await Repositories(session).messages.list_page(chat_id, limit=10)).rows
        for row in newest:
            await Repositories(session).messages.patch(chat_id, row.id, {"meta": {"manualExcluded": True}})
    seqs, *_ = await _window(db, chat_id, 50, Counter())
    assert seqs == list(range(80, 101))  # the 10 excluded ones plus 11 that cross the budget


async def test_preview_mode_stores_no_counts(db: Database) -> None:
    chat_id = await _long_chat(db, n=300)
    first = await _window(db, chat_id, 100, Counter(), store_counts=False)
    assert await _stored_counts(db) == 0
    counter = Counter()
    second = await _window(db, chat_id, 100, counter, store_counts=False)
    assert second[:2] == first[:2] and counter.calls > 0


async def test_counts_are_kept_per_profile(db: Database) -> None:
    chat_id = await _long_chat(db, n=50)
    await _window(db, chat_id, 1_000, Counter(), profile="words")
    chars = Counter()
    await _window(db, chat_id, 1_000, lambda t: chars(t) and len(t), profile="chars")
    assert chars.calls == 50
    assert await _stored_counts(db, "words") == await _stored_counts(db, "chars") == 50


async def test_stored_counts_of_a_deleted_chat_are_deleted(db: Database) -> None:
    chat_id = await _long_chat(db, n=40)
    await _window(db, chat_id, 1_000, Counter())
    async with db.session() as session:
        await Repositories(session).chats.delete(chat_id)
    assert await _stored_counts(db) == 0


async def test_window_rows_convert_to_history_messages(db: Database) -> None:
    chat_id = await _long_chat(db, n=5)
    async with db.session() as session:
        window = await Repositories(session).messages.recent_window(chat_id, "words", 1_000, Counter())
    messages = window.messages()
    assert [m.id for m in messages] == [r.id for r in window.rows]
    assert {m.source for m in messages} == {"history"}
    assert window.tokens == {m.id: 5 for m in messages}
