"""recent_window's ``first_page``: a turn that knows its chat's last window reads it in one page, and the window
it gets is the one the default pages give (page sizes change how many rows are read, never which)."""

from __future__ import annotations

from sqlalchemy import event

from contextshift.storage import Database, Repositories

from .seed import seed_chat
from .test_recent_window import Counter

CHAT = 2_000


async def _chat(db: Database) -> str:
    seeded = await seed_chat(db)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} has five words", "pinned": i == 7}
        for i in range(CHAT)
    ]
    async with db.session() as session:
        await Repositories(session).messages.append_many(seeded.chat_id, messages)
    return seeded.chat_id


async def _read(db: Database, chat_id: str, first_page: int | None) -> tuple[list[int], dict[str, int], bool, int]:
    statements: list[str] = []

    def record(_c: object, _k: object, statement: str, _p: object, _x: object, _m: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    try:
        async with db.session() as session:
            window = await Repositories(session).messages.recent_window(
                chat_id, "words", 1_000, Counter(), first_page=first_page
            )
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)
    return [r.seq for r in window.rows], window.tokens, window.has_more, len(statements)


async def test_a_first_page_of_the_last_windows_size_reads_the_same_window_in_one_page(db: Database) -> None:
    chat_id = await _chat(db)
    seqs, tokens, has_more, default_selects = await _read(db, chat_id, None)
    assert len(seqs) == 202 and seqs[0] == 8 and has_more  # the pinned message, then the newest 201
    hinted = await _read(db, chat_id, len(seqs) + 8)
    assert hinted[:3] == (seqs, tokens, has_more)
    # pages of 32, 64 and 128 against one page (a statement each), plus the pinned and older-history reads
    assert (default_selects, hinted[3]) == (5, 3)
