"""A token's context strategy for the compatible endpoints (V7): ``api_tokens.context_strategy``, none by default.

An app pointed at ``/v1`` with its own token gets that token's strategy when a request names none (before the
model's ``context_strategy``).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as tokens:
        tokens.add_column(sa.Column("context_strategy", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as tokens:
        tokens.drop_column("context_strategy")
