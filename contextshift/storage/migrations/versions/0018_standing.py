"""Standing instructions (G4b): ``messages.standing`` marks a user's durable instruction, preference or identity
fact, detected when the message is stored (``core.standing``) and cleared when the user dismisses it, retracts
it or replaces it by a newer one on the same topic. Prompts keep every standing message, however old.

No backfill: messages stored before this revision are not standing until the user marks one (PATCH
``standing: true``) or states it again; reading every user message of every chat at upgrade time would make
the upgrade as slow as the database is large.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD/DROP COLUMN, not batch mode: rebuilding ``messages`` on SQLite would cut it from its FTS5 table
# and triggers (migration 0007).
def upgrade() -> None:
    op.add_column("messages", sa.Column("standing", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_messages_chat_id_standing_seq", "messages", ["chat_id", "standing", "seq"])


def downgrade() -> None:
    op.drop_index("ix_messages_chat_id_standing_seq", table_name="messages")
    op.drop_column("messages", "standing")
