"""One turn at a time per chat (N5): the chat's turn lease, held by one generation across processes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.add_column(sa.Column("turn_owner", sa.String(64), nullable=True))
        chats.add_column(sa.Column("turn_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.drop_column("turn_until")
        chats.drop_column("turn_owner")
