"""A bot's reply reserve is 0 (not set) by default: ``bots.response_reserve`` defaults to 0, and 1024 becomes 0.

Before this, 1024 was the column's default, so a bot holding exactly 1024 never chose it. 0 lets each turn take
``core.limits.reply_reserve``'s default, the smallest of 1024, the model's ``max_output_tokens`` and a quarter of
the window: never above 1024, so a large model keeps 1024 in effect while a small one no longer loses most or
all of its window to the reply. The downgrade restores the 1024 default and leaves the rows as they are (0 reads
as "not set" either way).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The reserve every bot got by default before this revision.
OLD_DEFAULT = 1024


def upgrade() -> None:
    with op.batch_alter_table("bots") as bots:
        bots.alter_column("response_reserve", existing_type=sa.Integer(), existing_nullable=False, server_default="0")
    unset = sa.text("UPDATE bots SET response_reserve = 0 WHERE response_reserve = :old")
    op.execute(unset.bindparams(old=OLD_DEFAULT))


def downgrade() -> None:
    with op.batch_alter_table("bots") as bots:
        bots.alter_column(
            "response_reserve", existing_type=sa.Integer(), existing_nullable=False, server_default=str(OLD_DEFAULT)
        )
