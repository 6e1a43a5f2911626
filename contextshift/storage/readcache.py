"""Reads worth not repeating on every request, kept only until a write could have changed them (V7 speed).

Every request signs in (a token and its user), and every endpoint call resolves its model and reads that
model's calibration. Each of those reads is a session and a query, about 1-3 ms of SQLAlchemy and driver work
on SQLite: at 1,000 messages they were a third of the endpoint's added latency. A :class:`ReadCache` keeps
such a read's result, stamped with the write counts of the tables it read (:class:`TableWrites`).

* **Writes in this process** are seen at once: the engine counts, per table, every transaction that wrote
  to it, and an entry whose tables were written since it was read is not used (a token revoked, a model
  disabled, a calibration updated through this service is read again on the very next request).
* **Writes by another process** (a second instance, ``contextshift token revoke`` on the same file) cannot be
  counted here: an entry is used for at most ``ttl`` seconds (``CONTEXTSHIFT_READ_CACHE_SECONDS``, which
  ``Settings`` hands to ``Database(read_cache_ttl=...)``; default :data:`DEFAULT_TTL`; ``0`` turns the cache
  off), which bounds how long such a write takes to be seen.

A write is counted twice: when its transaction commits (the engine's ``commit`` event, before the commit
reaches the database) and again once the commit is done (:meth:`TableWrites.landed`, called by
``Database.session``), so that a read which started in between, and may have read the old rows, is not
kept either.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

#: Seconds an entry is used at most (the longest another process's write takes to be seen).
DEFAULT_TTL = 5.0
#: Entries kept at most (least recently used first out).
MAX_ENTRIES = 4096
#: The name counted for a write whose table is unknown (SQL text): it invalidates every entry.
ANY_TABLE = "*"
_WRITING = frozenset(
    {"INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE"}
)
_INFO_KEY = "contextshift_written_tables"


class TableWrites:
    """How many transactions of this process have written to each table (see the module's text)."""

    __slots__ = ("_counts", "_landing")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._landing: set[str] = set()

    def versions(self, tables: tuple[str, ...]) -> tuple[int, ...]:
        """The write counts of ``tables`` (and of unknown tables, last)."""
        counts = self._counts
        return (*(counts.get(t, 0) for t in tables), counts.get(ANY_TABLE, 0))

    def wrote(self, tables: set[str] | frozenset[str]) -> None:
        """Count a transaction that wrote to ``tables`` (it is committing); :meth:`landed` counts it again."""
        counts = self._counts
        for table in tables:
            counts[table] = counts.get(table, 0) + 1
        self._landing |= tables

    def landed(self) -> None:
        """The commits counted by :meth:`wrote` are done: count them once more (a read that started while they
        were on their way may have read the rows as they were)."""
        if self._landing:
            landing, self._landing = self._landing, set()
            counts = self._counts
            for table in landing:
                counts[table] = counts.get(table, 0) + 1

    def watch(self, engine: Engine) -> None:
        """Count the writes of every transaction on ``engine`` (a sync engine: ``AsyncEngine.sync_engine``)."""
        event.listen(engine, "after_cursor_execute", _note_write)
        event.listen(engine, "commit", self._committing)
        event.listen(engine, "rollback", _forget_writes)

    def _committing(self, connection: Any) -> None:
        info = _info(connection)
        tables = info.pop(_INFO_KEY, None) if info is not None else None
        if tables:
            self.wrote(tables)


def _info(connection: Any) -> dict[Any, Any] | None:
    """The connection's ``info``, or None when it cannot be read (a connection invalidated mid-transaction, by
    a cancelled task say, refuses until rolled back: a listener must not fail that rollback)."""
    try:
        info: dict[Any, Any] = connection.info
    except Exception:
        return None
    return info


def _forget_writes(connection: Any) -> None:
    info = _info(connection)
    if info is not None:
        info.pop(_INFO_KEY, None)


def _note_write(
    connection: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, _executemany: bool
) -> None:
    """After each statement: remember the table it wrote to, if it wrote (SQL text: any table)."""
    head = statement.lstrip()[:8].split(None, 1)
    if not head or head[0].upper() not in _WRITING:
        return
    table: str = ANY_TABLE
    if context is not None and (context.isinsert or context.isupdate or context.isdelete):
        compiled = getattr(context, "compiled", None)
        name = getattr(getattr(getattr(compiled, "statement", None), "table", None), "name", None)
        if isinstance(name, str):
            table = name
    info = _info(connection)
    if info is not None:
        info.setdefault(_INFO_KEY, set()).add(table)


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a read started, and the write counts of the tables it reads."""

    tables: tuple[str, ...]
    versions: tuple[int, ...]
    at: float


class ReadCache:
    """Results of reads by key, each used while its tables have no newer write here and for at most ``ttl``.

    Usage::

        found = cache.get(key)
        if found is None:
            stamp = cache.stamp("models", "providers")  # before the read
            found = await read()
            cache.put(key, found, stamp)
    """

    def __init__(
        self,
        writes: TableWrites,
        ttl: float = DEFAULT_TTL,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.writes = writes
        self.ttl = ttl
        self.clock = clock
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[Any, Stamp]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def stamp(self, *tables: str) -> Stamp:
        """Take before reading: the write counts a result read now is valid for."""
        return Stamp(tables, self.writes.versions(tables), self.clock())

    def get(self, key: Hashable) -> Any | None:
        """The result kept for ``key`` while still valid, else None."""
        found = self._entries.get(key)
        if found is not None:
            value, stamp = found
            if self.clock() - stamp.at < self.ttl and self.writes.versions(stamp.tables) == stamp.versions:
                self.hits += 1
                self._entries.move_to_end(key)
                return value
            del self._entries[key]
        self.misses += 1
        return None

    def put(self, key: Hashable, value: Any, stamp: Stamp) -> None:
        """Keep ``value`` as read under ``stamp`` (not kept when the cache is off or a write came in between)."""
        if self.ttl <= 0 or value is None or self.writes.versions(stamp.tables) != stamp.versions:
            return
        self._entries[key] = (value, stamp)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["ANY_TABLE", "DEFAULT_TTL", "ReadCache", "Stamp", "TableWrites"]
