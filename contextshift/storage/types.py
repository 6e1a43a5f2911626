"""Column types and value helpers shared by the tables: string ids, UTC timestamps and portable JSON."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


def new_id() -> str:
    """A new row id: a uuid4 in hex (32 characters)."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def json_type(*, none_as_null: bool = False) -> TypeEngine[Any]:
    """JSON on every database, JSONB on PostgreSQL. ``none_as_null`` stores Python ``None`` as SQL NULL."""
    return JSON(none_as_null=none_as_null).with_variant(JSONB(none_as_null=none_as_null), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that always comes back timezone-aware in UTC, also from SQLite (which stores no zone).

    Naive datetimes are rejected on the way in: every timestamp the service writes is aware.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamps must be timezone-aware")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
