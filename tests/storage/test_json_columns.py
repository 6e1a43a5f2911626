"""JSON columns read back exactly what was stored: orjson reads them, ``json`` what orjson would read otherwise."""

from __future__ import annotations

from typing import Any

from contextshift.storage import Database, Repositories

from .seed import seed_chat

ODD: dict[str, Any] = {
    "big": 2**70,  # past 64 bits: orjson would make it a float
    "edge": 18446744073709551615,
    "negative": -(2**65),
    "text": "plain, ünïcödé and emoji 🎉",
    "nested": {"list": [1, 2.5, None, True, "x"], "empty": {}},
    "digits in text": "order 12345678901234567890 shipped",
}


async def test_odd_values_in_a_message_meta_read_back_unchanged(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    odd = dict(ODD)
    if str(db.url).startswith("sqlite"):  # PostgreSQL refuses a lone surrogate in JSON; SQLite keeps it
        odd["surrogate"] = "a\ud800b"  # orjson reads none: json does
    async with db.session() as session:
        row = await Repositories(session).messages.append(chat_id, {"role": "user", "content": "hi", "meta": odd})
        message_id = row.id
    async with db.session() as session:
        stored = await Repositories(session).messages.get(message_id)
        assert stored is not None
        meta = dict(stored.meta)
    assert meta == odd
    assert type(meta["big"]) is int and type(meta["edge"]) is int


async def test_plain_content_and_tool_calls_read_back_unchanged(db: Database) -> None:
    chat_id = (await seed_chat(db)).chat_id
    calls = [{"id": "t1", "type": "function", "function": {"name": "look", "arguments": '{"q": "x"}'}}]
    async with db.session() as session:
        row = await Repositories(session).messages.append(
            chat_id, {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "tool_calls": calls}
        )
        message_id = row.id
    async with db.session() as session:
        stored = await Repositories(session).messages.get(message_id)
        assert stored is not None
        assert stored.content == [{"type": "text", "text": "ok"}] and stored.tool_calls == calls
