"""Background jobs (V8): the embedded runner's ``jobs``, every runner's ``job_attempts``, instance roles, and on
PostgreSQL the job engine's schema (procrastinate). Pending compaction jobs move to the new queue.

Revision ID: 0015
Revises: 0014
Create Date: 2027-01-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.util import await_only

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(32)
TS = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _engine_schema(connection: sa.Connection) -> None:
    """procrastinate's schema, as the installed version ships it (the dependency is pinned to one minor
    version, whose schema this is; a newer pin adds a migration with procrastinate's own upgrade scripts).

    It is many statements with function bodies, so it goes to asyncpg in one simple-protocol call.
    """
    from procrastinate.schema import SchemaManager

    driver = connection.connection.driver_connection
    assert driver is not None
    await_only(driver.execute(SchemaManager.get_schema()))


def upgrade() -> None:
    connection = op.get_bind()
    postgres = connection.dialect.name == "postgresql"
    op.create_table(
        "jobs",
        sa.Column("id", ID, nullable=False),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("args", JSON, nullable=False),
        sa.Column("lock", sa.String(100), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("run_after", TS, nullable=False),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("instance_id", ID, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.CheckConstraint(_one_of("status", ("queued", "running", "succeeded", "failed")), name="ck_jobs_status"),
    )
    op.create_index("ix_jobs_status_run_after", "jobs", ["status", "run_after"])
    op.create_index("ix_jobs_instance_id", "jobs", ["instance_id"])
    for status in ("queued", "running"):
        where = sa.text(f"status = '{status}'")
        op.create_index(
            f"uq_jobs_lock_{status}", "jobs", ["lock"], unique=True, sqlite_where=where, postgresql_where=where
        )
    op.create_table(
        "job_attempts",
        sa.Column("id", ID, nullable=False),
        sa.Column("runner", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(128), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("instance_id", ID, nullable=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_job_attempts"),
        sa.CheckConstraint(_one_of("status", ("running", "ok", "error", "interrupted")), name="ck_job_attempts_status"),
    )
    op.create_index("ix_job_attempts_runner_job_id", "job_attempts", ["runner", "job_id"])
    op.create_index("ix_job_attempts_started_at", "job_attempts", ["started_at"])
    op.create_index("ix_job_attempts_instance_id", "job_attempts", ["instance_id"])
    with op.batch_alter_table("instances") as instances:
        instances.add_column(sa.Column("role", sa.String(16), nullable=True))

    if postgres:
        _engine_schema(connection)
        # a pass still owed to a chat goes to the engine's queue (one per chat: its queueing lock)
        connection.execute(
            sa.text(
                "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, queueing_lock, args, status) "
                "SELECT DISTINCT ON (chat_id) 'default', 'compaction.pass', 'chat:' || chat_id, 'chat:' || chat_id, "
                "jsonb_build_object('chat_id', chat_id), 'todo' "
                "FROM compaction_jobs WHERE status IN ('pending', 'running') ORDER BY chat_id, created_at"
            )
        )
    else:
        connection.execute(
            sa.text(
                "INSERT INTO jobs (id, task, args, lock, status, attempts, run_after, created_at, updated_at) "
                "SELECT id, 'compaction.pass', json_object('chat_id', chat_id), 'chat:' || chat_id, 'queued', 0, "
                "created_at, created_at, updated_at FROM compaction_jobs "
                "WHERE status IN ('pending', 'running') AND id IN "
                "(SELECT min(id) FROM compaction_jobs WHERE status IN ('pending', 'running') GROUP BY chat_id)"
            )
        )
    op.drop_table("compaction_jobs")


def downgrade() -> None:
    connection = op.get_bind()
    op.create_table(
        "compaction_jobs",
        sa.Column("id", ID, nullable=False),
        sa.Column("chat_id", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("instance_id", ID, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_compaction_jobs"),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_compaction_jobs_chat_id_chats", ondelete="CASCADE"),
        sa.CheckConstraint(_one_of("status", ("pending", "running", "done")), name="ck_compaction_jobs_status"),
    )
    op.create_index("ix_compaction_jobs_status_created_at", "compaction_jobs", ["status", "created_at"])
    op.create_index("ix_compaction_jobs_chat_id", "compaction_jobs", ["chat_id"])
    op.create_index("ix_compaction_jobs_instance_id", "compaction_jobs", ["instance_id"])
    with op.batch_alter_table("instances") as instances:
        instances.drop_column("role")
    op.drop_table("job_attempts")
    op.drop_table("jobs")
    if connection.dialect.name == "postgresql":
        for table in (
            "procrastinate_events",
            "procrastinate_periodic_defers",
            "procrastinate_jobs",
            "procrastinate_workers",
        ):
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {table} CASCADE"))
        functions = connection.execute(
            sa.text(
                "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE p.proname LIKE 'procrastinate%' AND n.nspname = current_schema()"
            )
        ).scalars()
        for signature in list(functions):
            connection.execute(sa.text(f"DROP FUNCTION IF EXISTS {signature} CASCADE"))
        types = connection.execute(
            sa.text(
                "SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                "WHERE t.typname LIKE 'procrastinate%' AND t.typtype IN ('e', 'c') AND n.nspname = current_schema()"
            )
        ).scalars()
        for name in list(types):
            connection.execute(sa.text(f"DROP TYPE IF EXISTS {name} CASCADE"))
