"""Migration 0023 (issue 24): stored statuses take the one vocabulary's words, and give them back on downgrade."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

import contextshift.storage as storage
from contextshift.core import vocabulary as v
from contextshift.storage import Database, Repositories
from contextshift.storage.migrate import alembic_config, connect_for_migrations, current_revision, upgrade
from tests.databases import Backend

from .seed import Seeded, seed_chat

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_PATH = Path(storage.__file__).parent / "migrations" / "versions" / "0023_one_vocabulary.py"
_SPEC = importlib.util.spec_from_file_location("migration_0023", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
MIGRATION = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(MIGRATION)
#: One row per stored word of 0022, by table: (row id, status).
OLD_ROWS = {
    "compaction_logs": [("c1", "running"), ("c2", "ok"), ("c3", "error"), ("c4", "noop")],
    "jobs": [("j1", "queued"), ("j2", "running"), ("j3", "succeeded"), ("j4", "failed")],
    "job_attempts": [("a1", "running"), ("a2", "ok"), ("a3", "error"), ("a4", "interrupted")],
}
NEW_ROWS = {
    "compaction_logs": {"c1": "running", "c2": "completed", "c3": "failed", "c4": "skipped"},
    "jobs": {"j1": "queued", "j2": "running", "j3": "completed", "j4": "failed"},
    "job_attempts": {"a1": "running", "a2": "completed", "a3": "failed", "a4": "interrupted"},
}


def _downgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


def _now(backend: Backend) -> datetime:
    return NOW.replace(tzinfo=None) if backend.name == "sqlite" else NOW


async def _insert(
    connection: AsyncConnection, backend: Backend, seeded: Seeded, table: str, row_id: str, status: str
) -> None:
    """A row as the service writes it, with only the columns that have no default."""
    statements = {
        "compaction_logs": "INSERT INTO compaction_logs (id, bot_id, chat_id, status, trigger, message_count, passes, "
        "started_at) VALUES (:id, :bot, :chat, :status, 'manual', 0, 0, :now)",
        "jobs": "INSERT INTO jobs (id, task, args, status, attempts, run_after, created_at, updated_at) "
        "VALUES (:id, 'compaction.pass', '{}', :status, 1, :now, :now, :now)",
        "job_attempts": "INSERT INTO job_attempts (id, runner, job_id, task, attempt, status, started_at) "
        "VALUES (:id, 'local', :id, 'compaction.pass', 1, :status, :now)",
    }
    params = {"id": row_id, "status": status, "now": _now(backend), "bot": seeded.bot_id, "chat": seeded.chat_id}
    await connection.execute(text(statements[table]), params)


async def _statuses(connection: AsyncConnection, table: str) -> dict[str, str]:
    rows = await connection.execute(text(f"SELECT id, status FROM {table}"))
    return {str(row_id): str(status) for row_id, status in rows}


async def _json_rows(db: Database, seeded: Seeded) -> None:
    """Two partial replies (one failed mid-stream, one stopped) and an audit whose count was doubted, as a
    0022-era service stored them."""
    replies = [
        {"role": "assistant", "content": "cut", "meta": {"partial": True, "partial_reason": "provider_error"}},
        {"role": "assistant", "content": "stopped", "meta": {"partial": True, "partial_reason": "cancelled"}},
    ]
    async with db.session() as session:
        repos = Repositories(session)
        await repos.messages.append_many(seeded.chat_id, replies)
        doubt = {"reason": "report_at_window", "reported_tokens": 8192, "estimated_tokens": 9000}
        await repos.audits.prepare(seeded.chat_id, "g1", {"calibration_doubted": doubt, "diagnostics": []})


async def _json_words(connection: AsyncConnection) -> tuple[list[str], list[str]]:
    """The stored partial reasons (by content) and the audits' doubt reasons, read back through JSON."""
    messages = await connection.execute(text("SELECT content, meta FROM messages ORDER BY seq"))
    partial = [_doc(meta).get("partial_reason", "") for _content, meta in messages]
    audits = await connection.execute(text("SELECT payload FROM prompt_context_audits"))
    doubts = [_doc(payload)["calibration_doubted"]["reason"] for (payload,) in audits]
    return partial, doubts


def _doc(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str) else value)


async def _refused(connection: AsyncConnection, backend: Backend, seeded: Seeded, table: str, status: str) -> bool:
    """Whether the table's check refuses ``status`` (the refused insert is rolled back to a savepoint)."""
    try:
        async with connection.begin_nested():
            await _insert(connection, backend, seeded, table, "refused", status)
    except IntegrityError:
        return True
    return False


async def test_stored_statuses_take_the_one_vocabulary_and_the_downgrade_gives_the_old_words_back(
    backend: Backend,
) -> None:
    db = backend.database()
    await db.start()
    try:
        seeded = await seed_chat(db)
        await _json_rows(db, seeded)
    finally:
        await db.close()
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        await connection.run_sync(_downgrade, "0022")
        assert await current_revision(connection) == "0022"
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        for table, rows in OLD_ROWS.items():
            for row_id, status in rows:
                await _insert(connection, backend, seeded, table, row_id, status)
        assert await _json_words(connection) == (["provider_error", "cancelled"], ["report_at_window"])
        assert await _refused(connection, backend, seeded, "jobs", "completed")

    assert await upgrade(backend.url, engine_options=backend.engine_options) == "0024"
    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        for table, expected in NEW_ROWS.items():
            assert await _statuses(connection, table) == expected
            assert set(expected.values()) <= set(v.STATUS_WORDS)
        assert await _refused(connection, backend, seeded, "compaction_logs", "ok")
        assert await _refused(connection, backend, seeded, "compaction_logs", "noop")
        assert await _refused(connection, backend, seeded, "jobs", "succeeded")
        assert await _refused(connection, backend, seeded, "job_attempts", "error")
        assert await _json_words(connection) == (["provider-error", "cancelled"], ["report-at-window"])
        assert {"provider-error", "cancelled"} <= set(v.PARTIAL_REASONS)

    async with connect_for_migrations(backend.url, backend.engine_options) as connection:
        await connection.run_sync(_downgrade, "0022")
        for table, rows in OLD_ROWS.items():
            assert await _statuses(connection, table) == dict(rows)
        assert await _json_words(connection) == (["provider_error", "cancelled"], ["report_at_window"])
        assert await _refused(connection, backend, seeded, "compaction_logs", "skipped")


@pytest.mark.parametrize("table", sorted(v.RENAMED_STATUSES))
def test_the_migration_renames_what_the_vocabulary_says_was_renamed(table: str) -> None:
    now = {"compaction_logs": v.COMPACTION_STATUSES, "jobs": v.JOB_STATUSES, "job_attempts": v.ATTEMPT_STATUSES}
    assert MIGRATION.RENAMES[table] == v.RENAMED_STATUSES[table]
    assert MIGRATION.NEW[table] == now[table]
    assert {MIGRATION.RENAMES[table].get(word, word) for word in MIGRATION.OLD[table]} == set(now[table])


def test_the_migration_rewrites_the_json_reasons_the_vocabulary_says_were_renamed() -> None:
    renamed = {old: new for _table, _column, _path, words in MIGRATION.JSON_RENAMES for old, new in words.items()}
    assert renamed == v.RENAMED_REASONS
    assert v.PROVIDER_ERROR in v.PARTIAL_REASONS
