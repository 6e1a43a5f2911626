"""Provider API keys encrypted at rest (N2): keys stored in plain text before this are encrypted now.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from contextshift.storage.secret_key import ENCRYPTED_PREFIX, encrypt, key_of

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    connection = op.get_bind()
    key = key_of(connection.dialect)  # the key the service gave its migrations' engine
    rows = connection.execute(sa.text("SELECT id, api_key FROM providers WHERE api_key IS NOT NULL")).all()
    for provider_id, api_key in rows:
        if api_key and not api_key.startswith(ENCRYPTED_PREFIX):
            connection.execute(
                sa.text("UPDATE providers SET api_key = :key WHERE id = :id"),
                {"key": encrypt(api_key, key), "id": provider_id},
            )


def downgrade() -> None:
    """Keys stay encrypted: a downgrade never writes them back in plain text (set them again instead)."""
