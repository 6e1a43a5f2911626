"""Audits of the OpenAI-compatible endpoint (V7): one per call, readable by its caller until it expires.

``prepare`` inserts the audit before the provider call; ``finish`` ends it once (a conditional UPDATE).
Reads never return an expired audit, whether or not :meth:`ProxyAuditRepository.delete_expired` has run.
Returns ``ProxyAuditRow`` objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.vocabulary import FAILED, PREPARED
from ..errors import InvalidValue
from ..tables import ProxyAuditRow
from ..types import utcnow
from ._common import execute_rowcount
from .audits import GENERATION_FAILED, TERMINAL_STATUSES, normalize_error_code


def _storable(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value``, or a copy without NUL characters when it has any (PostgreSQL refuses them in JSON; a
    caller's text may hold them)."""
    encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    if "\\u0000" not in encoded:
        return dict(value)
    cleaned: dict[str, Any] = json.loads(encoded.replace("\\u0000", ""))
    return cleaned


class ProxyAuditRepository:
    """The endpoint's audits, each owned by the user who made the call."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def prepare(
        self,
        audit_id: str,
        *,
        user_id: str,
        model: str,
        payload: Mapping[str, Any],
        excluded_count: int,
        ttl: timedelta,
        clean: bool = False,
    ) -> ProxyAuditRow:
        """Insert the audit of a call, ``prepared``. ``clean``: the caller knows no text in ``payload`` holds a
        NUL (the request body had no ``\\u0000``), so it is not serialized once more to look."""
        now = utcnow()
        row = ProxyAuditRow(
            id=audit_id,
            user_id=user_id,
            model=model[:200],
            status=PREPARED,
            excluded_count=excluded_count,
            payload=dict(payload) if clean else _storable(payload),
            created_at=now,
            expires_at=now + ttl,
        )
        self.session.add(row)
        await self.session.flush()
        return row

    async def finish(
        self,
        audit_id: str,
        status: str,
        *,
        error_code: str | None = None,
        usage: Mapping[str, Any] | None = None,
        payload_updates: Mapping[str, Any] | None = None,
    ) -> bool:
        """End a prepared audit with a terminal status; False when it is not prepared (finished, or gone).

        ``payload_updates`` are merged into the stored payload (e.g. the attempts of a recovered call)."""
        if status not in TERMINAL_STATUSES:
            raise InvalidValue("status", f"must be one of {', '.join(TERMINAL_STATUSES)}")
        code = normalize_error_code(error_code) if error_code is not None else None
        if status == FAILED and code is None:
            code = GENERATION_FAILED
        values: dict[str, Any] = {"status": status, "error_code": code, "finished_at": utcnow()}
        if usage is not None:
            values["usage"] = _storable(usage)
        if payload_updates:
            current = await self.session.scalar(select(ProxyAuditRow.payload).where(ProxyAuditRow.id == audit_id))
            if current is None:
                return False
            values["payload"] = _storable({**current, **payload_updates})
        statement = (
            update(ProxyAuditRow)
            .where(ProxyAuditRow.id == audit_id, ProxyAuditRow.status == PREPARED)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    async def replace(self, audit_id: str, payload: Mapping[str, Any], *, excluded_count: int) -> bool:
        """A prepared audit's payload made anew (a call fitted again after a rejection); False if not prepared."""
        statement = (
            update(ProxyAuditRow)
            .where(ProxyAuditRow.id == audit_id, ProxyAuditRow.status == PREPARED)
            .values(payload=_storable(payload), excluded_count=excluded_count)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    async def get(self, audit_id: str, *, user_id: str, now: datetime | None = None) -> ProxyAuditRow | None:
        """The audit if it belongs to ``user_id`` and has not expired, else None."""
        statement = select(ProxyAuditRow).where(
            ProxyAuditRow.id == audit_id,
            ProxyAuditRow.user_id == user_id,
            ProxyAuditRow.expires_at > (now or utcnow()),
        )
        result = await self.session.scalars(statement, execution_options={"populate_existing": True})
        return result.one_or_none()

    async def recent(self, *, user_id: str, limit: int = 50) -> list[ProxyAuditRow]:
        """The caller's unexpired audits, newest first (the payload is loaded too: keep ``limit`` small)."""
        statement = (
            select(ProxyAuditRow)
            .where(
                ProxyAuditRow.user_id == user_id,
                ProxyAuditRow.expires_at > utcnow(),
            )
            .order_by(ProxyAuditRow.created_at.desc(), ProxyAuditRow.id)
            .limit(limit)
        )
        return list((await self.session.scalars(statement)).all())

    async def delete_expired(self, now: datetime | None = None) -> int:
        """Delete every audit whose time is up; returns how many."""
        statement = delete(ProxyAuditRow).where(ProxyAuditRow.expires_at <= (now or utcnow()))
        return await execute_rowcount(self.session, statement.execution_options(synchronize_session=False))
