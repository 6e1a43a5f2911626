"""A whole chat read for export, and written from an import (issue 27), in the caller's one transaction.

:func:`chat_contents` reads a chat's messages (oldest first) and summaries as plain dicts, the fields the
export writes. :func:`add_chat_contents` stores messages and summaries into a new chat: the messages through
``MessageRepository.append_many`` (validated there), then what ``append_many`` decides itself (the standing
mark, versions, time) as the file says, then the summaries with the ids they refer to mapped to the new rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..tables import MessageRow, SummaryRow
from ..types import new_id
from .convert import check_json
from .messages import MessageRepository, add_counts, counted

#: The message fields ``append_many`` takes from an imported message.
_APPENDED = ("role", "content", "name", "tool_calls", "tool_call_id", "pinned", "meta", "workspace")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


async def chat_contents(session: AsyncSession, chat_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chat's messages, oldest first, and its summaries (active and rolled up), as the export writes them."""
    rows = await session.scalars(select(MessageRow).where(MessageRow.chat_id == chat_id).order_by(MessageRow.seq))
    messages = [
        {
            "id": r.id,
            "seq": r.seq,
            "role": r.role,
            "content": r.content,
            "name": r.name,
            "tool_calls": r.tool_calls,
            "tool_call_id": r.tool_call_id,
            "pinned": r.pinned,
            "standing": r.standing,
            "meta": r.meta or {},
            "workspace": r.workspace,
            "alternatives": r.alternatives,
            "alternative": r.alternative,
            "summary_id": r.summary_id,
            "created_at": _iso(r.created_at),
        }
        for r in rows
    ]
    found = await session.scalars(
        select(SummaryRow).where(SummaryRow.chat_id == chat_id).order_by(SummaryRow.anchor_seq, SummaryRow.created_at)
    )
    summaries = [
        {
            "id": s.id,
            "content": s.content,
            "covers": list(s.covers or []),
            "workspaces": list(s.workspaces or []),
            "anchor_seq": s.anchor_seq,
            "superseded_by": s.superseded_by,
            "model": s.model,
            "created_at": _iso(s.created_at),
        }
        for s in found
    ]
    return messages, summaries


def _without_tail(version: Any) -> Any:
    return {k: v for k, v in version.items() if k != "tail"} if isinstance(version, dict) else version


async def add_chat_contents(
    session: AsyncSession, chat_id: str, messages: Sequence[Mapping[str, Any]], summaries: Sequence[Mapping[str, Any]]
) -> list[MessageRow]:
    """Store ``messages`` (each with a ``ref``) and ``summaries`` (covering refs) into the empty chat."""
    rows = await MessageRepository(session).append_many(chat_id, [{k: m.get(k) for k in _APPENDED} for m in messages])
    new_ids = {str(m["ref"]): row.id for m, row in zip(messages, rows, strict=True)}
    seq_of = {str(m["ref"]): row.seq for m, row in zip(messages, rows, strict=True)}
    summary_ids = {str(s["ref"]): new_id() for s in summaries}
    # the file's seqs, to put a summary where it stood (a roll-up stands where the first summary it holds did)
    seqs = sorted((m["seq"], row.seq) for m, row in zip(messages, rows, strict=True) if isinstance(m.get("seq"), int))
    for s in summaries:
        covers = [new_ids[c] for c in s["covers"] if c in new_ids]
        anchors = [seq_of[c] for c in s["covers"] if c in seq_of]
        if isinstance(s.get("anchor_seq"), int):
            anchors += [new for old, new in seqs if old >= s["anchor_seq"]][:1]
        check_json("summary", {"content": s["content"], "workspaces": s.get("workspaces") or []})
        superseded = s.get("superseded_by")
        summary = SummaryRow(
            id=summary_ids[str(s["ref"])],
            chat_id=chat_id,
            content=s["content"],
            covers=covers,
            workspaces=list(s.get("workspaces") or []),
            anchor_seq=min(anchors) if anchors else 0,
            superseded_by=summary_ids.get(str(superseded)) if superseded is not None else None,
            model=s.get("model"),
        )
        if (created := _when(s.get("created_at"))) is not None:
            summary.created_at = created
        session.add(summary)
    await session.flush()
    changes: list[dict[str, Any]] = []
    for m, row in zip(messages, rows, strict=True):
        # A branch's parked continuation ("tail") holds rows of the exported chat (their ids and seqs): it is
        # not brought in; the versions' own texts are (an imported chat shows the branch that was shown).
        versions = [_without_tail(v) for v in m["alternatives"]] if m.get("alternatives") else None
        check_json("alternatives", versions)
        summary_ref = m.get("summary_ref")
        changes.append(
            {
                "id": row.id,
                "standing": bool(m.get("standing", row.standing)),
                "alternatives": versions,
                "alternative": m.get("alternative") if versions else None,
                "summary_id": summary_ids.get(str(summary_ref)) if summary_ref is not None else None,
                "created_at": _when(m.get("created_at")) or row.created_at,
            }
        )
    if changes:  # one bulk UPDATE by primary key
        # the chat's maintained counts: append_many counted each row unsummarized with its own standing flag
        before = [counted(row.pinned, row.standing, None) for row in rows]
        await session.execute(update(MessageRow), changes)
        after = [counted(row.pinned, c["standing"], c["summary_id"]) for row, c in zip(rows, changes, strict=True)]
        delta = (
            sum(a[0] for a in after) - sum(b[0] for b in before),
            sum(a[1] for a in after) - sum(b[1] for b in before),
        )
        if delta != (0, 0):
            await add_counts(session, chat_id, delta)
    return rows


__all__ = ["add_chat_contents", "chat_contents"]
