"""A chat's own model (issue 27): ``chats.model_id`` overrides the bot's chat model for that chat's turns.

Null (every chat before this revision) means the bot's ``chat_model_id``. Deleting the model sets it back to
null (``ON DELETE SET NULL``): the chat falls back to the bot's model.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.add_column(sa.Column("model_id", sa.String(32), nullable=True))
        chats.create_foreign_key("fk_chats_model_id_models", "models", ["model_id"], ["id"], ondelete="SET NULL")
        chats.create_index("ix_chats_model_id", ["model_id"])


def downgrade() -> None:
    with op.batch_alter_table("chats") as chats:
        chats.drop_index("ix_chats_model_id")
        chats.drop_constraint("fk_chats_model_id_models", type_="foreignkey")
        chats.drop_column("model_id")
