"""Chat messages: append (with seq and ``history_version``), read in pages, pin, annotate, delete.

Returns ``MessageRow`` objects; :func:`row_to_message` turns one into a core ``Message`` (id = row id,
source ``history``). Every history edit (append, patch, delete) bumps the chat's ``history_version``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.messages import MessageLike
from ..errors import InvalidValue, NotFound
from ..tables import ChatRow, MessageRow
from ..types import new_id, utcnow
from ._common import boolean, execute_rowcount, integer, json_object
from .convert import check_json, merge_meta, message_values, row_to_message
from .window import DEFAULT_PAGE_SIZE, RecentWindow, recent_window

__all__ = ["MessagePage", "MessageRepository", "merge_meta", "message_values", "row_to_message"]


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a chat, newest first; the next page is ``list_page(before_seq=rows[-1].seq)``."""

    rows: list[MessageRow]
    has_more: bool


class MessageRepository:
    """A chat's messages."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _bump(self, chat_id: str, *, new_messages: int = 0) -> tuple[int, int]:
        """Bump ``history_version`` (and reserve ``new_messages`` seqs) in one UPDATE; returns
        ``(last_seq, history_version)``. Locks the chat row, so appends in one chat run one at a time."""
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id)
            .values(
                last_seq=ChatRow.last_seq + new_messages,
                history_version=ChatRow.history_version + max(new_messages, 1),
                updated_at=utcnow(),
            )
            .returning(ChatRow.last_seq, ChatRow.history_version)
        )
        row = (await self.session.execute(statement)).one_or_none()
        if row is None:
            raise NotFound("chat", chat_id)
        return int(row[0]), int(row[1])

    async def append(self, chat_id: str, message: MessageLike) -> MessageRow:
        """Store a message at the end of the chat (``CHAT_NOT_FOUND`` if there is no such chat)."""
        return (await self.append_many(chat_id, [message]))[0]

    async def append_many(self, chat_id: str, messages: Iterable[MessageLike]) -> list[MessageRow]:
        """Store several messages at the end of the chat, in order, with consecutive seqs."""
        values = [message_values(m) for m in messages]
        if not values:
            return []
        last_seq, _ = await self._bump(chat_id, new_messages=len(values))
        first = last_seq - len(values) + 1
        now = utcnow()
        params = [
            {"id": new_id(), "chat_id": chat_id, "seq": first + i, "created_at": now, **v} for i, v in enumerate(values)
        ]
        inserted = await self.session.scalars(
            insert(MessageRow).returning(MessageRow, sort_by_parameter_order=True), params
        )
        return list(inserted)

    async def get(self, message_id: str, chat_id: str | None = None) -> MessageRow | None:
        """The message, or None (also when it belongs to a chat other than ``chat_id``)."""
        row = await self.session.get(MessageRow, message_id)
        if row is None or (chat_id is not None and row.chat_id != chat_id):
            return None
        return row

    async def patch(self, chat_id: str, message_id: str, changes: Mapping[str, Any]) -> MessageRow | None:
        """Change ``pinned`` and/or merge ``meta`` (see :func:`merge_meta`; e.g. ``{"manualExcluded": true}``)."""
        if not isinstance(changes, Mapping):
            raise InvalidValue("changes", "must be an object")
        unknown = sorted(set(changes) - {"pinned", "meta"})
        if unknown:
            raise InvalidValue(unknown[0], "is not a field that can be changed")
        pinned = boolean("pinned", changes["pinned"]) if "pinned" in changes else None
        meta_patch = json_object("meta", changes["meta"]) if "meta" in changes else None
        if meta_patch is not None:
            check_json("meta", meta_patch)
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        if not changes:
            return row
        if pinned is not None:
            row.pinned = pinned
        if meta_patch is not None:
            row.meta = merge_meta(row.meta or {}, meta_patch)
        await self._bump(chat_id)
        await self.session.flush()
        return row

    async def delete(self, chat_id: str, message_id: str) -> bool:
        """Delete one message of the chat (its seq is not reused)."""
        statement = delete(MessageRow).where(MessageRow.id == message_id, MessageRow.chat_id == chat_id)
        if await execute_rowcount(self.session, statement) == 0:
            return False
        await self._bump(chat_id)
        return True

    async def list_page(self, chat_id: str, before_seq: int | None = None, limit: int = 50) -> MessagePage:
        """Up to ``limit`` messages older than ``before_seq`` (default: the newest), newest first."""
        limit = integer("limit", limit, minimum=1)
        query = select(MessageRow).where(MessageRow.chat_id == chat_id)
        if before_seq is not None:
            query = query.where(MessageRow.seq < integer("before_seq", before_seq))
        rows = list(await self.session.scalars(query.order_by(MessageRow.seq.desc()).limit(limit + 1)))
        return MessagePage(rows=rows[:limit], has_more=len(rows) > limit)

    async def chronological(self, chat_id: str) -> Sequence[MessageRow]:
        """Every message of the chat, oldest first. Reads the whole history: not for generation turns."""
        query = select(MessageRow).where(MessageRow.chat_id == chat_id).order_by(MessageRow.seq)
        return (await self.session.scalars(query)).all()

    async def pinned(self, chat_id: str) -> Sequence[MessageRow]:
        """The chat's pinned messages, oldest first."""
        query = select(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.pinned == true())
        return (await self.session.scalars(query.order_by(MessageRow.seq))).all()

    async def count(self, chat_id: str) -> int:
        query = select(func.count()).select_from(MessageRow).where(MessageRow.chat_id == chat_id)
        return int((await self.session.execute(query)).scalar_one())

    async def recent_window(
        self,
        chat_id: str,
        profile: str,
        budget_tokens: int,
        count_fn: Callable[[str], int],
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        store_counts: bool = True,
    ) -> RecentWindow:
        """The newest messages worth ``budget_tokens`` plus every pinned one; see :func:`.window.recent_window`."""
        return await recent_window(
            self.session,
            chat_id,
            profile,
            budget_tokens,
            count_fn,
            page_size=page_size,
            store_counts=store_counts,
        )
