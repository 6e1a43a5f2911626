"""A chat turn reads its chat, bot, model and provider once (issue 24), and runs an exact number of statements.

Every statement one warm turn sends to the database (``Generations.complete`` against the fake provider, on a
chat longer than its window) is recorded at the driver. A second read of the turn's setting, or any new query
on the turn's path, changes the count and fails here: change the number only with a reason.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import event

from contextshift.service.generation import Generations
from contextshift.storage import Database, Repositories
from tests.databases import Backend, backend, pg_database
from tests.fakes import FakeProvider

__all__ = ["backend", "pg_database"]

#: 300 messages of 60 words: about a third of them fit the 8,192-token window, so older history exists.
MESSAGES = 300
#: The statements of one warm turn (transaction control left out: SQLite's BEGIN is a statement, PostgreSQL's
#: is not): the turn lease 2 (take, give back); the setting 5 (chat, bot, model, provider, calibration); the
#: input 3; the history 10 (memories, the summarized count, one window page with its stored counts, sized by
#: the chat's last window, the new counts stored, pinned, older history, summaries, standing, the not-loaded
#: count in two); the audit 2; the reply 4; calibration 3.
STATEMENTS = 29
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


async def _chat(db: Database, base_url: str) -> str:
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="p", kind="openai", base_url=base_url, api_key="sk-test")
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="b", chat_model_id=model.id, system_prompt="Be brief.")
        chat = await repos.chats.create(bot_id=bot.id, title="long")
        history = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": " ".join(WORDS[(i + k) % len(WORDS)] for k in range(60)),
            }
            for i in range(MESSAGES)
        ]
        await repos.messages.append_many(chat.id, history)
    return chat.id


def _table(statement: str) -> str:
    found = re.search(r"\bFROM (\w+)", statement)
    return found.group(1) if found else ""


async def _one_turn_statements(db: Database, generations: Generations, chat_id: str) -> list[str]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, _parameters: Any, _context: Any, _many: bool) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            seen.append(" ".join(statement.split()))

    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    try:
        done = await generations.complete(chat_id, "Tell me about echo and golf.", None)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)
    assert done.message.content
    return seen


async def test_a_warm_turn_reads_its_setting_once_in_29_statements(
    backend: Backend, fake_provider: FakeProvider
) -> None:
    db = backend.database()
    await db.start()
    try:
        chat_id = await _chat(db, fake_provider.base_url)
        generations = Generations(db)
        for draft in ("first question", "second question"):  # counts stored, as on a running server
            await generations.complete(chat_id, draft, None)
        statements = await _one_turn_statements(db, generations, chat_id)
    finally:
        await db.close()
    whole_rows = [s for s in statements if s.startswith("SELECT") and f"{_table(s)}.id, " in s]
    assert sorted(_table(s) for s in whole_rows if _table(s) in {"chats", "bots", "models", "providers"}) == [
        "bots",
        "chats",
        "models",
        "providers",
    ]
    assert len(statements) == STATEMENTS, "\n".join(statements)
