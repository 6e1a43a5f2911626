"""Audits of the OpenAI-compatible endpoint (V7): one row per call, for its caller, kept until it expires.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "proxy_audits",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(128), nullable=True),
        sa.Column("excluded_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("usage", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("expires_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_proxy_audits"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_proxy_audits_user_id_users", ondelete="CASCADE"),
        sa.CheckConstraint("status IN ('prepared', 'completed', 'failed', 'cancelled')", name="ck_proxy_audits_status"),
    )
    op.create_index("ix_proxy_audits_user_id_created_at", "proxy_audits", ["user_id", "created_at"])
    op.create_index("ix_proxy_audits_expires_at", "proxy_audits", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_proxy_audits_expires_at", table_name="proxy_audits")
    op.drop_index("ix_proxy_audits_user_id_created_at", table_name="proxy_audits")
    op.drop_table("proxy_audits")
