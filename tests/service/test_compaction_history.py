"""What a compaction pass reads of a long chat (issue 26): its oldest part and its newest, never the whole."""

from __future__ import annotations

import random
from typing import Any

from contextshift.core.compaction import Selection, compactable_tokens, decide, input_budget, select_fold, sync_reach
from contextshift.core.tokens import TokenizerProfile
from contextshift.service.compaction import HISTORY_PAGE, READ_AHEAD, PassHistory, TextCounts, read_pass_history
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


# -- a bounded pass folds what a pass over the whole history folds ----------------------------------------

GENERATED = 2_400
SUMMARIZER_WINDOW = 16_000


def _generated(seed: int) -> list[dict[str, Any]]:
    """A chat of exchanges of varied length, some with a tool call and its result, a few pinned messages."""
    chance = random.Random(seed)
    messages: list[dict[str, Any]] = []
    while len(messages) < GENERATED:
        n = len(messages)
        words = " ".join(chance.choice(WORDS) for _ in range(chance.randint(3, 120)))
        messages.append({"role": "user", "content": f"question {n}: {words}", "pinned": chance.random() < 0.01})
        if chance.random() < 0.2:
            call = {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "content": f"result {n} {words[:200]}", "tool_call_id": f"call_{n}"})
        answer = " ".join(chance.choice(WORDS) for _ in range(chance.randint(5, 300)))
        messages.append({"role": "assistant", "content": answer})
    return messages[:GENERATED]


async def _stored(db: Database, messages: list[dict[str, Any]]) -> str:
    async with db.session() as session:
        repos = Repositories(session)
        bot = await repos.bots.create(name="b")
        chat = await repos.chats.create(bot_id=bot.id, title="generated")
        await repos.messages.append_many(chat.id, messages)
        return chat.id


def _select(history: PassHistory, target: int | None, budget: int, profile: TokenizerProfile) -> Selection:
    return select_fold(
        history.messages,
        target_tokens=target,
        input_budget=budget,
        counter=profile,
        input_counter=profile.count,
        beyond=history.beyond,
    )


async def _state(db: Database, chat_id: str) -> tuple[list[tuple[int, int]], tuple[int, int], list[int]]:
    """Which seqs each summary stands for (summaries by anchor), the chat's kept counts, the anchors."""
    async with db.session() as session:
        repos = Repositories(session)
        rows = await repos.messages.chronological(chat_id)
        summaries = await repos.compaction.active_summaries(chat_id)
        chat = await repos.chats.get(chat_id)
    assert chat is not None
    number = {s.id: i for i, s in enumerate(sorted(summaries, key=lambda s: s.anchor_seq))}
    marked = [(r.seq, number.get(r.summary_id, -1) if r.summary_id else -2) for r in rows]
    return marked, (chat.raw_messages, chat.summarized_messages), [s.anchor_seq for s in summaries]


async def test_a_bounded_pass_folds_the_same_messages_as_a_pass_over_the_whole_history(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        generated = _generated(26)
        fast, slow = await _stored(db, generated), await _stored(db, generated)
        profile = get_tokenizer("gpt-4o")  # exact and fixed: no calibration in the way
        budget = input_budget(SUMMARIZER_WINDOW, count=profile.count)
        reach, tail = READ_AHEAD * budget, sync_reach(SUMMARIZER_WINDOW) + 1
        folded: list[int] = []
        for _ in range(3):  # the second and third passes roll the earlier summary up
            part = await read_pass_history(db, fast, profile, reach=reach, tail=tail, counts=TextCounts())
            whole = await read_pass_history(db, fast, profile, reach=None, tail=tail)
            assert part.beyond > 0 and whole.beyond == 0 and len(part.messages) < len(whole.messages)
            pressure = compactable_tokens(whole.messages, profile)
            target = decide(SUMMARIZER_WINDOW, pressure, phase="after_turn").target_tokens
            assert (
                decide(
                    SUMMARIZER_WINDOW, compactable_tokens(part.messages, profile) + part.beyond, phase="after_turn"
                ).target_tokens
                == target
            )
            bounded, full = _select(part, target, budget, profile), _select(whole, target, budget, profile)
            assert bounded.covers == full.covers and bounded.supersedes == full.supersedes
            raw_ids = [m.id for m in bounded.fold if m.source != "summary"]
            raw = part.raw_seqs(raw_ids)
            assert raw is not None and len(raw) == len(raw_ids)
            folded.append(len(raw_ids))
            async with db.session() as session:  # the pass's write: the raw rows found by the seqs it read
                repos = Repositories(session)
                assert part.version is not None
                kept = await repos.compaction.commit_summary(
                    fast,
                    part.version,
                    content="s",
                    covers=bounded.covers,
                    supersedes=bounded.supersedes,
                    raw=raw,
                )
                assert kept is not None
            slow_whole = await read_pass_history(db, slow, profile, reach=None, tail=tail)
            slow_fold = _select(slow_whole, target, budget, profile)
            async with db.session() as session:  # the same fold written the old way: every covered id looked up
                repos = Repositories(session)
                assert slow_whole.version is not None
                assert await repos.compaction.commit_summary(
                    slow, slow_whole.version, content="s", covers=slow_fold.covers, supersedes=slow_fold.supersedes
                )
        assert folded == [101, 94, 98]
        assert await _state(db, fast) == await _state(db, slow)
    finally:
        await db.close()
