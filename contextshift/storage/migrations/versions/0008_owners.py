"""Owners (N2): bots, lorebooks and chats belong to a user; what existed before belongs to the first admin.

A database that has rows but no user yet gets the admin here (named ``admin``, without a token: the
service's first start then makes one and prints the login URL).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
OWNED = ("bots", "lorebooks", "chats")


def upgrade() -> None:
    connection = op.get_bind()
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("owner_id", ID, nullable=True))
    rows = sum(connection.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() for table in OWNED)
    admin = connection.execute(
        sa.text("SELECT id FROM users WHERE role = 'admin' ORDER BY disabled, created_at, id LIMIT 1")
    ).scalar()
    if admin is None and rows:
        admin = uuid.uuid4().hex
        now = datetime.now(UTC)
        if connection.dialect.name == "sqlite":
            now = now.replace(tzinfo=None)
        connection.execute(
            sa.text(
                "INSERT INTO users (id, name, role, disabled, created_at, updated_at) "
                "VALUES (:id, :name, 'admin', :no, :now, :now)"
            ),
            {"id": admin, "name": _free_name(connection), "no": False, "now": now},
        )
    if admin is not None:
        for table in OWNED:
            statement = sa.text(f"UPDATE {table} SET owner_id = :admin WHERE owner_id IS NULL")
            connection.execute(statement, {"admin": admin})
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.alter_column("owner_id", existing_type=ID, nullable=False)
            batch.create_foreign_key(f"fk_{table}_owner_id_users", "users", ["owner_id"], ["id"], ondelete="CASCADE")
            batch.create_index(f"ix_{table}_owner_id", ["owner_id"])


def _free_name(connection: sa.Connection) -> str:
    taken = set(connection.execute(sa.text("SELECT name FROM users")).scalars())
    name, n = "admin", 1
    while name in taken:
        n += 1
        name = f"admin{n}"
    return name


def downgrade() -> None:
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.drop_index(f"ix_{table}_owner_id")
            batch.drop_constraint(f"fk_{table}_owner_id_users", type_="foreignkey")
            batch.drop_column("owner_id")
