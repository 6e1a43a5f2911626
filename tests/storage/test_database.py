"""Database: URLs, migrations on start (fresh and from an older revision), sessions, SQLite settings."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from contextshift.settings import Settings
from contextshift.storage import Database, Repositories, default_database_url, head_revision, normalize_url
from contextshift.storage.configured import configured_database
from contextshift.storage.migrate import upgrade
from contextshift.storage.repositories.search import is_search_object
from contextshift.storage.tables import ENGINE_TABLE_PREFIX, Base, ProviderRow
from contextshift.storage.urls import display_url

from .conftest import Backend
from .seed import seed_chat

TABLES = {
    "providers",
    "models",
    "bots",
    "lorebooks",
    "lorebook_entries",
    "memories",
    "chats",
    "messages",
    "message_tokens",
    "prompt_context_audits",
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///data/x.db", "sqlite+aiosqlite:///data/x.db"),
        ("sqlite+aiosqlite:////abs/x.db", "sqlite+aiosqlite:////abs/x.db"),
        ("postgresql://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
        ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
    ],
)
def test_plain_urls_are_normalized_to_async_drivers(given: str, expected: str) -> None:
    assert normalize_url(given).render_as_string(hide_password=False) == expected


def test_unsupported_database_is_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported database"):
        normalize_url("mysql://u@h/db")


def test_display_url_hides_the_password() -> None:
    shown = display_url("postgresql://user:hunter2@db.example/app")
    assert "hunter2" not in shown
    assert "hunter2" not in repr(Database("postgresql://user:hunter2@db.example/app"))


def test_default_url_is_a_sqlite_file_in_the_user_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    url = default_database_url()
    assert url == f"sqlite:///{tmp_path / 'xdg' / 'contextshift' / 'contextshift.db'}"
    assert (tmp_path / "xdg" / "contextshift").is_dir()


def test_the_data_dir_setting_moves_the_default_sqlite_file(tmp_path: Path) -> None:
    settings = Settings.from_env({"CONTEXTSHIFT_DATA_DIR": str(tmp_path / "state")})
    assert configured_database(settings).url.render_as_string() == (
        f"sqlite+aiosqlite:///{tmp_path / 'state' / 'contextshift.db'}"
    )
    assert default_database_url(settings.data_dir) == f"sqlite:///{tmp_path / 'state' / 'contextshift.db'}"
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700


def test_the_database_url_setting_overrides_the_default_url(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"CONTEXTSHIFT_DATABASE_URL": "postgresql://u@h/cs", "CONTEXTSHIFT_DATA_DIR": str(tmp_path)}
    )
    assert configured_database(settings).url.render_as_string() == "postgresql+asyncpg://u@h/cs"
    assert configured_database(settings, "sqlite:///x.db").url.render_as_string() == "sqlite+aiosqlite:///x.db"


def test_the_instance_and_heartbeat_settings_reach_the_database(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "CONTEXTSHIFT_INSTANCE_ID": "api-1",
            "CONTEXTSHIFT_HEARTBEAT_SECONDS": "0.5",
            "CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS": "4",
            "CONTEXTSHIFT_DATA_DIR": str(tmp_path),
        }
    )
    db = configured_database(settings, "sqlite:///:memory:")
    assert (db.instance_id, db.heartbeat.interval, db.heartbeat.expiry.total_seconds()) == ("api-1", 0.5, 4.0)
    one_off = configured_database(settings, "sqlite:///:memory:", instance=False)
    assert one_off.instance_id != "api-1" and len(one_off.instance_id) == 32
    plain = Database("sqlite:///:memory:")
    assert (plain.heartbeat.interval, plain.heartbeat.expiry.total_seconds()) == (10.0, 30.0)


async def test_start_migrates_an_empty_database_to_head(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    try:
        assert await db.revision() == head_revision()
        async with db.engine.connect() as connection:
            names = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert names >= TABLES
    finally:
        await db.close()


def _declared(name: str | None, _type: str, _parent: Any) -> bool:
    """Not in tables.py: the full-text search index (FTS5 table and shadow tables, PostgreSQL expression index)
    and, on PostgreSQL, the job engine's own tables (V8), which its schema script creates."""
    return not is_search_object(name) and not (name or "").startswith(ENGINE_TABLE_PREFIX)


def _schema_diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True, "include_name": _declared})
    return list(compare_metadata(context, Base.metadata))


async def test_migrations_create_exactly_the_declared_schema(db: Database) -> None:
    async with db.engine.connect() as connection:
        assert await connection.run_sync(_schema_diff) == []


async def test_start_upgrades_a_database_at_an_older_revision(backend: Backend) -> None:
    assert await upgrade(backend.url, "0001", engine_options=backend.engine_options) == "0001"
    engine = create_async_engine(normalize_url(backend.url), **backend.engine_options)
    async with engine.begin() as connection:  # rows written by a 0001-era service
        now = datetime(2026, 1, 1, tzinfo=UTC)
        await connection.execute(
            text(
                "INSERT INTO bots (id, name, system_prompt, persona, context_strategy, response_reserve, "
                "lorebook_ids, author_note_depth, created_at, updated_at) VALUES "
                "('b1', 'Ada', '', '', 'truncate', 1024, '[]', 4, :now, :now)"
            ),
            {"now": now},
        )
        await connection.execute(
            text(
                "INSERT INTO chats (id, bot_id, type, title, history_version, last_seq, created_at, updated_at) "
                "VALUES ('c1', 'b1', 'chat', 'first', 0, 0, :now, :now)"
            ),
            {"now": now},
        )
    await engine.dispose()
    new = backend.database()
    await new.start()
    try:
        assert await new.revision() == head_revision()
        async with new.session() as session:
            repos = Repositories(session)
            bot = await repos.bots.get("b1")
            assert bot is not None and bot.compaction_enabled is True and bot.compaction_threshold == 0
            chat = await repos.chats.get("c1")
            assert chat is not None and chat.title == "first" and chat.usage_input_tokens == 0
    finally:
        await new.close()


async def test_restarting_keeps_data_and_revision(backend: Backend) -> None:
    db = backend.database()
    await db.start()
    seeded = await seed_chat(db)
    await db.close()
    await db.start()
    try:
        assert await db.revision() == head_revision()
        async with db.session() as session:
            assert (await Repositories(session).bots.get(seeded.bot_id)) is not None
    finally:
        await db.close()


async def test_start_does_not_depend_on_the_working_directory(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    db = backend.database()
    await db.start()
    try:
        assert await db.revision() == head_revision()
    finally:
        await db.close()


async def test_session_commits_on_success_and_rolls_back_on_error(db: Database) -> None:
    async with db.session() as session:
        await Repositories(session).providers.create(name="kept", kind="openai", base_url="http://a")
    with pytest.raises(RuntimeError):
        async with db.session() as session:
            await Repositories(session).providers.create(name="lost", kind="openai", base_url="http://b")
            raise RuntimeError("boom")
    async with db.session() as session:
        names = (await session.scalars(select(ProviderRow.name))).all()
    assert names == ["kept"]


async def test_session_before_start_is_an_error(backend: Backend) -> None:
    db = backend.database()
    with pytest.raises(RuntimeError, match="not started"):
        async with db.session():
            pass


async def test_sqlite_connections_enforce_foreign_keys_in_wal_mode(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'new' / 'dir' / 'x.db'}")
    await db.start()
    try:
        async with db.session() as session:
            assert (await session.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
            assert (await session.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
    finally:
        await db.close()


async def test_in_memory_sqlite_is_migrated_too() -> None:
    async with Database("sqlite:///:memory:") as db:
        assert await db.revision() == head_revision()
        seeded = await seed_chat(db)
        async with db.session() as session:
            assert (await Repositories(session).chats.get(seeded.chat_id)) is not None


async def test_a_task_cancelled_as_the_sqlite_write_lock_is_granted_is_still_cancelled(tmp_path: Path) -> None:
    # The lock is handed to the waiting task and the task is cancelled in the same loop step: the
    # cancellation must win (asyncio.wait_for on Python 3.11 would drop it, and the task would write on).
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    await db.start()
    try:
        await _cancel_as_the_lock_is_granted(db)
    finally:
        await db.close()


async def _cancel_as_the_lock_is_granted(db: Database) -> None:
    wrote: list[str] = []
    holding = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with db.session():
            holding.set()
            await release.wait()

    async def waiter() -> None:
        async with db.session():
            wrote.append("after the cancel")

    first = asyncio.create_task(holder())
    await holding.wait()
    second = asyncio.create_task(waiter())
    for _ in range(3):  # let the waiter queue up on the lock
        await asyncio.sleep(0)
    release.set()
    for _ in range(20):  # counted steps, not the clock: the holder commits and hands the lock on
        await asyncio.sleep(0)
        if first.done():
            break
    assert first.done()
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert wrote == []
