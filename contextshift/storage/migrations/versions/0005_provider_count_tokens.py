"""Providers may offer exact token counts (T5): ``count_tokens`` (Anthropic's free count_tokens endpoint).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("providers") as providers:
        providers.add_column(sa.Column("count_tokens", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("providers") as providers:
        providers.drop_column("count_tokens")
