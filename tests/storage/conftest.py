"""Fixtures of the storage tests: the shared real databases (``tests.databases``) and a started ``Database``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contextshift.storage import Database
from tests.databases import PG_ENV, PG_SKIP, Backend, backend, pg_database

__all__ = ["PG_ENV", "PG_SKIP", "Backend", "backend", "db", "pg_database"]


@pytest.fixture
async def db(backend: Backend) -> AsyncIterator[Database]:
    """A started (migrated) database."""
    database = backend.database()
    await database.start()
    try:
        yield database
    finally:
        await database.close()
