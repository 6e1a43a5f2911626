"""Memories of a bot (P4), optionally tied to one of its chats. Returns ``MemoryRow`` objects."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue, NotFound
from ..tables import BotRow, ChatRow, MemoryRow
from ._common import execute_rowcount, text_value


class MemoryRepository:
    """Store, list and delete memories."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(self, *, bot_id: str, content: str, chat_id: str | None = None) -> MemoryRow:
        """A bot-wide memory, or one of ``chat_id`` (which must be a chat of this bot)."""
        content = text_value("content", content, required=True)
        if await self.session.get(BotRow, bot_id) is None:
            raise NotFound("bot", bot_id)
        if chat_id is not None:
            chat = await self.session.get(ChatRow, chat_id)
            if chat is None:
                raise NotFound("chat", chat_id)
            if chat.bot_id != bot_id:
                raise InvalidValue("chat_id", "the chat belongs to another bot")
        row = MemoryRow(bot_id=bot_id, chat_id=chat_id, content=content)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, memory_id: str) -> MemoryRow | None:
        return await self.session.get(MemoryRow, memory_id)

    async def list_for_bot(self, bot_id: str, chat_id: str | None = None) -> Sequence[MemoryRow]:
        """Oldest first. Without ``chat_id``: all the bot's memories. With it: the bot-wide ones plus
        that chat's (what a turn in that chat may retrieve)."""
        query = select(MemoryRow).where(MemoryRow.bot_id == bot_id)
        if chat_id is not None:
            query = query.where(or_(MemoryRow.chat_id.is_(None), MemoryRow.chat_id == chat_id))
        query = query.order_by(MemoryRow.created_at, MemoryRow.id)
        return (await self.session.scalars(query)).all()

    async def update(self, memory_id: str, *, content: str) -> MemoryRow | None:
        row = await self.get(memory_id)
        if row is None:
            return None
        row.content = text_value("content", content, required=True)
        await self.session.flush()
        return row

    async def delete(self, memory_id: str) -> bool:
        return await execute_rowcount(self.session, delete(MemoryRow).where(MemoryRow.id == memory_id)) > 0
