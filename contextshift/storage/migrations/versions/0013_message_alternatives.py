"""Alternative replies (V5, like swipes): a regenerated reply keeps the earlier ones to page through.

``messages.alternatives`` holds every version of a reply (``content``, ``tool_calls`` and the reply's own
``meta``), oldest first, once there is more than one; ``messages.alternative`` is the index of the version
the row's columns show (the one prompts use). Both are null for a message that was never regenerated.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


# Plain ADD/DROP COLUMN, not batch mode: rebuilding ``messages`` on SQLite would cut it from its FTS5 table
# and triggers (migration 0007).
def upgrade() -> None:
    op.add_column("messages", sa.Column("alternatives", JSON, nullable=True))
    op.add_column("messages", sa.Column("alternative", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "alternative")
    op.drop_column("messages", "alternatives")
