"""Chats (sessions) of a bot. Returns ``ChatRow`` objects; messages live in ``messages.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue, NotFound
from ..tables import CHAT_TYPES, BotRow, ChatRow, ModelRow
from ._common import Validator, apply_changes, choice, execute_rowcount, integer, text_value


def _model_id(field: str, value: Any) -> str | None:
    return None if value is None else text_value(field, value, required=True, max_length=32)


_CHAT_FIELDS: dict[str, Validator] = {
    "title": partial(text_value, max_length=500),
    "model_id": _model_id,
}


class ChatRepository:
    """Create, read, retitle and delete chats."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(self, *, bot_id: str, type: str = "chat", title: str = "") -> ChatRow:
        """Raises ``NotFound`` (``BOT_NOT_FOUND``) when the bot does not exist. The chat belongs to the bot's owner."""
        chat_type = choice("type", type, CHAT_TYPES)
        title = text_value("title", title, max_length=500)
        bot = await self.session.get(BotRow, bot_id)
        if bot is None:
            raise NotFound("bot", bot_id)
        row = ChatRow(bot_id=bot_id, owner_id=bot.owner_id, type=chat_type, title=title, history_version=0, last_seq=0)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, chat_id: str) -> ChatRow | None:
        return await self.session.get(ChatRow, chat_id)

    async def require(self, chat_id: str) -> ChatRow:
        """The chat, or ``NotFound`` (``CHAT_NOT_FOUND``)."""
        row = await self.get(chat_id)
        if row is None:
            raise NotFound("chat", chat_id)
        return row

    async def list_all(
        self,
        *,
        bot_id: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        owner_id: str | None = None,
    ) -> Sequence[ChatRow]:
        """Chats, most recently updated first; only one bot's with ``bot_id``, one user's with ``owner_id``."""
        query = select(ChatRow).order_by(ChatRow.updated_at.desc(), ChatRow.id)
        if owner_id is not None:
            query = query.where(ChatRow.owner_id == owner_id)
        if bot_id is not None:
            query = query.where(ChatRow.bot_id == bot_id)
        if limit is not None:
            query = query.limit(integer("limit", limit, minimum=1))
        if offset:
            query = query.offset(integer("offset", offset, minimum=0))
        return (await self.session.scalars(query)).all()

    async def update(self, chat_id: str, changes: Mapping[str, Any]) -> ChatRow | None:
        """Set the given fields (``title``; ``model_id``: a chat model of the chat's own, or null for the bot's)."""
        row = await self.get(chat_id)
        if row is None:
            return None
        model_id = changes.get("model_id")
        if model_id is not None:
            model = await self.session.get(ModelRow, _model_id("model_id", model_id))
            if model is None:
                raise NotFound("model", model_id)
            if model.type != "chat":
                raise InvalidValue("model_id", f"model {model_id!r} is a {model.type} model, not a chat model")
        apply_changes(row, changes, _CHAT_FIELDS)
        await self.session.flush()
        return row

    async def delete(self, chat_id: str) -> bool:
        """Delete a chat with its messages, token counts, memories and audit (foreign-key cascade)."""
        return await execute_rowcount(self.session, delete(ChatRow).where(ChatRow.id == chat_id)) > 0
