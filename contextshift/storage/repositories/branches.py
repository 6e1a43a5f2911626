"""Branches of a chat: editing an older message keeps the continuation it had.

An edit that branches adds a version to the edited message (``messages.alternatives``, the list regenerate
uses), and the messages after it leave the table for that old version's ``tail``: a JSON copy of each row (and of
the summaries anchored among them), so nothing is lost and no reader of the chat ever sees two branches at once.
Choosing a version of a message whose versions have tails parks the shown continuation in the shown version's
tail and puts the chosen version's tail back, with the same ids and seqs (a seq is never reused, so they are
still free). Every other reader of the history (prompts, search, counts, export) reads the branch shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue
from ..tables import MessageRow, SummaryRow
from ._common import integer, text_value
from .convert import check_json
from .messages import MessageRepository, add_counts, count_kinds
from .versions import show, version_of

__all__ = ["branch_from", "is_branch_point", "show_branch"]

_MESSAGE_COLUMNS = tuple(c.name for c in MessageRow.__table__.columns if c.name != "chat_id")
_SUMMARY_COLUMNS = tuple(c.name for c in SummaryRow.__table__.columns if c.name != "chat_id")


def is_branch_point(row: MessageRow) -> bool:
    """Whether the versions of this message each have their own continuation (an edit branched it)."""
    return any(isinstance(v, dict) and "tail" in v for v in row.alternatives or [])


def _snapshot(row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    out = {name: getattr(row, name) for name in columns}
    out["created_at"] = out["created_at"].isoformat() if out.get("created_at") else None
    return out


def _restored(chat_id: str, saved: dict[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    values = {name: saved.get(name) for name in columns}
    values["chat_id"] = chat_id
    if saved.get("created_at"):
        values["created_at"] = datetime.fromisoformat(saved["created_at"])
    else:
        values.pop("created_at", None)
    return values


async def _park(session: AsyncSession, row: MessageRow) -> dict[str, Any]:
    """Take the continuation after ``row`` (messages and the summaries anchored among them) out of the chat."""
    later = select(MessageRow).where(MessageRow.chat_id == row.chat_id, MessageRow.seq > row.seq)
    messages = list(await session.scalars(later.order_by(MessageRow.seq)))
    anchored = select(SummaryRow).where(SummaryRow.chat_id == row.chat_id, SummaryRow.anchor_seq > row.seq)
    summaries = list(await session.scalars(anchored.order_by(SummaryRow.anchor_seq)))
    tail = {
        "messages": [_snapshot(m, _MESSAGE_COLUMNS) for m in messages],
        "summaries": [_snapshot(s, _SUMMARY_COLUMNS) for s in summaries],
    }
    check_json("tail", tail)
    if summaries:
        await session.execute(delete(SummaryRow).where(SummaryRow.id.in_([s.id for s in summaries])))
    if messages:
        await session.execute(delete(MessageRow).where(MessageRow.id.in_([m.id for m in messages])))
        parked = count_kinds((m.pinned, m.standing, m.summary_id) for m in messages)
        await add_counts(session, row.chat_id, (-parked[0], -parked[1]))  # the chat's kept counts follow
    return tail


async def _unpark(session: AsyncSession, chat_id: str, tail: Any) -> None:
    """Put a parked continuation back."""
    if not isinstance(tail, dict):
        return
    messages = [_restored(chat_id, m, _MESSAGE_COLUMNS) for m in tail.get("messages") or []]
    summaries = [_restored(chat_id, s, _SUMMARY_COLUMNS) for s in tail.get("summaries") or []]
    if summaries:
        await session.execute(insert(SummaryRow), summaries)
    if messages:
        await session.execute(insert(MessageRow), messages)
        await add_counts(session, chat_id, count_kinds((m["pinned"], m["standing"], m["summary_id"]) for m in messages))


async def branch_from(repo: MessageRepository, chat_id: str, message_id: str, content: str) -> MessageRow | None:
    """Edit a message into a new branch: ``content`` becomes its new (shown) version, and the messages after it
    stay with the version it had. None when there is no such message."""
    text_value("content", content, required=True, max_length=2_000_000)
    check_json("content", content)
    row = await repo.get(message_id, chat_id)
    if row is None:
        return None
    versions = [dict(v) for v in row.alternatives or [_shown(row)]]
    shown = row.alternative or 0
    versions[shown] = {**_shown(row), "tail": await _park(repo.session, row)}
    versions.append({"content": content, "tool_calls": None, "meta": {}, "tail": None})
    show(row, versions, len(versions) - 1)
    await repo.edit_content(chat_id, message_id, content)  # the standing flag and token counts follow the text
    return row


async def show_branch(repo: MessageRepository, chat_id: str, message_id: str, index: int) -> MessageRow | None:
    """Show version ``index`` of a branch point with its own continuation (the shown one is parked)."""
    row = await repo.get(message_id, chat_id)
    if row is None:
        return None
    versions = [dict(v) for v in row.alternatives or []]
    index = integer("alternative", index)
    if not 0 <= index < len(versions):
        raise InvalidValue("alternative", f"must be from 0 to {max(len(versions), 1) - 1}")
    shown = row.alternative or 0
    if index == shown:
        return row
    versions[shown] = {**_shown(row), "tail": await _park(repo.session, row)}
    await _unpark(repo.session, chat_id, versions[index].get("tail"))
    versions[index] = {**versions[index], "tail": None}
    show(row, versions, index)
    await repo.edit_content(chat_id, message_id, row.content)  # only user messages branch: their text
    return row


def _shown(row: MessageRow) -> dict[str, Any]:
    """The version the row shows (its text, tool calls and reply keys of ``meta``)."""
    return version_of(row)
