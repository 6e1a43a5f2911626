"""Database URLs: the default SQLite file, the data directory and async-driver normalization."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from sqlalchemy.engine import URL, make_url

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}


def data_dir(configured: str | Path | None = None) -> Path:
    """Where the service keeps its files (the default SQLite file, the encryption key): ``configured``
    (``CONTEXTSHIFT_DATA_DIR``, through ``Settings``), else the user's data directory. Created (readable by its
    owner only) when it is missing."""
    directory = Path(configured).expanduser() if configured else Path(platformdirs.user_data_dir("contextshift"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def default_database_url(directory: str | Path | None = None) -> str:
    """``contextshift.db`` in :func:`data_dir` (of ``directory``, the ``CONTEXTSHIFT_DATA_DIR`` setting); the
    commands use ``CONTEXTSHIFT_DATABASE_URL`` instead when it is set."""
    return f"sqlite:///{data_dir(directory) / 'contextshift.db'}"


def normalize_url(url: str | URL) -> URL:
    """The URL with its async driver: ``sqlite://`` → aiosqlite, ``postgresql://`` → asyncpg.

    Raises ``ValueError`` for any other database.
    """
    parsed = make_url(url) if isinstance(url, str) else url
    driver = _ASYNC_DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ValueError(f"unsupported database {parsed.drivername!r}: use a sqlite:/// or postgresql:// URL")
    return parsed.set(drivername=driver)


def display_url(url: str | URL) -> str:
    """The URL with any password masked, safe for logs."""
    parsed = make_url(url) if isinstance(url, str) else url
    return parsed.render_as_string(hide_password=True)


def secure_sqlite_file(path: Path) -> None:
    """Make the SQLite file (created empty when missing) and its WAL and shared-memory files readable by their
    owner only (0600, N2): they hold every chat. SQLite creates the WAL files with the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
        except FileNotFoundError:
            pass
        except PermissionError:  # not ours (a shared file): leave it as its owner set it
            pass


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite URL, or None for an in-memory database or another backend."""
    if not url.drivername.startswith("sqlite"):
        return None
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)
