"""A chat's history as the pipeline and the summarizer see it: raw messages with summaries in place.

A committed summary stands where the first message it covers was (its ``anchor_seq``); the messages it
covers are not loaded, except pinned ones: a pinned message comes back raw in its own place, and the
pipeline's assembly then lets the summary stand only for the rest. Slash-command exchanges
(``meta.command``) are the service talking to the user, not conversation, and never reach a model.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.messages import Message
from ..storage import row_to_message
from ..storage.tables import MessageRow, SummaryRow

COMMAND_KEY = "command"
FAILED_KEY = "failed"


def summary_message(row: SummaryRow) -> Message:
    return Message(
        role="system",
        content=row.content,
        id=row.id,
        source="summary",
        meta={"covers": list(row.covers), "workspaces": list(row.workspaces)},
    )


def is_command(row: MessageRow) -> bool:
    return bool((row.meta or {}).get(COMMAND_KEY))


def is_failed_input(row: MessageRow) -> bool:
    """A user message whose turn failed before any reply (``meta.failed``): kept, but never sent (N5)."""
    return bool((row.meta or {}).get(FAILED_KEY))


def merge(rows: Sequence[MessageRow], summaries: Sequence[SummaryRow]) -> list[Message]:
    """Rows (oldest first) and active summaries, each summary before the first row newer than its anchor."""
    pending = sorted(summaries, key=lambda s: s.anchor_seq)
    out: list[Message] = []
    for row in rows:
        while pending and pending[0].anchor_seq <= row.seq:
            out.append(summary_message(pending.pop(0)))
        if not is_command(row) and not is_failed_input(row):
            out.append(row_to_message(row))
    out.extend(summary_message(s) for s in pending)
    return out
