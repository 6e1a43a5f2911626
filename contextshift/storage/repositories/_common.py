"""Validation and SQL helpers shared by the repositories."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from sqlalchemy import CursorResult, Executable
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue

Validator = Callable[[str, Any], Any]


def dialect_insert(session: AsyncSession) -> Callable[..., Any]:
    """The ``insert`` of the session's dialect (it has ``on_conflict_do_*``)."""
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


async def execute_rowcount(session: AsyncSession, statement: Executable) -> int:
    """Run an UPDATE or DELETE and return how many rows it matched."""
    result = cast(CursorResult[Any], await session.execute(statement))
    return int(result.rowcount)


def text_value(field: str, value: Any, *, required: bool = False, max_length: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidValue(field, "must be a string")
    if "\x00" in value:
        raise InvalidValue(field, "must not contain NUL characters")
    if required and not value.strip():
        raise InvalidValue(field, "must not be empty")
    if max_length is not None and len(value) > max_length:
        raise InvalidValue(field, f"must be at most {max_length} characters")
    return value


def optional_text(field: str, value: Any, *, max_length: int | None = None) -> str | None:
    return None if value is None else text_value(field, value, max_length=max_length)


def boolean(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidValue(field, "must be true or false")
    return value


def integer(field: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(field, "must be an integer")
    if minimum is not None and value < minimum:
        raise InvalidValue(field, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidValue(field, f"must be at most {maximum}")
    return value


def optional_positive(field: str, value: Any) -> int | None:
    return None if value is None else integer(field, value, minimum=1)


def choice(field: str, value: Any, allowed: Iterable[str]) -> str:
    options = tuple(allowed)
    if value not in options:
        raise InvalidValue(field, f"must be one of {', '.join(options)}")
    return str(value)


def string_list(field: str, value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InvalidValue(field, "must be a list of strings")
    return list(value)


def json_object(field: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidValue(field, "must be an object")
    return dict(value)


def apply_changes(row: object, changes: Mapping[str, Any], validators: Mapping[str, Validator]) -> None:
    """Validate every change first, then set them all; an unknown field is an error."""
    if not isinstance(changes, Mapping):
        raise InvalidValue("changes", "must be an object")
    unknown = sorted(set(changes) - set(validators))
    if unknown:
        raise InvalidValue(unknown[0], "is not a field that can be changed")
    values = {name: validators[name](name, value) for name, value in changes.items()}
    for name, value in values.items():
        setattr(row, name, value)
