"""Browser sessions belong to the token that opened them (N2): ``api_tokens.opened_by``.

A session (``kind = 'session'``) names the API token it was opened with; deleting (revoking) that token
deletes its sessions with it (``ON DELETE CASCADE``, and the repository deletes them too, for a database that
does not enforce foreign keys). Sessions opened before this revision name no token: they are ended here, so
that every session left belongs to a token (the browser signs in again).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM api_tokens WHERE kind = 'session'")
    with op.batch_alter_table("api_tokens") as tokens:
        tokens.add_column(sa.Column("opened_by", sa.String(32), nullable=True))
        tokens.create_foreign_key(
            "fk_api_tokens_opened_by_api_tokens", "api_tokens", ["opened_by"], ["id"], ondelete="CASCADE"
        )
        tokens.create_index("ix_api_tokens_opened_by", ["opened_by"])


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as tokens:
        tokens.drop_index("ix_api_tokens_opened_by")
        tokens.drop_constraint("fk_api_tokens_opened_by_api_tokens", type_="foreignkey")
        tokens.drop_column("opened_by")
