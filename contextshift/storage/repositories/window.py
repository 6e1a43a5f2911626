"""The recent window of a chat (T4, and "a turn's cost does not grow with the length of the chat").

:func:`recent_window` reads a chat newest-first, one page at a time, and stops as soon as the stored
token counts of what it has read exceed the budget. Counts are the counts of each message's ``text``
under one tokenizer profile, computed once and stored in ``message_tokens``. They leave out per-message
framing and media costs, so they never overstate a message, and messages the user excluded
(``meta.manualExcluded``) do not use up the budget: the window always holds at least every message that
could fit, and shifting then decides exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, and_, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.messages import Message
from ..tables import MessageRow, MessageTokensRow
from ._common import dialect_insert, integer, text_value
from .convert import row_to_message

#: Pages start at ``FIRST_PAGE_SIZE`` rows and double up to the ``page_size`` given (default below), so
#: a short window reads few extra rows and a long one needs few round trips.
FIRST_PAGE_SIZE = 32
DEFAULT_PAGE_SIZE = 512
_INSERT_CHUNK = 500
#: The meta flag of a message the user excluded from prompts (V1); it is returned but costs no budget.
MANUAL_EXCLUDED = "manualExcluded"


@dataclass(frozen=True, slots=True)
class RecentWindow:
    """What a turn needs of a chat's history."""

    #: The window, oldest first: the newest messages down to the one that crossed the budget (extended
    #: back over tool results to the message that made the call), plus every older pinned message.
    rows: list[MessageRow]
    #: Message id → stored token count (for the profile) of every row.
    tokens: dict[str, int] = field(default_factory=dict)
    #: True when older messages exist that are not in ``rows``.
    has_more: bool = False
    #: How many message rows were read from the database.
    rows_read: int = 0
    #: How many counts were computed (not found stored) by this call.
    counted: int = 0

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())

    def messages(self) -> list[Message]:
        """The rows as core messages (id = row id, source ``history``)."""
        return [row_to_message(r) for r in self.rows]


async def count_before(session: AsyncSession, chat_id: str, seq: int) -> int:
    """How many of the chat's shown messages are older than ``seq`` (one count over the chat's
    ``(chat_id, seq)`` index): a page's first position is this plus one. Parked branch messages are not rows
    of the chat, so they are not counted; pinned and summarized ones are."""
    query = select(func.count()).select_from(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.seq < seq)
    return int((await session.execute(query)).scalar_one())


async def token_counts(
    session: AsyncSession,
    rows: Sequence[MessageRow],
    profile: str,
    count_fn: Callable[[str], int],
    *,
    store: bool = True,
) -> tuple[dict[str, int], int]:
    """Stored counts of ``rows`` for ``profile``; the missing ones are computed with ``count_fn`` and,
    with ``store``, saved in one bulk insert. Returns ``(counts by message id, how many were computed)``."""
    if not rows:
        return {}, 0
    ids = [r.id for r in rows]
    query = select(MessageTokensRow.message_id, MessageTokensRow.tokens).where(
        MessageTokensRow.profile == profile, MessageTokensRow.message_id.in_(ids)
    )
    counts: dict[str, int] = {m: int(t) for m, t in (await session.execute(query)).all()}
    missing = await _count_missing(session, rows, counts, profile, count_fn, store=store)
    return counts, missing


async def _count_missing(
    session: AsyncSession,
    rows: Sequence[MessageRow],
    counts: dict[str, int],
    profile: str,
    count_fn: Callable[[str], int],
    *,
    store: bool,
) -> int:
    """Add to ``counts`` the rows it lacks, computed with ``count_fn`` (and stored with ``store``); how many."""
    new: list[dict[str, object]] = []
    for row in rows:
        if row.id in counts:
            continue
        tokens = count_fn(row_to_message(row).text)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"count_fn returned {tokens!r}, not a token count")
        counts[row.id] = tokens
        new.append({"message_id": row.id, "profile": profile, "tokens": tokens})
    if store and new:
        insert = dialect_insert(session)
        for start in range(0, len(new), _INSERT_CHUNK):
            statement = insert(MessageTokensRow).values(new[start : start + _INSERT_CHUNK])
            await session.execute(statement.on_conflict_do_nothing(index_elements=["message_id", "profile"]))
    return len(new)


async def _page(
    session: AsyncSession, query: Select[Any], profile: str, count_fn: Callable[[str], int], *, store: bool
) -> tuple[list[MessageRow], dict[str, int], int]:
    """The rows of ``query`` (over ``MessageRow``) with their stored counts for ``profile``, read in the same
    statement (an outer join on ``message_tokens``' key), and the missing ones computed: ``(rows, counts by
    id, how many were computed)``."""
    stored = and_(MessageTokensRow.message_id == MessageRow.id, MessageTokensRow.profile == profile)
    pairs = (
        await session.execute(query.add_columns(MessageTokensRow.tokens).outerjoin(MessageTokensRow, stored))
    ).all()
    rows = [row for row, _ in pairs]
    counts = {row.id: int(tokens) for row, tokens in pairs if tokens is not None}
    computed = await _count_missing(session, rows, counts, profile, count_fn, store=store)
    return rows, counts, computed


async def recent_window(
    session: AsyncSession,
    chat_id: str,
    profile: str,
    budget_tokens: int,
    count_fn: Callable[[str], int],
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    store_counts: bool = True,
    before_seq: int | None = None,
    first_page: int | None = None,
) -> RecentWindow:
    """Read the newest messages of a chat until their token counts exceed ``budget_tokens``.

    Pages (growing from ``FIRST_PAGE_SIZE`` to ``page_size`` rows) are read newest-first; the missing
    counts of a page are computed with ``count_fn(text)`` and stored in bulk (not with
    ``store_counts=False``, e.g. for a preview that must change nothing). Pinned messages older than
    the window are always added. Messages a compaction summary covers are left out unless pinned: pinning
    a summarized message brings it back raw (the summary still stands for the rest). Rows come back
    oldest first. With ``before_seq``, the history ends before that message. ``first_page`` (at most
    ``page_size``) sizes the first page instead of :data:`FIRST_PAGE_SIZE`: the size of this chat's last window
    reads it in one round trip. Page sizes change how many rows are read, never which ones are returned.
    """
    text_value("profile", profile, required=True, max_length=100)
    budget = integer("budget_tokens", budget_tokens)
    max_page = integer("page_size", page_size, minimum=1)
    size = min(FIRST_PAGE_SIZE if first_page is None else integer("first_page", first_page, minimum=1), max_page)
    window: list[MessageRow] = []
    tokens: dict[str, int] = {}
    computed = rows_read = used = 0
    stopped = False
    before: int | None = None if before_seq is None else integer("before_seq", before_seq)
    while not stopped:
        # Messages a compaction summary stands for are not history any more, unless the user pinned them.
        raw = or_(MessageRow.summary_id.is_(None), MessageRow.pinned == true())
        query = select(MessageRow).where(MessageRow.chat_id == chat_id, raw)
        if before is not None:
            query = query.where(MessageRow.seq < before)
        page, counts, n = await _page(
            session, query.order_by(MessageRow.seq.desc()).limit(size), profile, count_fn, store=store_counts
        )
        rows_read += len(page)
        if not page:
            break
        computed += n
        for row in page:
            window.append(row)
            tokens[row.id] = counts[row.id]
            if not (row.meta or {}).get(MANUAL_EXCLUDED):
                used += counts[row.id]
            if used > budget and row.role != "tool":
                stopped = True
                break
        if len(page) < size:
            break
        before = page[-1].seq
        size = min(size * 2, max_page)
    has_more = False
    if stopped:
        oldest = window[-1].seq
        older = (MessageRow.chat_id == chat_id, MessageRow.seq < oldest)  # before the window: before before_seq
        pinned_query = select(MessageRow).where(*older, MessageRow.pinned == true()).order_by(MessageRow.seq)
        pinned, counts, n = await _page(session, pinned_query, profile, count_fn, store=store_counts)
        rows_read += len(pinned)
        computed += n
        tokens.update(counts)
        # The newest raw message before the window, found through (chat_id, summary_id, seq): never a scan.
        unpinned_left = (
            select(MessageRow.seq)
            .where(*older, MessageRow.summary_id.is_(None), MessageRow.pinned != true())
            .order_by(MessageRow.summary_id.desc(), MessageRow.seq.desc())
            .limit(1)
        )
        has_more = (await session.execute(unpinned_left)).first() is not None
        window.extend(pinned)
    window.sort(key=lambda r: r.seq)
    return RecentWindow(rows=window, tokens=tokens, has_more=has_more, rows_read=rows_read, counted=computed)


__all__ = ["DEFAULT_PAGE_SIZE", "FIRST_PAGE_SIZE", "MANUAL_EXCLUDED", "RecentWindow", "recent_window", "token_counts"]
