"""Schema migrations, run programmatically with Alembic (V2).

The Alembic config is built in code and points at the ``migrations`` folder next to this file, so it
works from an installed package whatever the working directory. Adding a revision: put
``migrations/versions/000N_<slug>.py`` with ``down_revision`` = the previous id (see ``alembic.ini``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from .secret_key import bind_key
from .urls import normalize_url, secure_sqlite_file, sqlite_path

MIGRATIONS_PATH = Path(__file__).resolve().parent / "migrations"

#: Key of the PostgreSQL advisory lock that serializes migrations of instances starting together.
_PG_LOCK_KEY = 0x636F6E7478  # "contx"

__all__ = [
    "MIGRATIONS_PATH",
    "alembic_config",
    "connect_for_migrations",
    "current_revision",
    "head_revision",
    "upgrade",
    "upgrade_connection",
]


def alembic_config(migrations_path: Path | None = None) -> Config:
    """An Alembic config for the package's migrations (or for ``migrations_path``)."""
    config = Config()
    config.set_main_option("script_location", str(migrations_path or MIGRATIONS_PATH))
    return config


def head_revision(migrations_path: Path | None = None) -> str:
    """The newest revision id of the migration scripts."""
    head = ScriptDirectory.from_config(alembic_config(migrations_path)).get_current_head()
    if head is None:
        raise RuntimeError("no migration scripts found")
    return head


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(connection: AsyncConnection) -> str | None:
    """The revision the database is at, or None for an empty (unversioned) database."""
    return await connection.run_sync(_current)


@asynccontextmanager
async def connect_for_migrations(
    url: str | URL, engine_options: Mapping[str, Any] | None = None, *, secret_key: bytes | None = None
) -> AsyncIterator[AsyncConnection]:
    """A connection in one transaction for running migrations, committed when the block succeeds.

    SQLite: the file's folder is created, WAL is enabled, foreign keys are off while tables are rebuilt
    (and checked before the commit), and DDL is transactional (explicit ``BEGIN IMMEDIATE``).
    PostgreSQL: an advisory lock makes instances that start together migrate one after the other.
    ``secret_key``: the key a migration encrypts stored values with (``secret_key.bind_key``).
    """
    parsed = normalize_url(url)
    engine = create_async_engine(parsed, poolclass=NullPool, **dict(engine_options or {}))
    if secret_key is not None:
        bind_key(engine.sync_engine.dialect, secret_key)
    is_sqlite = parsed.drivername.startswith("sqlite")
    if is_sqlite:
        path = sqlite_path(parsed)
        wal = path is not None
        if path is not None:
            secure_sqlite_file(path)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            if wal:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=OFF")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        async with engine.begin() as connection:
            if parsed.drivername.startswith("postgresql"):
                await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            yield connection
            if is_sqlite:
                problems = (await connection.exec_driver_sql("PRAGMA foreign_key_check")).fetchall()
                if problems:
                    raise RuntimeError(f"migration left {len(problems)} broken foreign key(s)")
    finally:
        await engine.dispose()


def _upgrade(connection: Connection, config: Config, revision: str) -> None:
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade(
    url: str | URL,
    revision: str = "head",
    *,
    migrations_path: Path | None = None,
    engine_options: Mapping[str, Any] | None = None,
    secret_key: bytes | None = None,
) -> str | None:
    """Migrate the database at ``url`` to ``revision`` (default: head); returns the revision it is at.
    ``secret_key`` as in :func:`connect_for_migrations`."""
    async with connect_for_migrations(url, engine_options, secret_key=secret_key) as connection:
        return await upgrade_connection(connection, revision, migrations_path=migrations_path)


async def upgrade_connection(
    connection: AsyncConnection, revision: str = "head", *, migrations_path: Path | None = None
) -> str | None:
    """Migrate through an open connection (the caller commits); returns the revision it is at."""
    await connection.run_sync(_upgrade, alembic_config(migrations_path), revision)
    return await current_revision(connection)
