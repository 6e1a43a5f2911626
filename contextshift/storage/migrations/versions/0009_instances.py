"""Crash recovery (N5): service instances with heartbeats, and the owner of audits, compaction logs and jobs.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("id", ID, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("heartbeat_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_instances"),
    )
    op.create_index("ix_instances_heartbeat_at", "instances", ["heartbeat_at"])
    for table in ("prompt_context_audits", "compaction_logs", "compaction_jobs"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("instance_id", ID, nullable=True))
            batch.create_index(f"ix_{table}_instance_id", ["instance_id"])


def downgrade() -> None:
    for table in ("compaction_jobs", "compaction_logs", "prompt_context_audits"):
        with op.batch_alter_table(table) as batch:
            batch.drop_index(f"ix_{table}_instance_id")
            batch.drop_column("instance_id")
    op.drop_index("ix_instances_heartbeat_at", table_name="instances")
    op.drop_table("instances")
