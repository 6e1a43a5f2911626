"""A partial index of each chat's raw (unsummarized) messages in order: ``(chat_id, seq) WHERE summary_id IS NULL``.

A compaction pass reads the oldest raw messages of a chat page by page (``summary_id IS NULL ORDER BY seq``).
PostgreSQL cannot take that order from ``(chat_id, summary_id, seq)`` (``IS NULL`` is no equality to it), so
without statistics it read every raw row of the chat and sorted them (0.6 s a page at 100k messages); with
statistics it walks ``(chat_id, seq)`` past every summarized row, which a long, compacted chat is mostly
made of. This index holds the raw rows only, in order: a page is LIMIT rows of it on both backends.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_messages_chat_id_seq_unsummarized"


def upgrade() -> None:
    where = sa.text("summary_id IS NULL")
    op.create_index(NAME, "messages", ["chat_id", "seq"], postgresql_where=where, sqlite_where=where)


def downgrade() -> None:
    op.drop_index(NAME, table_name="messages")
