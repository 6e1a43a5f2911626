"""Full-text search over chat messages (G4a): SQLite FTS5 kept in step by triggers, PostgreSQL GIN.

The ``recall`` strategy searches a chat's older history through this index, so a turn on a 100k-message
chat reads a few candidate rows instead of the whole chat.

* SQLite: the FTS5 table ``messages_fts`` (``porter unicode61``) holds each message's words (its content:
  the text of a string, the JSON of a list of parts; and its tool calls' JSON) and its chat id, under the
  message row's ``rowid``. Triggers on ``messages`` insert, replace and delete its entry.
* PostgreSQL: the stored generated column ``messages.search_vector``, the ``english`` tsvector of every
  string inside ``content`` and ``tool_calls`` (``jsonb_to_tsvector``), with the GIN index
  ``ix_messages_search``. The column is not in ``tables.py``: the ORM never reads or writes it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _body(row: str) -> str:
    content = f"{row}.content"
    return (
        f"coalesce(CASE WHEN json_valid({content}) AND json_type({content}) = 'text' "
        f"THEN json_extract({content}, '$') ELSE {content} END, '') || ' ' || coalesce({row}.tool_calls, '')"
    )


SQLITE_UP = [
    "CREATE VIRTUAL TABLE messages_fts USING fts5(body, chat_id, tokenize = 'porter unicode61')",
    f"INSERT INTO messages_fts (rowid, body, chat_id) SELECT rowid, {_body('messages')}, chat_id FROM messages",
    f"""CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, body, chat_id) VALUES (new.rowid, {_body("new")}, new.chat_id);
    END""",
    """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        DELETE FROM messages_fts WHERE rowid = old.rowid;
    END""",
    f"""CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_calls, chat_id ON messages BEGIN
        DELETE FROM messages_fts WHERE rowid = old.rowid;
        INSERT INTO messages_fts (rowid, body, chat_id) VALUES (new.rowid, {_body("new")}, new.chat_id);
    END""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS messages_fts_update",
    "DROP TRIGGER IF EXISTS messages_fts_delete",
    "DROP TRIGGER IF EXISTS messages_fts_insert",
    "DROP TABLE IF EXISTS messages_fts",
]
PG_DOCUMENT = (
    "jsonb_to_tsvector('english'::regconfig, coalesce(content, 'null'::jsonb), '[\"string\"]'::jsonb) || "
    "jsonb_to_tsvector('english'::regconfig, coalesce(tool_calls, '[]'::jsonb), '[\"string\"]'::jsonb)"
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_UP:
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(f"ALTER TABLE messages ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({PG_DOCUMENT}) STORED")
        op.execute("CREATE INDEX ix_messages_search ON messages USING gin (search_vector)")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_DOWN:
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_search")
        op.execute("ALTER TABLE messages DROP COLUMN IF EXISTS search_vector")
