"""Maintained message counts on the chat: ``chats.raw_messages`` and ``chats.summarized_messages``.

A turn needs how many raw messages lie before its window and how many a summary stands for; counting them
with ``count(*)`` read the whole chat on every turn. The repositories now keep both counts on the chat row
in the same transaction as every write to its messages; this revision adds the columns and fills them from
the messages already stored.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.add_column(sa.Column("raw_messages", sa.BigInteger(), nullable=False, server_default="0"))
        chats.add_column(sa.Column("summarized_messages", sa.BigInteger(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE chats SET raw_messages = (SELECT count(*) FROM messages m WHERE m.chat_id = chats.id "
        "AND m.summary_id IS NULL AND m.pinned = false), "
        "summarized_messages = (SELECT count(*) FROM messages m WHERE m.chat_id = chats.id "
        "AND m.summary_id IS NOT NULL AND m.pinned = false AND m.standing = false)"
    )


def downgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.drop_column("summarized_messages")
        chats.drop_column("raw_messages")
