"""One vocabulary (issue 24): one word for success and one for failure in every stored status.

Success was spelled three ways and failure two: a compaction log ``ok``/``error``/``noop``, a job ``succeeded``,
a job attempt ``ok``/``error``, beside an audit's ``completed``/``failed``. This revision rewrites the stored
rows and the check constraints to the words of ``core/vocabulary.py``:

* ``compaction_logs.status``: ``ok`` → ``completed``, ``error`` → ``failed``, ``noop`` → ``skipped``;
* ``jobs.status`` (the embedded runner's): ``succeeded`` → ``completed``;
* ``job_attempts.status``: ``ok`` → ``completed``, ``error`` → ``failed``.

The audits' statuses (``prepared``, ``completed``, ``failed``, ``cancelled``) already were the words; the job
engine's own tables on PostgreSQL (``procrastinate_*``) keep the engine's words, which the service maps.

Reason codes are kebab-case now. No column holds one (a compaction log keeps an error code, which stays
``UPPER_SNAKE``), but two live in stored JSON and are rewritten too:

* ``messages.meta.partial_reason``: ``provider_error`` → ``provider-error``;
* ``calibration_doubted.reason`` in ``prompt_context_audits.payload`` and ``proxy_audits.payload``:
  ``report_at_window`` → ``report-at-window``, ``report_far_below_count`` → ``report-far-below-count``.

(A reply's earlier versions in ``messages.alternatives`` keep the word they were stored with: the web UI reads
only whether a partial reason is ``cancelled``.)

The words are written out here, not imported, so this revision keeps meaning what it meant when the vocabulary
moves on. On SQLite a check constraint changes by copying the table (batch mode), so the old check goes first,
the rows are rewritten, and the new check comes after.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Each table's status words before (0022) and after (0023), and the renames between them (old → new).
OLD = {
    "compaction_logs": ("running", "ok", "error", "noop"),
    "jobs": ("queued", "running", "succeeded", "failed"),
    "job_attempts": ("running", "ok", "error", "interrupted"),
}
NEW = {
    "compaction_logs": ("running", "completed", "failed", "skipped"),
    "jobs": ("queued", "running", "completed", "failed"),
    "job_attempts": ("running", "completed", "failed", "interrupted"),
}
RENAMES = {
    "compaction_logs": {"ok": "completed", "error": "failed", "noop": "skipped"},
    "jobs": {"succeeded": "completed"},
    "job_attempts": {"ok": "completed", "error": "failed"},
}


#: The reasons kept in JSON: (table, column, path inside the document, old → new).
DOUBT_RENAMES = {"report_at_window": "report-at-window", "report_far_below_count": "report-far-below-count"}
JSON_RENAMES: tuple[tuple[str, str, tuple[str, ...], dict[str, str]], ...] = (
    ("messages", "meta", ("partial_reason",), {"provider_error": "provider-error"}),
    ("prompt_context_audits", "payload", ("calibration_doubted", "reason"), DOUBT_RENAMES),
    ("proxy_audits", "payload", ("calibration_doubted", "reason"), DOUBT_RENAMES),
)


def _one_of(values: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(v) for v in values)})"


def _rewrite(table: str, renames: dict[str, str], statuses: tuple[str, ...]) -> None:
    """Drop ``table``'s status check, rename the stored words, and check ``statuses`` from now on."""
    name = f"ck_{table}_status"
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="check")
    else:
        op.drop_constraint(name, table, type_="check")
    for old, new in renames.items():
        op.execute(sa.text(f"UPDATE {table} SET status = :new WHERE status = :old").bindparams(old=old, new=new))
    if sqlite:
        with op.batch_alter_table(table) as batch:
            batch.create_check_constraint(name, sa.text(_one_of(statuses)))
    else:
        op.create_check_constraint(name, table, sa.text(_one_of(statuses)))


def _rewrite_json(table: str, column: str, path: tuple[str, ...], renames: dict[str, str]) -> None:
    """Rename the string at ``path`` inside ``table.column``'s JSON documents (other documents stay as they are)."""
    if op.get_bind().dialect.name == "sqlite":
        where = "$." + ".".join(path)
        statement = (
            f"UPDATE {table} SET {column} = json_set({column}, '{where}', :new) "
            f"WHERE json_valid({column}) AND json_extract({column}, '{where}') = :old"
        )
    else:
        where = "{" + ",".join(path) + "}"
        statement = (
            f"UPDATE {table} SET {column} = jsonb_set({column}, '{where}', to_jsonb(CAST(:new AS text))) "
            f"WHERE {column} #>> '{where}' = :old"
        )
    for old, new in renames.items():
        op.execute(sa.text(statement).bindparams(old=old, new=new))


def upgrade() -> None:
    for table, renames in RENAMES.items():
        _rewrite(table, renames, NEW[table])
    for table, column, path, words in JSON_RENAMES:
        _rewrite_json(table, column, path, words)


def downgrade() -> None:
    for table, renames in RENAMES.items():
        _rewrite(table, {new: old for old, new in renames.items()}, OLD[table])
    for table, column, path, words in JSON_RENAMES:
        _rewrite_json(table, column, path, {new: old for old, new in words.items()})
