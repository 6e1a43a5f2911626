"""Real databases for the tests: a SQLite file per test, and PostgreSQL when configured.

PostgreSQL runs when ``CONTEXTSHIFT_TEST_POSTGRES_URL`` names a server (e.g.
``postgresql://postgres@127.0.0.1:5432/test``). The session creates its own database ``cs_test_<hex>``
there (other runs share the server) and drops it at the end; each test gets a fresh schema in it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.engine import make_url

from contextshift.storage import Database

PG_ENV = "CONTEXTSHIFT_TEST_POSTGRES_URL"
PG_SKIP = f"set {PG_ENV} to run PostgreSQL tests"


@dataclass
class Backend:
    """Where a test's database lives; :meth:`database` makes a (not yet started) ``Database`` there."""

    name: str
    url: str
    engine_options: dict[str, Any] = field(default_factory=dict)

    def database(self, **options: Any) -> Database:
        return Database(self.url, engine_options=self.engine_options, **options)


def _plain_dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


async def _pg_execute(dsn: str, *statements: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def _run_apart(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine on its own loop in a worker thread (the fixture may be set up inside a loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a PostgreSQL database created for this test session (dropped at the end)."""
    server = os.environ.get(PG_ENV, "").strip()
    if not server:
        pytest.skip(PG_SKIP)
    name = f"cs_test_{uuid.uuid4().hex[:16]}"
    _run_apart(_pg_execute(_plain_dsn(server), f'CREATE DATABASE "{name}"'))
    try:
        yield _plain_dsn(server, name)
    finally:
        _run_apart(_pg_execute(_plain_dsn(server), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh, empty database: a SQLite file, or a new schema in the session's PostgreSQL database."""
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite:///{tmp_path / 'data' / 'test.db'}")
        return
    database_url: str = request.getfixturevalue("pg_database")
    schema = f"s_{uuid.uuid4().hex[:16]}"
    await _pg_execute(database_url, f'CREATE SCHEMA "{schema}"')
    try:
        yield Backend(
            "postgresql",
            database_url,
            {"connect_args": {"server_settings": {"search_path": schema}}},
        )
    finally:
        await _pg_execute(database_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
