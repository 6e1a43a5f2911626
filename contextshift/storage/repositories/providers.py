"""Providers and their models.

Rows are returned as ORM objects (``ProviderRow``, ``ModelRow``); they stay readable after the session
ends. ``ProviderRow.api_key`` is for the provider client only: never return it from the API or log it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue, NotFound
from ..tables import MODEL_TYPES, PROVIDER_KINDS, ModelRow, ProviderRow
from ._common import (
    Validator,
    apply_changes,
    boolean,
    choice,
    execute_rowcount,
    integer,
    optional_positive,
    optional_text,
    text_value,
)

#: Bounds and default of a provider's ``timeout_seconds`` (N5).
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 600
DEFAULT_TIMEOUT_SECONDS = 60


def _timeout_seconds(field: str, value: Any) -> int:
    """N5: 1-600 seconds."""
    seconds = integer(field, value, minimum=MIN_TIMEOUT_SECONDS)
    if seconds > MAX_TIMEOUT_SECONDS:
        raise InvalidValue(field, f"must be at most {MAX_TIMEOUT_SECONDS}")
    return seconds


def _base_url(field: str, value: Any) -> str:
    url = text_value(field, value, required=True).strip()
    if not url.lower().startswith(("http://", "https://")):
        raise InvalidValue(field, "must be an http:// or https:// URL")
    return url


_PROVIDER_FIELDS: dict[str, Validator] = {
    "name": partial(text_value, required=True, max_length=200),
    "kind": partial(choice, allowed=PROVIDER_KINDS),
    "base_url": _base_url,
    "api_key": optional_text,
    "enabled": boolean,
    "count_tokens": boolean,
    "timeout_seconds": _timeout_seconds,
}


_MODEL_FIELDS: dict[str, Validator] = {
    "name": partial(text_value, required=True, max_length=200),
    "type": partial(choice, allowed=MODEL_TYPES),
    "context_window": optional_positive,
    "max_output_tokens": optional_positive,
    "enabled": boolean,
    "tokenizer": partial(optional_text, max_length=200),
    "context_strategy": partial(optional_text, max_length=100),
}


class ProviderRepository:
    """CRUD for providers. Deleting a provider deletes its models (and unsets them on bots)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(
        self,
        *,
        name: str,
        kind: str,
        base_url: str,
        api_key: str | None = None,
        enabled: bool = True,
        count_tokens: bool = False,
        timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    ) -> ProviderRow:
        row = ProviderRow()
        fields = {"name": name, "kind": kind, "base_url": base_url, "api_key": api_key, "enabled": enabled}
        extra = {"count_tokens": count_tokens, "timeout_seconds": timeout_seconds}
        apply_changes(row, {**fields, **extra}, _PROVIDER_FIELDS)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, provider_id: str) -> ProviderRow | None:
        return await self.session.get(ProviderRow, provider_id)

    async def list_all(self) -> Sequence[ProviderRow]:
        result = await self.session.scalars(select(ProviderRow).order_by(ProviderRow.created_at, ProviderRow.id))
        return result.all()

    async def update(self, provider_id: str, changes: Mapping[str, Any]) -> ProviderRow | None:
        """Set the given fields (``name``, ``kind``, ``base_url``, ``api_key``, ``enabled``, ``timeout_seconds``).

        A new ``base_url`` or ``kind`` without a new ``api_key`` clears the stored key (N2): a key never follows
        a provider to another address."""
        row = await self.get(provider_id)
        if row is None:
            return None
        moved = any(k in changes and changes[k] != getattr(row, k) for k in ("base_url", "kind"))
        if moved and "api_key" not in changes:
            changes = {**changes, "api_key": None}
        apply_changes(row, changes, _PROVIDER_FIELDS)
        await self.session.flush()
        return row

    async def delete(self, provider_id: str) -> bool:
        return await execute_rowcount(self.session, delete(ProviderRow).where(ProviderRow.id == provider_id)) > 0


class ModelRepository:
    """CRUD for models of a provider."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(
        self,
        *,
        provider_id: str,
        name: str,
        type: str = "chat",
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        enabled: bool = True,
        tokenizer: str | None = None,
        context_strategy: str | None = None,
    ) -> ModelRow:
        """Raises ``NotFound`` (``PROVIDER_NOT_FOUND``) when the provider does not exist."""
        if await self.session.get(ProviderRow, provider_id) is None:
            raise NotFound("provider", provider_id)
        row = ModelRow(provider_id=provider_id)
        fields = {
            "name": name,
            "type": type,
            "context_window": context_window,
            "max_output_tokens": max_output_tokens,
            "enabled": enabled,
            "tokenizer": tokenizer,
            "context_strategy": context_strategy,
        }
        apply_changes(row, fields, _MODEL_FIELDS)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, model_id: str) -> ModelRow | None:
        return await self.session.get(ModelRow, model_id)

    async def named(self, name: str, *, type: str = "chat") -> list[tuple[ModelRow, ProviderRow | None]]:
        """The enabled models of ``type`` whose id or name is ``name``, each with its provider, in
        :meth:`list_all`'s order: one query, whatever the number of models (the endpoint asks on every call)."""
        query = (
            select(ModelRow, ProviderRow)
            .outerjoin(ProviderRow, ProviderRow.id == ModelRow.provider_id)
            .where(ModelRow.type == type, ModelRow.enabled.is_(True), or_(ModelRow.id == name, ModelRow.name == name))
            .order_by(ModelRow.created_at, ModelRow.id)
        )
        return [(model, provider) for model, provider in (await self.session.execute(query)).all()]

    async def list_all(self, provider_id: str | None = None) -> Sequence[ModelRow]:
        query = select(ModelRow).order_by(ModelRow.created_at, ModelRow.id)
        if provider_id is not None:
            query = query.where(ModelRow.provider_id == provider_id)
        return (await self.session.scalars(query)).all()

    async def update(self, model_id: str, changes: Mapping[str, Any]) -> ModelRow | None:
        """Set the given fields (all of ``create``'s but ``provider_id``)."""
        row = await self.get(model_id)
        if row is None:
            return None
        apply_changes(row, changes, _MODEL_FIELDS)
        await self.session.flush()
        return row

    async def delete(self, model_id: str) -> bool:
        return await execute_rowcount(self.session, delete(ModelRow).where(ModelRow.id == model_id)) > 0
