"""Token calibration (T5): one robust correction factor per model and tokenizer profile.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "token_calibrations",
        sa.Column("model_id", sa.String(32), nullable=False),
        sa.Column("profile", sa.String(100), nullable=False),
        sa.Column("factor", sa.Float(), nullable=False),
        sa.Column("spread", sa.Float(), server_default="0", nullable=False),
        sa.Column("calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "profile", name="pk_token_calibrations"),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name="fk_token_calibrations_model_id_models", ondelete="CASCADE"
        ),
    )


def downgrade() -> None:
    op.drop_table("token_calibrations")
