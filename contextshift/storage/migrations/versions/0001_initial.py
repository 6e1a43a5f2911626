"""Initial schema: providers, models, bots, lorebooks, chats, memories, messages, token counts, audits.

Revision ID: 0001
Revises:
Create Date: 2026-05-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*columns, name=f"pk_{table}")


def _fk(table: str, column: str, target: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}", ondelete=ondelete)


def upgrade() -> None:
    op.create_table(
        "providers",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("api_key", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        _pk("providers", "id"),
        sa.CheckConstraint(_one_of("kind", ("openai", "anthropic", "openai-codex")), name="ck_providers_kind"),
    )
    op.create_table(
        "models",
        sa.Column("id", ID, nullable=False),
        sa.Column("provider_id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("type", sa.String(16), server_default="chat", nullable=False),
        sa.Column("context_window", sa.Integer(), nullable=True),
        sa.Column("max_output_tokens", sa.Integer(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("tokenizer", sa.String(200), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        _pk("models", "id"),
        _fk("models", "provider_id", "providers", "CASCADE"),
        sa.CheckConstraint(_one_of("type", ("chat", "embedding", "image")), name="ck_models_type"),
    )
    op.create_index("ix_models_provider_id", "models", ["provider_id"])
    op.create_table(
        "bots",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("chat_model_id", ID, nullable=True),
        sa.Column("system_prompt", sa.Text(), server_default="", nullable=False),
        sa.Column("persona", sa.Text(), server_default="", nullable=False),
        sa.Column("context_strategy", sa.String(100), server_default="truncate", nullable=False),
        sa.Column("response_reserve", sa.Integer(), server_default="1024", nullable=False),
        sa.Column("context_limit", sa.Integer(), nullable=True),
        sa.Column("lorebook_ids", JSON, nullable=False),
        sa.Column("template", JSON, nullable=True),
        sa.Column("author_note", sa.Text(), nullable=True),
        sa.Column("author_note_depth", sa.Integer(), server_default="4", nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        _pk("bots", "id"),
        _fk("bots", "chat_model_id", "models", "SET NULL"),
    )
    op.create_index("ix_bots_chat_model_id", "bots", ["chat_model_id"])
    op.create_table(
        "lorebooks",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _pk("lorebooks", "id"),
    )
    op.create_table(
        "lorebook_entries",
        sa.Column("id", ID, nullable=False),
        sa.Column("lorebook_id", ID, nullable=False),
        sa.Column("idx", sa.Integer(), server_default="0", nullable=False),
        sa.Column("keys", JSON, nullable=False),
        sa.Column("secondary_keys", JSON, nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column("constant", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("order", sa.Integer(), server_default="100", nullable=False),
        sa.Column("position", sa.String(16), server_default="before", nullable=False),
        sa.Column("depth", sa.Integer(), nullable=True),
        _pk("lorebook_entries", "id"),
        _fk("lorebook_entries", "lorebook_id", "lorebooks", "CASCADE"),
        sa.CheckConstraint(_one_of("position", ("before", "after", "depth")), name="ck_lorebook_entries_position"),
    )
    op.create_index("ix_lorebook_entries_lorebook_id", "lorebook_entries", ["lorebook_id"])
    op.create_table(
        "chats",
        sa.Column("id", ID, nullable=False),
        sa.Column("bot_id", ID, nullable=False),
        sa.Column("type", sa.String(16), server_default="chat", nullable=False),
        sa.Column("title", sa.String(500), server_default="", nullable=False),
        sa.Column("history_version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        _pk("chats", "id"),
        _fk("chats", "bot_id", "bots", "CASCADE"),
        sa.CheckConstraint(_one_of("type", ("chat", "discuss", "pipeline")), name="ck_chats_type"),
    )
    op.create_index("ix_chats_bot_id_updated_at", "chats", ["bot_id", "updated_at"])
    op.create_table(
        "memories",
        sa.Column("id", ID, nullable=False),
        sa.Column("bot_id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _pk("memories", "id"),
        _fk("memories", "bot_id", "bots", "CASCADE"),
        _fk("memories", "chat_id", "chats", "CASCADE"),
    )
    op.create_index("ix_memories_bot_id", "memories", ["bot_id"])
    op.create_index("ix_memories_chat_id", "memories", ["chat_id"])
    op.create_table(
        "messages",
        sa.Column("id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", JSON, nullable=True),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("tool_calls", JSON, nullable=True),
        sa.Column("tool_call_id", sa.String(200), nullable=True),
        sa.Column("pinned", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("meta", JSON, nullable=False),
        sa.Column("workspace", sa.String(500), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        _pk("messages", "id"),
        _fk("messages", "chat_id", "chats", "CASCADE"),
    )
    op.create_index("uq_messages_chat_id_seq", "messages", ["chat_id", "seq"], unique=True)
    op.create_index("ix_messages_chat_id_pinned_seq", "messages", ["chat_id", "pinned", "seq"])
    op.create_table(
        "message_tokens",
        sa.Column("message_id", ID, nullable=False),
        sa.Column("profile", sa.String(100), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        _pk("message_tokens", "message_id", "profile"),
        _fk("message_tokens", "message_id", "messages", "CASCADE"),
    )
    op.create_table(
        "prompt_context_audits",
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("generation_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(128), nullable=True),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("usage", JSON, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        _pk("prompt_context_audits", "chat_id"),
        _fk("prompt_context_audits", "chat_id", "chats", "CASCADE"),
        sa.CheckConstraint(
            _one_of("status", ("prepared", "completed", "failed", "cancelled")),
            name="ck_prompt_context_audits_status",
        ),
    )
    op.create_index("ix_prompt_context_audits_generation_id", "prompt_context_audits", ["generation_id"])


def downgrade() -> None:
    for table in (
        "prompt_context_audits",
        "message_tokens",
        "messages",
        "memories",
        "chats",
        "lorebook_entries",
        "lorebooks",
        "bots",
        "models",
        "providers",
    ):
        op.drop_table(table)
