"""Compaction (C1-C14): bot settings, summaries, logs, background jobs, the per-chat lease and usage totals.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    with op.batch_alter_table("bots") as bots:
        bots.add_column(sa.Column("compaction_enabled", sa.Boolean(), server_default=sa.true(), nullable=False))
        bots.add_column(sa.Column("compaction_threshold", sa.Integer(), server_default="0", nullable=False))
        bots.add_column(sa.Column("compaction_ratio", sa.Float(), server_default="0.5", nullable=False))
        bots.add_column(sa.Column("compaction_model_id", ID, nullable=True))
        bots.create_foreign_key(
            "fk_bots_compaction_model_id_models", "models", ["compaction_model_id"], ["id"], ondelete="SET NULL"
        )
        bots.create_index("ix_bots_compaction_model_id", ["compaction_model_id"])
    with op.batch_alter_table("chats") as chats:
        chats.add_column(sa.Column("compaction_lease_owner", sa.String(64), nullable=True))
        chats.add_column(sa.Column("compaction_lease_until", TS, nullable=True))
        chats.add_column(sa.Column("compaction_failed_at", TS, nullable=True))
        chats.add_column(sa.Column("usage_input_tokens", sa.BigInteger(), server_default="0", nullable=False))
        chats.add_column(sa.Column("usage_cached_tokens", sa.BigInteger(), server_default="0", nullable=False))
        chats.add_column(sa.Column("tools_used", JSON, nullable=True))
    op.create_table(
        "summaries",
        sa.Column("id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("covers", JSON, nullable=False),
        sa.Column("workspaces", JSON, nullable=False),
        sa.Column("anchor_seq", sa.BigInteger(), nullable=False),
        sa.Column("superseded_by", ID, nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_summaries"),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_summaries_chat_id_chats", ondelete="CASCADE"),
    )
    op.create_index("ix_summaries_chat_id_superseded_by", "summaries", ["chat_id", "superseded_by"])
    with op.batch_alter_table("messages") as messages:
        messages.add_column(sa.Column("summary_id", ID, nullable=True))
        messages.create_index("ix_messages_chat_id_summary_id_seq", ["chat_id", "summary_id", "seq"])
    op.create_table(
        "compaction_logs",
        sa.Column("id", ID, nullable=False),
        sa.Column("bot_id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("message_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("passes", sa.Integer(), server_default="0", nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("error_code", sa.String(128), nullable=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("completed_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_compaction_logs"),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name="fk_compaction_logs_bot_id_bots", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_compaction_logs_chat_id_chats", ondelete="CASCADE"),
        sa.CheckConstraint(_one_of("status", ("running", "ok", "error", "noop")), name="ck_compaction_logs_status"),
        sa.CheckConstraint(_one_of("trigger", ("background", "sync", "manual")), name="ck_compaction_logs_trigger"),
    )
    op.create_index("ix_compaction_logs_bot_id_started_at", "compaction_logs", ["bot_id", "started_at"])
    op.create_index("ix_compaction_logs_chat_id_started_at", "compaction_logs", ["chat_id", "started_at"])
    op.create_table(
        "compaction_jobs",
        sa.Column("id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_compaction_jobs"),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_compaction_jobs_chat_id_chats", ondelete="CASCADE"),
        sa.CheckConstraint(_one_of("status", ("pending", "running", "done")), name="ck_compaction_jobs_status"),
    )
    op.create_index("ix_compaction_jobs_status_created_at", "compaction_jobs", ["status", "created_at"])
    op.create_index("ix_compaction_jobs_chat_id", "compaction_jobs", ["chat_id"])


def downgrade() -> None:
    op.drop_table("compaction_jobs")
    op.drop_table("compaction_logs")
    with op.batch_alter_table("messages") as messages:
        messages.drop_index("ix_messages_chat_id_summary_id_seq")
        messages.drop_column("summary_id")
    op.drop_table("summaries")
    with op.batch_alter_table("chats") as chats:
        for column in (
            "tools_used",
            "usage_cached_tokens",
            "usage_input_tokens",
            "compaction_failed_at",
            "compaction_lease_until",
            "compaction_lease_owner",
        ):
            chats.drop_column(column)
    with op.batch_alter_table("bots") as bots:
        bots.drop_index("ix_bots_compaction_model_id")
        bots.drop_constraint("fk_bots_compaction_model_id_models", type_="foreignkey")
        for column in ("compaction_model_id", "compaction_ratio", "compaction_threshold", "compaction_enabled"):
            bots.drop_column(column)
