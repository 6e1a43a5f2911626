"""Fixtures of the job tests: a started database on each backend (SQLite: the embedded runner; PostgreSQL: the
job engine) and the fake provider."""

from __future__ import annotations

from tests.fakes.fixtures import fake_provider, fake_provider_server
from tests.storage.conftest import Backend, backend, db, pg_database

__all__ = ["Backend", "backend", "db", "fake_provider", "fake_provider_server", "pg_database"]
