"""The ``Database``: engine, migrations on start, sessions, and crash recovery of audits."""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from ..core.errors import ContextShiftError
from . import migrate
from .liveness import DEFAULT_EXPIRY, DEFAULT_INTERVAL, Heartbeat
from .readcache import DEFAULT_TTL, ReadCache, TableWrites
from .secret_key import bind_key
from .types import new_id
from .urls import default_database_url, display_url, normalize_url, sqlite_path

log = logging.getLogger(__name__)


class _DropDriverDebug(logging.Filter):
    """aiosqlite logs every call with its SQL parameters at DEBUG, provider API keys included (N2)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


_aiosqlite_log = logging.getLogger("aiosqlite")
if not any(isinstance(f, _DropDriverDebug) for f in _aiosqlite_log.filters):
    _aiosqlite_log.addFilter(_DropDriverDebug())


def _json_text(value: Any) -> str:
    """A JSON column's value as text: orjson (an audit's few hundred KB in a fraction of ``json``'s time),
    else ``json`` for what orjson will not write (an integer past 64 bits, a lone surrogate)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def _has_float(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return True
    if kind is dict:
        return any(_has_float(v) for v in value.values())
    if kind is list:
        return any(_has_float(v) for v in value)
    return False


def _json_value(text: str | bytes) -> Any:
    """A JSON column's value from its text: orjson (several times faster than ``json``; stored messages are read
    on every turn), else ``json``: for what orjson cannot read (a lone surrogate) and for any value holding a
    float, since orjson reads an integer past 64 bits as one (``json`` reads it as it was written)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    return json.loads(text) if _has_float(value) else value


#: SQL parameters never appear in SQLAlchemy's logs or error messages (they may hold API keys); JSON columns
#: are written by :func:`_json_text` and read by :func:`_json_value`.
_SAFE_ENGINE_OPTIONS: dict[str, Any] = {
    "hide_parameters": True,
    "json_serializer": _json_text,
    "json_deserializer": _json_value,
}

__all__ = ["Database", "default_database_url", "normalize_url"]

#: Seconds a SQLite connection waits for another connection's lock before giving up.
DEFAULT_BUSY_TIMEOUT = 30.0
#: Execution option naming the ``BEGIN`` mode of a SQLite transaction (``IMMEDIATE`` unless set).
_BEGIN_OPTION = "contextshift_sqlite_begin"


class DatabaseBusy(ContextShiftError, OperationalError):
    """Another writer held the database past the busy timeout: one of this process (its write lock), or of
    another process (SQLite's own "database is locked", which a session raises as this).

    An ``OperationalError`` too, so whatever retries a database failure (storing a reply) retries this one.
    """

    code = "DATABASE_BUSY"

    def __init__(self) -> None:
        OperationalError.__init__(self, "BEGIN IMMEDIATE", None, Exception("database is busy"))
        self.message = "The database stayed busy past its busy timeout; try again."
        self.params: dict[str, object] = {}

    def _code_str(self) -> str:  # SQLAlchemy would link its docs for "DATABASE_BUSY", a code it does not have
        return ""


def _sqlite_locked(error: BaseException) -> bool:
    """SQLite's "database is locked" (or "database table is locked"): its busy timeout ran out."""
    return (
        isinstance(error, OperationalError)
        and not isinstance(error, DatabaseBusy)
        and "is locked" in str(getattr(error, "orig", ""))
    )


class Database:
    """One database (SQLite file or PostgreSQL), migrated to head by :meth:`start`.

    ``url`` defaults to :func:`default_database_url` (the commands pass ``CONTEXTSHIFT_DATABASE_URL``, read by
    ``Settings``; this class reads no environment). ``engine_options`` go to ``create_async_engine``
    (pool sizes, ``connect_args``; ``hide_parameters`` is on by default). ``migrations_path`` replaces the
    packaged migrations (tools, tests).
    ``stale_audit_age``: on start, close only ownerless prepared audits (left by a version without instance
    heartbeats) older than this; None closes every one.
    A started database is a service instance (``instance_id``, default a new id; the service passes
    ``CONTEXTSHIFT_INSTANCE_ID`` when set) with a heartbeat every ``heartbeat_interval`` seconds that expires
    after ``heartbeat_expiry`` (defaults 10 and 30; the service passes ``CONTEXTSHIFT_HEARTBEAT_SECONDS`` /
    ``CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS``): see ``liveness`` for what is recovered after a crash.
    ``read_cache_ttl``: see ``readcache`` (default 5 s). ``secret_key``: the Fernet key its encrypted columns use
    (``secret_key.current_key`` of the settings; default: the key file of the default data directory).

    SQLite under concurrent writers (N5): the file is in WAL mode (readers never block the writer), every
    connection waits up to ``sqlite_busy_timeout`` seconds for a lock, and a :meth:`session` that may write
    starts with ``BEGIN IMMEDIATE``: it takes the write lock up front, waiting its turn, instead of
    reading under a snapshot and failing with "database is locked" when it later tries to write.
    Within one process, writing sessions also queue on one ``asyncio.Lock`` (one writer at a time per
    process), so they take turns without SQLite's sleeping busy handler: measured 3-4× the write
    throughput of BEGIN IMMEDIATE alone with 32 concurrent writers; across processes the busy timeout
    still does the waiting. ``session(write=False)`` starts a plain deferred transaction for reads, which
    never wait.
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        engine_options: Mapping[str, Any] | None = None,
        migrations_path: Path | None = None,
        stale_audit_age: timedelta | None = None,
        instance_id: str | None = None,
        heartbeat_interval: float | None = None,
        heartbeat_expiry: float | None = None,
        sqlite_busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        read_cache_ttl: float | None = None,
        secret_key: bytes | None = None,
    ) -> None:
        self.url: URL = normalize_url(url if url is not None else default_database_url())
        self.engine_options: dict[str, Any] = {**_SAFE_ENGINE_OPTIONS, **(engine_options or {})}
        self.migrations_path = migrations_path
        self.stale_audit_age = stale_audit_age
        self.instance_id = instance_id or new_id()
        self.heartbeat = Heartbeat(
            self.session,
            self.instance_id,
            interval=heartbeat_interval or DEFAULT_INTERVAL,
            expiry=heartbeat_expiry or DEFAULT_EXPIRY,
            ownerless_age=stale_audit_age,
        )
        self.sqlite_busy_timeout = sqlite_busy_timeout
        #: This process's writes per table, and the reads kept until one of them (see ``readcache``).
        self.writes = TableWrites()
        self.reads = ReadCache(self.writes, read_cache_ttl if read_cache_ttl is not None else DEFAULT_TTL)
        self.secret_key = secret_key
        self._engine: AsyncEngine | None = None
        self._sessions: async_sessionmaker[AsyncSession] | None = None
        #: One writer at a time per process and event loop (SQLite files only).
        self._writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"Database({self.display_url!r}, started={self._engine is not None})"

    @property
    def display_url(self) -> str:
        """The URL with its password masked."""
        return display_url(self.url)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.url.get_backend_name()

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("the database is not started: await db.start() first")
        return self._engine

    async def start(self) -> None:
        """Create the SQLite file's folder, migrate to head, open the engine, close unfinished audits."""
        if self._engine is not None:
            return
        in_memory = self.dialect == "sqlite" and sqlite_path(self.url) is None
        if not in_memory:
            revision = await migrate.upgrade(
                self.url,
                migrations_path=self.migrations_path,
                engine_options=self.engine_options,
                secret_key=self.secret_key,
            )
        engine = create_async_engine(self.url, **self.engine_options)
        if self.secret_key is not None:
            bind_key(engine.sync_engine.dialect, self.secret_key)
        self.writes.watch(engine.sync_engine)
        if self.dialect == "sqlite":
            event.listen(engine.sync_engine, "connect", _SQLiteSetup(self.sqlite_busy_timeout, wal=not in_memory))
            if not in_memory:  # one shared connection in memory: nothing to wait for
                event.listen(engine.sync_engine, "begin", _sqlite_begin)
        try:
            if in_memory:  # one shared connection: migrate through the service's own engine
                async with engine.begin() as connection:
                    revision = await migrate.upgrade_connection(connection, migrations_path=self.migrations_path)
            self._engine = engine
            self._sessions = async_sessionmaker(engine, expire_on_commit=False)
            recovered = await self.heartbeat.start()
        except BaseException:
            await self.close()
            await engine.dispose()
            raise
        log.info("database %s ready at revision %s; recovered %s", self.display_url, revision, recovered)

    async def close(self) -> None:
        """Stop the heartbeat and dispose of the engine (idempotent)."""
        if self._sessions is not None:
            await self.heartbeat.stop()
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = None
        self._sessions = None

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def session(self, *, write: bool = True) -> AsyncIterator[AsyncSession]:
        """A session in one transaction: committed when the block succeeds, rolled back when it raises.

        On SQLite a ``write`` session takes the database's write lock when it begins (``BEGIN IMMEDIATE``,
        waiting up to the busy timeout); ``write=False`` is for blocks that only read.
        """
        if self._sessions is None:
            raise RuntimeError("the database is not started: await db.start() first")
        if write and self.dialect == "sqlite" and sqlite_path(self.url) is not None:
            async with self._writer(), self._transaction(write=True) as session:
                yield session
        else:
            async with self._transaction(write=write) as session:
                yield session

    @asynccontextmanager
    async def _writer(self) -> AsyncIterator[None]:
        """This process's turn to write (waits at most the busy timeout, like SQLite itself)."""
        loop = asyncio.get_running_loop()
        lock = self._writers.get(loop)
        if lock is None:
            lock = self._writers[loop] = asyncio.Lock()
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation that arrives as the
            # lock is granted, and the cancelled task then runs on (a heartbeat that never stops, say).
            async with asyncio.timeout(self.sqlite_busy_timeout):
                await lock.acquire()
        except TimeoutError:
            raise DatabaseBusy() from None
        try:
            yield
        finally:
            lock.release()

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[AsyncSession]:
        assert self._sessions is not None
        async with self._sessions() as session:
            session.info["instance_id"] = self.instance_id  # the owner of audits, logs and leases it starts
            try:
                if not write and self.dialect == "sqlite":
                    await session.connection(execution_options={_BEGIN_OPTION: "DEFERRED"})
                yield session
                await session.commit()
            except BaseException as error:
                self.writes.landed()
                await session.rollback()
                if _sqlite_locked(error):  # another process held the file's lock past the busy timeout
                    raise DatabaseBusy() from None
                raise
            self.writes.landed()

    async def revision(self) -> str | None:
        """The migration revision the database is at."""
        async with self.engine.connect() as connection:
            return await migrate.current_revision(connection)


class _SQLiteSetup:
    """Per-connection settings: foreign keys, WAL, the busy timeout, and transactions begun by us."""

    def __init__(self, busy_timeout: float, *, wal: bool) -> None:
        self.busy_timeout_ms = max(0, int(busy_timeout * 1000))
        self.wal = wal

    def __call__(self, dbapi_connection: Any, _record: Any) -> None:
        if self.wal:
            # The driver's own implicit BEGIN (deferred, before the first write) is turned off: _sqlite_begin
            # emits BEGIN itself, so a writing transaction holds the write lock from its first statement.
            dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
        if self.wal:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def _sqlite_begin(connection: Any) -> None:
    mode = connection.get_execution_options().get(_BEGIN_OPTION, "IMMEDIATE")
    connection.exec_driver_sql(f"BEGIN {mode}")
