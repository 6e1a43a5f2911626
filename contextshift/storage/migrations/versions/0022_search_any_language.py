"""Search in every language (issue 27): substrings by characters, beside migration 0007's stemmed index.

The chat search matches each word searched for as a substring of a message (CJK words inside a sentence,
emoji, any script), after cutting it to its stem where a stemmer knows the script (``пятница`` →
``пятниц`` finds ``пятницу``). This revision adds the index that makes a substring search fast:

* SQLite: the FTS5 table ``messages_trigram`` (``trigram`` tokenizer, case-folded) holds each message's text
  as ``messages_fts`` does, under the message row's ``rowid``, kept in step by triggers. A ``MATCH`` of a
  quoted string of 3 or more characters is a substring match through the index; a shorter one is a ``LIKE``
  over the table.
* PostgreSQL: the ``pg_trgm`` extension and a GIN trigram index ``ix_messages_trigram`` over the message's
  text (``content #>> '{}'`` and its tool calls), used by ``ILIKE``. Where the extension cannot be created
  (no rights), the search still works, by a scan.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _body(row: str) -> str:
    content = f"{row}.content"
    return (
        f"coalesce(CASE WHEN json_valid({content}) AND json_type({content}) = 'text' "
        f"THEN json_extract({content}, '$') ELSE {content} END, '') || ' ' || coalesce({row}.tool_calls, '')"
    )


SQLITE_UP = [
    "CREATE VIRTUAL TABLE messages_trigram USING fts5(body, tokenize = 'trigram')",
    f"INSERT INTO messages_trigram (rowid, body) SELECT rowid, {_body('messages')} FROM messages",
    f"""CREATE TRIGGER messages_trigram_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_trigram (rowid, body) VALUES (new.rowid, {_body("new")});
    END""",
    """CREATE TRIGGER messages_trigram_delete AFTER DELETE ON messages BEGIN
        DELETE FROM messages_trigram WHERE rowid = old.rowid;
    END""",
    f"""CREATE TRIGGER messages_trigram_update AFTER UPDATE OF content, tool_calls ON messages BEGIN
        DELETE FROM messages_trigram WHERE rowid = old.rowid;
        INSERT INTO messages_trigram (rowid, body) VALUES (new.rowid, {_body("new")});
    END""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS messages_trigram_update",
    "DROP TRIGGER IF EXISTS messages_trigram_delete",
    "DROP TRIGGER IF EXISTS messages_trigram_insert",
    "DROP TABLE IF EXISTS messages_trigram",
]
#: The message's text on PostgreSQL: the same expression the search's ``ILIKE`` reads, so the index serves it.
PG_TEXT = "(coalesce(content #>> '{}', '') || ' ' || coalesce(tool_calls::text, ''))"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_UP:
            op.execute(statement)
    elif dialect == "postgresql":
        has_trgm = (
            op.get_bind()
            .exec_driver_sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'")
            .scalar()
        )
        if has_trgm:
            op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            # The operator class by its schema: the extension may live outside the search path.
            schema = (
                op.get_bind()
                .exec_driver_sql(
                    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace "
                    "WHERE e.extname = 'pg_trgm'"
                )
                .scalar()
            )
            opclass = f'"{schema}".gin_trgm_ops'
            op.execute(f"CREATE INDEX ix_messages_trigram ON messages USING gin ({PG_TEXT} {opclass})")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_DOWN:
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_trigram")
