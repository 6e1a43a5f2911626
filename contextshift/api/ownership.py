"""Ownership (N2): a bot, lorebook or chat (and what hangs off it: messages, memories, audits, previews,
compaction logs, summaries, status) is its owner's alone. Another user's answers ``<RESOURCE>_NOT_FOUND``,
exactly as if it did not exist, whoever asks, admins included; lists show only the caller's own.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..service.errors import not_found
from ..storage import Database, Repositories
from ..storage.tables import BotRow, ChatRow, LorebookRow
from .auth import Principal


async def own_bot(repos: Repositories, principal: Principal, bot_id: str) -> BotRow:
    row = await repos.bots.get(bot_id)
    if row is None or row.owner_id != principal.user_id:
        raise not_found("bot", bot_id)
    return row


async def own_chat(repos: Repositories, principal: Principal, chat_id: str) -> ChatRow:
    row = await repos.chats.get(chat_id)
    if row is None or row.owner_id != principal.user_id:
        raise not_found("chat", chat_id)
    return row


async def own_lorebook(repos: Repositories, principal: Principal, lorebook_id: str) -> LorebookRow:
    row = await repos.lorebooks.get(lorebook_id)
    if row is None or row.owner_id != principal.user_id:
        raise not_found("lorebook", lorebook_id)
    return row


async def own_lorebooks(repos: Repositories, principal: Principal, lorebook_ids: Iterable[str] | None) -> None:
    for lorebook_id in lorebook_ids or ():
        await own_lorebook(repos, principal, lorebook_id)


async def check_chat(db: Database, principal: Principal, chat_id: str) -> None:
    """:func:`own_chat` in a short session of its own, for routes that hand the chat id to a service."""
    async with db.session() as session:
        await own_chat(Repositories(session), principal, chat_id)


async def check_bot(db: Database, principal: Principal, bot_id: str) -> None:
    async with db.session() as session:
        await own_bot(Repositories(session), principal, bot_id)
