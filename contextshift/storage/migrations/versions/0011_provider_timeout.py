"""Provider deadlines (N5): ``timeout_seconds`` bounds each wait for the provider and the whole turn.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("providers") as providers:
        providers.add_column(sa.Column("timeout_seconds", sa.Integer(), server_default="60", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("providers") as providers:
        providers.drop_column("timeout_seconds")
