"""Chat messages: append (with seq and ``history_version``), read in pages, pin, annotate, delete.

Returns ``MessageRow`` objects; :func:`row_to_message` turns one into a core ``Message`` (id = row id,
source ``history``). Every history edit (append, patch, delete) bumps the chat's ``history_version``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, cast, delete, func, insert, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.messages import MessageLike
from ...core.standing import detect, superseded
from ..errors import InvalidValue, NotFound
from ..tables import ChatRow, MessageRow, MessageTokensRow
from ..types import new_id, utcnow
from ._common import boolean, integer, json_object, text_value
from .convert import check_json, merge_meta, message_values, row_to_message
from .versions import REPLY_KEYS, add_version, choose_version, extend_version, write_version
from .window import DEFAULT_PAGE_SIZE, RecentWindow, recent_window

__all__ = [
    "REPLY_KEYS",
    "MessagePage",
    "MessageRepository",
    "add_counts",
    "count_kinds",
    "counted",
    "mark_standing",
    "merge_meta",
    "message_values",
    "row_to_message",
]


def _text(content: Any) -> str:
    """The text of stored content: a string, or the ``text`` parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def counted(pinned: bool, standing: bool, summary_id: str | None) -> tuple[int, int]:
    """What one message adds to its chat's maintained counts ``(raw_messages, summarized_messages)``: raw is
    neither pinned nor summarized; summarized is a summary's, neither pinned nor standing."""
    if pinned:
        return 0, 0
    if summary_id is None:
        return 1, 0
    return 0, 0 if standing else 1


def count_kinds(rows: Iterable[Any]) -> tuple[int, int]:
    """The summed :func:`counted` of ``(pinned, standing, summary_id)`` rows."""
    raw = summarized = 0
    for pinned, standing, summary_id in rows:
        r, m = counted(bool(pinned), bool(standing), summary_id)
        raw, summarized = raw + r, summarized + m
    return raw, summarized


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a chat, newest first; the next page is ``list_page(before_seq=rows[-1].seq)``."""

    rows: list[MessageRow]
    has_more: bool


async def add_counts(session: AsyncSession, chat_id: str, counts: tuple[int, int]) -> None:
    """Add ``counts`` to the chat's maintained ``(raw_messages, summarized_messages)``."""
    await session.execute(
        update(ChatRow)
        .where(ChatRow.id == chat_id)
        .values(
            raw_messages=ChatRow.raw_messages + counts[0],
            summarized_messages=ChatRow.summarized_messages + counts[1],
        )
        .execution_options(synchronize_session=False)
    )


async def mark_standing(session: AsyncSession, chat_id: str, values: list[dict[str, Any]]) -> None:
    """G4b: flag the user's standing instructions among new messages, and clear the stored ones they
    retract or replace (the newest on a topic wins). Slash commands are never instructions."""
    ends: list[str] = []
    existing: list[tuple[str, str]] | None = None
    for value in values:
        value["standing"] = False
        if value["role"] != "user" or (value.get("meta") or {}).get("command"):
            continue
        text = _text(value.get("content"))
        found = detect(text)
        if not (found.standing or found.retracts):
            continue
        if existing is None:
            query = select(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.standing == true())
            rows = await session.scalars(query.order_by(MessageRow.seq))
            existing = [(r.id, row_to_message(r).text) for r in rows]
        gone = superseded(existing, text)
        ends += gone
        existing = [e for e in existing if e[0] not in gone]
        if found.standing:
            value["standing"] = True
    if ends:
        # A summarized message that stops standing is a summary's again.
        was = await session.execute(
            select(MessageRow.pinned, MessageRow.summary_id).where(
                MessageRow.id.in_(ends), MessageRow.standing == true()
            )
        )
        back = sum(counted(bool(p), False, s)[1] for p, s in was.all())
        await session.execute(update(MessageRow).where(MessageRow.id.in_(ends)).values(standing=False))
        if back:
            await add_counts(session, chat_id, (0, back))


class MessageRepository:
    """A chat's messages."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _bump(self, chat_id: str, *, new_messages: int = 0, counts: tuple[int, int] = (0, 0)) -> tuple[int, int]:
        """Bump ``history_version`` (and reserve ``new_messages`` seqs, and add ``counts`` to the maintained
        ``(raw_messages, summarized_messages)``) in one UPDATE; returns ``(last_seq, history_version)``. Locks
        the chat row, so appends in one chat run one at a time."""
        statement = (
            update(ChatRow)
            .where(ChatRow.id == chat_id)
            .values(
                last_seq=ChatRow.last_seq + new_messages,
                history_version=ChatRow.history_version + max(new_messages, 1),
                raw_messages=ChatRow.raw_messages + counts[0],
                summarized_messages=ChatRow.summarized_messages + counts[1],
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
        raw = sum(1 for v in values if not v.get("pinned"))
        last_seq, _ = await self._bump(chat_id, new_messages=len(values), counts=(raw, 0))
        await mark_standing(self.session, chat_id, values)
        first = last_seq - len(values) + 1
        now = utcnow()
        params = [
            {"id": new_id(), "chat_id": chat_id, "seq": first + i, "created_at": now, **v} for i, v in enumerate(values)
        ]
        inserted = await self.session.scalars(
            insert(MessageRow).returning(MessageRow, sort_by_parameter_order=True), params
        )
        return list(inserted)

    async def standing(self, chat_id: str, before_seq: int | None = None) -> Sequence[MessageRow]:
        """The chat's standing instructions (G4b), oldest first (before ``before_seq`` when given)."""
        query = select(MessageRow).where(MessageRow.chat_id == chat_id, MessageRow.standing == true())
        if before_seq is not None:
            query = query.where(MessageRow.seq < integer("before_seq", before_seq))
        return (await self.session.scalars(query.order_by(MessageRow.seq))).all()

    async def get(self, message_id: str, chat_id: str | None = None) -> MessageRow | None:
        """The message, or None (also when it belongs to a chat other than ``chat_id``)."""
        row = await self.session.get(MessageRow, message_id)
        if row is None or (chat_id is not None and row.chat_id != chat_id):
            return None
        return row

    async def patch(self, chat_id: str, message_id: str, changes: Mapping[str, Any]) -> MessageRow | None:
        """Change ``pinned``, ``standing`` (False dismisses a standing instruction, G4b) and/or merge ``meta``
        (see :func:`merge_meta`; e.g. ``{"manualExcluded": true}``)."""
        if not isinstance(changes, Mapping):
            raise InvalidValue("changes", "must be an object")
        unknown = sorted(set(changes) - {"pinned", "meta", "standing"})
        if unknown:
            raise InvalidValue(unknown[0], "is not a field that can be changed")
        pinned = boolean("pinned", changes["pinned"]) if "pinned" in changes else None
        standing = boolean("standing", changes["standing"]) if "standing" in changes else None
        meta_patch = json_object("meta", changes["meta"]) if "meta" in changes else None
        if meta_patch is not None:
            check_json("meta", meta_patch)
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        if not changes:
            return row
        before = counted(row.pinned, row.standing, row.summary_id)
        if pinned is not None:
            row.pinned = pinned
        if standing is not None:
            row.standing = standing
        if meta_patch is not None:
            row.meta = merge_meta(row.meta or {}, meta_patch)
        after = counted(row.pinned, row.standing, row.summary_id)
        await self._bump(chat_id, counts=(after[0] - before[0], after[1] - before[1]))
        await self.session.flush()
        return row

    async def edit_content(self, chat_id: str, message_id: str, content: str) -> MessageRow | None:
        """Replace a message's text; its stored token counts go (they counted the old text)."""
        text_value("content", content, required=True, max_length=2_000_000)
        check_json("content", content)
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        row.content = content
        before = counted(row.pinned, row.standing, row.summary_id)
        if row.role == "user" and not (row.meta or {}).get("command"):
            row.standing = detect(content).standing  # G4b: the edited text decides
        after = counted(row.pinned, row.standing, row.summary_id)
        await self.session.execute(delete(MessageTokensRow).where(MessageTokensRow.message_id == message_id))
        await self._bump(chat_id, counts=(after[0] - before[0], after[1] - before[1]))
        await self.session.flush()
        return row

    async def add_alternative(self, chat_id: str, message_id: str, version: Mapping[str, Any]) -> MessageRow | None:
        """Show a new version of a reply (``content``, ``tool_calls``, ``meta``), keeping the earlier ones
        (:func:`~.versions.add_version`)."""
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        add_version(row, version)
        await self._changed(chat_id, message_id)
        return row

    async def choose_alternative(self, chat_id: str, message_id: str, index: int) -> MessageRow | None:
        """Show version ``index`` of a regenerated reply (``InvalidValue`` when there is no such version)."""
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        if choose_version(row, index):
            await self._changed(chat_id, message_id)
        return row

    async def extend_reply(
        self, chat_id: str, message_id: str, text: str, meta: Mapping[str, Any]
    ) -> MessageRow | None:
        """Continue a reply: ``text`` is added to its content and ``meta`` replaces its reply keys (a
        continued partial reply that finished is whole again)."""
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        extend_version(row, text, meta)
        await self._changed(chat_id, message_id)
        return row

    async def put_version(
        self, chat_id: str, message_id: str, index: int | None, version: Mapping[str, Any]
    ) -> tuple[MessageRow, int] | None:
        """Write version ``index`` of a reply in place and show it, or add it as a new last version when
        ``index`` is None (:func:`~.versions.write_version`): a streaming regenerate or continue kept up to date
        while it streams (N5). The row and the version's index, or None when there is no such message."""
        row = await self.get(message_id, chat_id)
        if row is None:
            return None
        index = write_version(row, index, version)
        await self._changed(chat_id, message_id)
        return row, index

    async def _changed(self, chat_id: str, message_id: str) -> None:
        await self.session.execute(delete(MessageTokensRow).where(MessageTokensRow.message_id == message_id))
        await self._bump(chat_id)
        await self.session.flush()

    async def delete(self, chat_id: str, message_id: str) -> bool:
        """Delete one message of the chat (its seq is not reused)."""
        statement = (
            delete(MessageRow)
            .where(MessageRow.id == message_id, MessageRow.chat_id == chat_id)
            .returning(MessageRow.pinned, MessageRow.standing, MessageRow.summary_id)
        )
        gone = (await self.session.execute(statement)).all()
        if not gone:
            return False
        raw, summarized = count_kinds(gone)
        await self._bump(chat_id, counts=(-raw, -summarized))
        return True

    async def delete_after(self, chat_id: str, seq: int) -> int:
        """Delete every message of the chat after ``seq`` (rewinding the chat to it); how many went."""
        statement = (
            delete(MessageRow)
            .where(MessageRow.chat_id == chat_id, MessageRow.seq > seq)
            .returning(MessageRow.pinned, MessageRow.standing, MessageRow.summary_id)
        )
        gone = (await self.session.execute(statement)).all()
        if gone:
            raw, summarized = count_kinds(gone)
            await self._bump(chat_id, counts=(-raw, -summarized))
        return len(gone)

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

    async def tools_used(self, chat_id: str) -> dict[str, int]:
        """How often each tool was called in the chat, from the stored calls (OpenAI ``tool_calls`` or
        Anthropic ``tool_use`` parts): what the chat's history says, imported or generated alike."""
        query = select(MessageRow).where(
            MessageRow.chat_id == chat_id,
            MessageRow.role == "assistant",
            or_(MessageRow.tool_calls.is_not(None), cast(MessageRow.content, Text).contains('"tool_use"')),
        )
        counts: dict[str, int] = {}
        for row in await self.session.scalars(query):
            names = [call.name for call in row_to_message(row).tool_calls]
            if isinstance(row.content, list):  # Anthropic tool_use parts stay in the content
                parts = [p for p in row.content if isinstance(p, dict) and p.get("type") == "tool_use"]
                names += [str(p.get("name")) for p in parts]
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        return counts

    async def count_older_raw(self, chat_id: str, before_seq: int) -> int:
        """Messages older than ``before_seq`` that are neither pinned nor summarized: the history a turn's
        window did not load (any shift would have dropped them). The chat's maintained ``raw_messages`` less
        the raw ones from ``before_seq`` on: reads only those (a turn's window), never the older chat."""
        total = await self.session.scalar(select(ChatRow.raw_messages).where(ChatRow.id == chat_id))
        newer = (
            select(func.count())
            .select_from(MessageRow)
            .where(
                MessageRow.chat_id == chat_id,
                MessageRow.seq >= integer("before_seq", before_seq),
                MessageRow.summary_id.is_(None),
                MessageRow.pinned != true(),
            )
        )
        return max(0, int(total or 0) - int((await self.session.execute(newer)).scalar_one()))

    async def count_summarized(self, chat_id: str) -> int:
        """Messages a compaction summary stands for, pinned and standing ones left out (those are back in prompts
        raw): the chat's maintained ``summarized_messages``."""
        value = await self.session.scalar(select(ChatRow.summarized_messages).where(ChatRow.id == chat_id))
        return int(value or 0)

    async def recent_window(
        self,
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
        """The newest messages worth ``budget_tokens`` plus every pinned one; see :func:`.window.recent_window`."""
        return await recent_window(
            self.session,
            chat_id,
            profile,
            budget_tokens,
            count_fn,
            page_size=page_size,
            store_counts=store_counts,
            before_seq=before_seq,
            first_page=first_page,
        )
