"""Compaction storage (C8, C10, C12, C14): summaries, the per-chat lease, logs and usage totals.

A summary is committed in one transaction, and only if the chat's ``history_version`` is still the one the
pass started from: an edit during the pass (new message, pin, delete) makes the commit return ``None``
instead of storing a stale summary. Raw messages are never deleted; they point at the summary that
stands for them. The lease is a conditional UPDATE on the chat row, so one pass runs per chat at a time
across every process sharing the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.vocabulary import RUNNING
from ..tables import ChatRow, CompactionLogRow, MessageRow, SummaryRow
from ..types import new_id, utcnow
from ._common import execute_rowcount
from .messages import add_counts, counted

_CHUNK = 500


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class CompactionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # -- the lease (C10) ----------------------------------------------------------------------------------

    async def acquire_lease(self, chat_id: str, owner: str, ttl: timedelta) -> bool:
        """Take the chat's compaction lease if it is free or expired; True when this caller holds it."""
        now = utcnow()
        statement = (
            update(ChatRow)
            .where(
                ChatRow.id == chat_id,
                or_(ChatRow.compaction_lease_until.is_(None), ChatRow.compaction_lease_until < now),
            )
            .values(compaction_lease_owner=owner, compaction_lease_until=now + ttl)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    async def release_lease(self, chat_id: str, owner: str) -> None:
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id, ChatRow.compaction_lease_owner == owner)
            .values(compaction_lease_owner=None, compaction_lease_until=None)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(statement)

    async def lease_busy(self, chat_id: str) -> bool:
        until = await self.session.scalar(select(ChatRow.compaction_lease_until).where(ChatRow.id == chat_id))
        return until is not None and until > utcnow()

    async def set_failed_at(self, chat_id: str, when: datetime | None) -> None:
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id)
            .values(compaction_failed_at=when)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(statement)

    # -- history and summaries ----------------------------------------------------------------------------

    async def history_version(self, chat_id: str) -> int | None:
        value = await self.session.scalar(select(ChatRow.history_version).where(ChatRow.id == chat_id))
        return None if value is None else int(value)

    async def unsummarized(
        self, chat_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[MessageRow]:
        """The raw messages no summary stands for, oldest first (after ``after_seq``, at most ``limit``: one
        page, read through the (chat_id, summary_id, seq) index)."""
        query = select(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.summary_id.is_(None))
        if after_seq is not None:
            query = query.where(MessageRow.seq > after_seq)
        query = query.order_by(MessageRow.seq)
        if limit is not None:
            query = query.limit(limit)
        return list(await self.session.scalars(query))

    async def covered(self, chat_id: str, message_ids: Sequence[str]) -> list[MessageRow]:
        """The given messages of the chat (those a summary stands for), oldest first."""
        rows: list[MessageRow] = []
        for chunk in _chunks(list(message_ids)):
            query = select(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.id.in_(chunk))
            rows.extend(await self.session.scalars(query))
        return sorted(rows, key=lambda r: r.seq)

    async def active_summaries(self, chat_id: str) -> list[SummaryRow]:
        query = (
            select(SummaryRow)
            .where(SummaryRow.chat_id == chat_id, SummaryRow.superseded_by.is_(None))
            .order_by(SummaryRow.anchor_seq)
        )
        return list(await self.session.scalars(query))

    async def summary_count(self, chat_id: str) -> int:
        query = select(func.count()).select_from(SummaryRow).where(SummaryRow.chat_id == chat_id)
        return int(await self.session.scalar(query) or 0)

    async def commit_summary(
        self,
        chat_id: str,
        expected_version: int,
        *,
        content: str,
        covers: Sequence[str],
        supersedes: Sequence[str] = (),
        workspaces: Sequence[str] = (),
        model: str | None = None,
        raw: Mapping[str, int] | None = None,
    ) -> SummaryRow | None:
        """Store a summary for ``covers`` (raw ids) rolling up ``supersedes``; None if history changed.

        ``raw`` (id → seq) names the covered messages no superseded summary stood for, as the caller read
        them: the write then finds them by seq range (a pass folds a run of neighbours) instead of looking
        every covered id up, and the rows of superseded summaries move through ``summary_id`` alone."""
        unchanged = (
            update(ChatRow)
            .where(ChatRow.id == chat_id, ChatRow.history_version == expected_version)
            .values(history_version=ChatRow.history_version)  # locks the row; changes nothing
            .execution_options(synchronize_session=False)
        )
        if await execute_rowcount(self.session, unchanged) != 1:
            return None
        raw_ids = list(covers)
        if raw is None:
            anchors = await self._raw_anchors(chat_id, raw_ids)
        else:
            anchors = [min(raw.values())] if raw else []
        for chunk in _chunks(list(supersedes)):
            low = await self.session.scalar(select(func.min(SummaryRow.anchor_seq)).where(SummaryRow.id.in_(chunk)))
            if low is not None:
                anchors.append(int(low))
        summary = SummaryRow(
            id=new_id(),
            chat_id=chat_id,
            content=content,
            covers=raw_ids,
            workspaces=list(workspaces),
            anchor_seq=min(anchors) if anchors else 0,
            model=model,
        )
        self.session.add(summary)
        await self.session.flush()
        if raw is None:
            folded = await self._mark(chat_id, summary.id, raw_ids, None)
        else:
            span = (min(raw.values()), max(raw.values())) if raw else (0, -1)
            folded = await self._mark(chat_id, summary.id, list(raw), span)
        for chunk in _chunks(list(supersedes)):
            await self.session.execute(
                update(MessageRow)
                .where(MessageRow.chat_id == chat_id, MessageRow.summary_id.in_(chunk))
                .values(summary_id=summary.id)
                .execution_options(synchronize_session=False)
            )
            await self.session.execute(
                update(SummaryRow)
                .where(SummaryRow.chat_id == chat_id, SummaryRow.id.in_(chunk))
                .values(superseded_by=summary.id)
                .execution_options(synchronize_session=False)
            )
        if folded != (0, 0):  # rows moved from a superseded summary stay summarized: only raw ones count
            await add_counts(self.session, chat_id, folded)
        return summary

    async def _raw_anchors(self, chat_id: str, ids: Sequence[str]) -> list[int]:
        """The lowest seq of each chunk of ``ids`` (messages of the chat)."""
        anchors: list[int] = []
        for chunk in _chunks(ids):
            low = await self.session.scalar(
                select(func.min(MessageRow.seq)).where(MessageRow.chat_id == chat_id, MessageRow.id.in_(chunk))
            )
            if low is not None:
                anchors.append(int(low))
        return anchors

    async def _mark(
        self, chat_id: str, summary_id: str, ids: Sequence[str], span: tuple[int, int] | None
    ) -> tuple[int, int]:
        """Point the chat's messages ``ids`` (within the seq ``span`` when given) at the summary; returns what
        that adds to the chat's maintained counts."""
        folded = (0, 0)
        for chunk in _chunks(ids):
            where = [MessageRow.chat_id == chat_id, MessageRow.id.in_(chunk)]
            if span is not None:  # through (chat_id, seq): never every message of the chat
                where += [MessageRow.seq >= span[0], MessageRow.seq <= span[1]]
            was = await self.session.execute(
                select(MessageRow.pinned, MessageRow.standing, MessageRow.summary_id).where(*where)
            )
            for pinned, standing, before_id in was.all():
                before = counted(bool(pinned), bool(standing), before_id)
                after = counted(bool(pinned), bool(standing), summary_id)
                folded = (folded[0] + after[0] - before[0], folded[1] + after[1] - before[1])
            await self.session.execute(
                update(MessageRow)
                .where(*where)
                .values(summary_id=summary_id)
                .execution_options(synchronize_session=False)
            )
        return folded

    # -- logs (C12) ---------------------------------------------------------------------------------------

    async def start_log(self, *, bot_id: str, chat_id: str, trigger: str, model: str | None) -> CompactionLogRow:
        row = CompactionLogRow(
            bot_id=bot_id,
            chat_id=chat_id,
            trigger=trigger,
            status=RUNNING,
            model=model,
            instance_id=self.session.info.get("instance_id"),  # N5: closed as interrupted if this instance dies
        )
        self.session.add(row)
        await self.session.flush()
        return row

    async def finish_log(self, log_id: str, **values: Any) -> None:
        values.setdefault("completed_at", utcnow())
        await self.session.execute(
            update(CompactionLogRow)
            .where(CompactionLogRow.id == log_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )

    async def get_log(self, log_id: str) -> CompactionLogRow | None:
        return await self.session.get(CompactionLogRow, log_id, populate_existing=True)

    async def logs(
        self, *, bot_id: str | None = None, chat_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[CompactionLogRow], bool]:
        """Newest first; ``has_more`` when older entries exist."""
        query = select(CompactionLogRow)
        if bot_id is not None:
            query = query.where(CompactionLogRow.bot_id == bot_id)
        if chat_id is not None:
            query = query.where(CompactionLogRow.chat_id == chat_id)
        query = query.order_by(CompactionLogRow.started_at.desc(), CompactionLogRow.id.desc())
        rows = list(await self.session.scalars(query.offset(offset).limit(limit + 1)))
        return rows[:limit], len(rows) > limit

    async def last_finished_log(self, chat_id: str) -> CompactionLogRow | None:
        query = (
            select(CompactionLogRow)
            .where(CompactionLogRow.chat_id == chat_id, CompactionLogRow.status != RUNNING)
            .order_by(CompactionLogRow.started_at.desc(), CompactionLogRow.id.desc())
            .limit(1)
        )
        return await self.session.scalar(query)

    # -- usage totals (C14) -------------------------------------------------------------------------------

    async def add_usage(self, chat_id: str, *, input_tokens: int, cached_tokens: int, tools: Sequence[str]) -> None:
        await self.session.execute(
            update(ChatRow)
            .where(ChatRow.id == chat_id)
            .values(
                usage_input_tokens=ChatRow.usage_input_tokens + input_tokens,
                usage_cached_tokens=ChatRow.usage_cached_tokens + cached_tokens,
            )
            .execution_options(synchronize_session=False)
        )
        if tools:
            current = await self.session.scalar(select(ChatRow.tools_used).where(ChatRow.id == chat_id))
            counts = dict(current or {})
            for name in tools:
                counts[name] = int(counts.get(name, 0)) + 1
            await self.session.execute(
                update(ChatRow)
                .where(ChatRow.id == chat_id)
                .values(tools_used=counts)
                .execution_options(synchronize_session=False)
            )
