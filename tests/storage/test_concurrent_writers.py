"""SQLite under concurrent writers (N5): transactions that read and then write never fail on a lock, whether
they share one ``Database`` (one writer at a time per process) or come from two (``BEGIN IMMEDIATE`` and the
busy timeout, as two processes on one file)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextshift.storage import Database, Repositories

WRITERS = 32
ROUNDS = 5


async def read_then_write(db: Database, chat_id: str, n: int) -> None:
    async with db.session() as session:
        repos = Repositories(session)
        await repos.messages.list_page(chat_id, limit=10)  # a read first, as every turn does
        await repos.messages.append(chat_id, {"role": "user", "content": f"message {n}"})


@pytest.mark.parametrize("databases", [1, 2], ids=["one-database", "two-databases"])
async def test_concurrent_read_then_write_transactions_all_commit(tmp_path: Path, databases: int) -> None:
    url = f"sqlite:///{tmp_path / 'writers.db'}"
    dbs = [Database(url) for _ in range(databases)]
    for db in dbs:
        await db.start()
    try:
        async with dbs[0].session() as session:
            repos = Repositories(session)
            bot = await repos.bots.create(name="b")
            chats = [(await repos.chats.create(bot_id=bot.id)).id for _ in range(WRITERS)]
        jobs = [read_then_write(dbs[n % databases], chats[n % WRITERS], n) for n in range(WRITERS * ROUNDS)]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        assert [r for r in results if r is not None] == []
        async with dbs[-1].session(write=False) as session:
            counts = [await Repositories(session).messages.count(c) for c in chats]
        assert counts == [ROUNDS] * WRITERS
    finally:
        for db in dbs:
            await db.close()


async def test_a_sqlite_file_is_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wal.db'}", sqlite_busy_timeout=12.5)
    await db.start()
    try:
        async with db.engine.connect() as connection:
            assert (await connection.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await connection.exec_driver_sql("PRAGMA busy_timeout")).scalar() == 12500
    finally:
        await db.close()
