"""The chat's turn lease (N5): one generation at a time per chat, across processes and instances.

The lease is a conditional UPDATE on the chat row (``turn_owner``, ``turn_until``), so it holds on SQLite
and PostgreSQL alike and whichever process runs the turn. Its holder renews it while the turn runs; a
holder that died stops renewing and the lease expires after its TTL.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..tables import ChatRow
from ..types import utcnow
from ._common import execute_rowcount


class TurnRepository:
    """Take, renew and release a chat's turn lease."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def acquire(self, chat_id: str, owner: str, ttl: timedelta) -> bool:
        """Take the lease if it is free or expired; True when ``owner`` now holds it."""
        now = utcnow()
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id, or_(ChatRow.turn_until.is_(None), ChatRow.turn_until < now))
            .values(turn_owner=owner, turn_until=now + ttl, updated_at=ChatRow.updated_at)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    async def renew(self, chat_id: str, owner: str, ttl: timedelta) -> bool:
        """Extend ``owner``'s lease; False when it no longer holds it."""
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id, ChatRow.turn_owner == owner)
            .values(turn_until=utcnow() + ttl, updated_at=ChatRow.updated_at)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    async def release(self, chat_id: str, owner: str) -> None:
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id, ChatRow.turn_owner == owner)
            .values(turn_owner=None, turn_until=None, updated_at=ChatRow.updated_at)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(statement)

    async def holder(self, chat_id: str) -> str | None:
        """The owner of a lease that has not expired, or None."""
        row = (
            await self.session.execute(select(ChatRow.turn_owner, ChatRow.turn_until).where(ChatRow.id == chat_id))
        ).one_or_none()
        if row is None or row[0] is None or row[1] is None or row[1] < utcnow():
            return None
        return str(row[0])
