"""A turn's queries never read the whole chat (issue 26, V7): every SELECT that ``load_turn`` runs on a long
chat, recorded at the driver and explained by the database itself.

PostgreSQL: ``EXPLAIN (ANALYZE, FORMAT JSON)`` of each statement with its own parameters; no node reads
``messages`` sequentially, and the rows every node on ``messages`` touches (returned plus removed by a filter)
stay a small part of the chat. SQLite: ``EXPLAIN QUERY PLAN``; no statement scans ``messages`` or
``message_tokens`` (each one searches an index), and the counts come from the chat row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event, text

from contextshift.service.turn import load_turn
from contextshift.storage import Database, Repositories
from tests.databases import Backend, backend, pg_database

__all__ = ["backend", "pg_database"]

CHAT = 4_000
#: A turn's window here is about 130 messages (60 words each, 8,192-token window): far below the chat.
BOUND = 800
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
]


def long_history() -> Iterator[list[dict[str, Any]]]:
    """The chat's messages in chunks of 1,000: 60 words each, a pinned one now and then."""
    for start in range(0, CHAT, 1_000):
        yield [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": " ".join(WORDS[(i + k) % len(WORDS)] for k in range(60)),
                "pinned": i % 997 == 0,
            }
            for i in range(start, start + 1_000)
        ]


async def _long_chat(db: Database) -> tuple[str, str]:
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="p", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="b", chat_model_id=model.id)
        chat = await repos.chats.create(bot_id=bot.id, title="long")
    for number, chunk in enumerate(long_history()):
        async with db.session() as session:
            rows = await Repositories(session).messages.append_many(chat.id, chunk)
            if number == 0:  # an old summary, so the turn also reads summaries and what they cover
                repos = Repositories(session)
                version = await repos.compaction.history_version(chat.id)
                assert version is not None
                covers = [r.id for r in rows[:300]]
                assert await repos.compaction.commit_summary(chat.id, version, content="s", covers=covers)
    return bot.id, chat.id


async def _turn_statements(db: Database, bot_id: str, chat_id: str) -> list[tuple[str, Any]]:
    """Every SELECT a turn's load ran (statement and driver parameters), with stored counts in place."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    for preview in (False, True):  # the first stores the window's counts; the second is a warm turn
        seen.clear()
        event.listen(db.engine.sync_engine, "before_cursor_execute", record)
        try:
            async with db.session() as session:
                repos = Repositories(session)
                bot = await repos.bots.get(bot_id)
                chat = await repos.chats.get(chat_id)
                assert bot is not None and chat is not None
                turn = await load_turn(repos, bot=bot, chat=chat, draft="hello", max_tokens=None, preview=preview)
        finally:
            event.remove(db.engine.sync_engine, "before_cursor_execute", record)
    assert turn.history is not None and turn.history["not_loaded"] > 3_000  # the window is a small part
    assert turn.history["summarized"] == 299  # the pinned first message is back raw
    return list(seen)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


async def explain_postgresql(db: Database, statements: list[tuple[str, Any]]) -> None:
    async with db.engine.connect() as connection:
        for statement, parameters in statements:
            result = await connection.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters)
            raw = result.scalar_one()
            plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
            on_messages = [n for n in _nodes(plan) if n.get("Relation Name") == "messages"]
            assert all(n["Node Type"] != "Seq Scan" for n in on_messages), statement
            touched = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in on_messages)
            assert touched <= BOUND, (touched, statement)


async def explain_sqlite(db: Database, statements: list[tuple[str, Any]]) -> None:
    async with db.engine.connect() as connection:
        for statement, parameters in statements:
            plan = (await connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)).all()
            details = [str(row[-1]) for row in plan]
            scans = [d for d in details if d.startswith("SCAN") and ("messages" in d or "message_tokens" in d)]
            assert not scans, (details, statement)
            # A count over messages is bounded by a seq range (the window), never the chat.
            assert "count(" not in statement.lower() or "seq >=" in statement, statement


async def test_no_query_of_a_turn_reads_the_whole_chat(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        bot_id, chat_id = await _long_chat(db)
        if backend.name == "postgresql":
            async with db.engine.connect() as connection:
                await connection.execute(text("ANALYZE"))
                await connection.commit()
        statements = await _turn_statements(db, bot_id, chat_id)
        assert sum("FROM messages" in s for s, _ in statements) >= 4  # window pages, pinned, standing, counts
        if backend.name == "postgresql":
            await explain_postgresql(db, statements)
        else:
            await explain_sqlite(db, statements)
    finally:
        await db.close()
