"""A model's context strategy for the compatible endpoints (V7): ``models.context_strategy``, none by default.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as models:
        models.add_column(sa.Column("context_strategy", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models") as models:
        models.drop_column("context_strategy")
