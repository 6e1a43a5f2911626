"""Bots: prompt settings, the chat model and the lorebooks a bot uses. Returns ``BotRow`` objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.limits import RESPONSE_RESERVE_MAX, RESPONSE_RESERVE_MIN, ratio_ok
from ..errors import InvalidValue, NotFound
from ..tables import BotRow, ModelRow
from ._common import (
    Validator,
    apply_changes,
    boolean,
    execute_rowcount,
    integer,
    optional_positive,
    optional_text,
    string_list,
    text_value,
)
from .users import default_owner


def _model_id(field: str, value: Any) -> str | None:
    return None if value is None else text_value(field, value, required=True)


def _template(field: str, value: Any) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise InvalidValue(field, "must be a list of blocks or null")
    return list(value)


def _ratio(field: str, value: Any) -> float:
    if not ratio_ok(value):
        raise InvalidValue(field, "must be a number between 0 and 1 (exclusive)")
    return float(value)


_BOT_FIELDS: dict[str, Validator] = {
    "name": partial(text_value, required=True, max_length=200),
    "chat_model_id": _model_id,
    "system_prompt": text_value,
    "persona": text_value,
    "context_strategy": partial(text_value, required=True, max_length=100),
    "response_reserve": partial(integer, minimum=RESPONSE_RESERVE_MIN, maximum=RESPONSE_RESERVE_MAX),
    "context_limit": optional_positive,
    "lorebook_ids": string_list,
    "template": _template,
    "author_note": optional_text,
    "author_note_depth": partial(integer, minimum=0),
    "compaction_enabled": boolean,
    "compaction_threshold": partial(integer, minimum=0),
    "compaction_ratio": _ratio,
    "compaction_model_id": _model_id,
}

#: What a new bot gets for every field not given to ``create``.
BOT_DEFAULTS: dict[str, Any] = {
    "chat_model_id": None,
    "system_prompt": "",
    "persona": "",
    "context_strategy": "truncate",
    "response_reserve": 0,  # not set: the turn takes limits.reply_reserve's default
    "context_limit": None,
    "lorebook_ids": [],
    "template": None,
    "author_note": None,
    "author_note_depth": 4,
    "compaction_enabled": True,
    "compaction_threshold": 0,
    "compaction_ratio": 0.5,
    "compaction_model_id": None,
}


class BotRepository:
    """CRUD for bots. ``chat_model_id`` must name an existing model of type ``chat`` (or be null)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _check_model(self, fields: Mapping[str, Any]) -> None:
        summarizer_id = fields.get("compaction_model_id")
        if summarizer_id is not None and await self.session.get(ModelRow, summarizer_id) is None:
            raise NotFound("model", summarizer_id)
        model_id = fields.get("chat_model_id")
        if model_id is None:
            return
        model = await self.session.get(ModelRow, _model_id("chat_model_id", model_id))
        if model is None:
            raise NotFound("model", model_id)
        if model.type != "chat":
            raise InvalidValue("chat_model_id", f"model {model_id!r} is a {model.type} model, not a chat model")

    async def create(self, *, name: str, owner_id: str | None = None, **fields: Any) -> BotRow:
        """Create a bot of ``owner_id`` (default: the first admin); ``fields`` are any of ``BOT_DEFAULTS``' keys
        (others raise ``InvalidValue``)."""
        values = {**BOT_DEFAULTS, **fields, "name": name}
        await self._check_model(values)
        row = BotRow(owner_id=owner_id or await default_owner(self.session))
        apply_changes(row, values, _BOT_FIELDS)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, bot_id: str) -> BotRow | None:
        return await self.session.get(BotRow, bot_id)

    async def list_all(self, *, owner_id: str | None = None) -> Sequence[BotRow]:
        """Every bot, oldest first; only one user's with ``owner_id``."""
        query = select(BotRow).order_by(BotRow.created_at, BotRow.id)
        if owner_id is not None:
            query = query.where(BotRow.owner_id == owner_id)
        return (await self.session.scalars(query)).all()

    async def update(self, bot_id: str, changes: Mapping[str, Any]) -> BotRow | None:
        """Set the given fields (``name`` and ``BOT_DEFAULTS``' keys)."""
        row = await self.get(bot_id)
        if row is None:
            return None
        await self._check_model(changes)
        apply_changes(row, changes, _BOT_FIELDS)
        await self.session.flush()
        return row

    async def delete(self, bot_id: str) -> bool:
        """Delete a bot with its chats, messages, memories and audits (foreign-key cascade)."""
        return await execute_rowcount(self.session, delete(BotRow).where(BotRow.id == bot_id)) > 0
