"""Errors the storage layer raises for bad input, each with a stable ``UPPER_SNAKE`` code (N1)."""

from __future__ import annotations

from ..core.errors import ContextShiftError


class StorageError(ContextShiftError):
    """Base of the storage layer's own errors."""

    code = "STORAGE_ERROR"


class NotFound(StorageError, LookupError):
    """A referenced row does not exist; ``code`` is ``<ENTITY>_NOT_FOUND`` (e.g. ``CHAT_NOT_FOUND``)."""

    def __init__(self, entity: str, entity_id: str) -> None:
        self.entity = entity
        self.entity_id = entity_id
        self.code = f"{entity.upper()}_NOT_FOUND"
        super().__init__(f"{entity} {entity_id!r} does not exist", **{f"{entity}_id": entity_id})


class InvalidValue(StorageError, ValueError):
    """A field has a value the schema does not allow; nothing was written."""

    code = "VALIDATION"

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}", field=field)
