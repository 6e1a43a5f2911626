"""Audits of the OpenAI-compatible endpoint (V7): the same entries as a chat's audit, for the caller only.

``GET /api/v2/proxy-audits/{id}`` is the audit named by a response's ``x-contextshift-audit`` header;
``GET /api/v2/proxy-audits`` lists the caller's recent ones (newest first). An expired audit answers 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ...core.vocabulary import AuditStatus
from ...service.errors import not_found
from ...storage.tables import ProxyAuditRow
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..deps import ProxyEndpoint, Repos
from ..errors import error_responses

router = APIRouter(tags=["openai-compatible"], responses=error_responses(500))


class ProxyAuditOut(s.PreviewOut):
    id: str
    status: AuditStatus
    error_code: str | None
    usage: s.UsageOut | None
    created_at: datetime
    finished_at: datetime | None
    expires_at: datetime
    attempts: list[s.AttemptOut] = Field(
        default_factory=list, description="A context-length retry and its outcome, when there was one (T5)"
    )


class ProxyAuditSummary(BaseModel):
    id: str
    model: str
    status: AuditStatus
    error_code: str | None
    excluded_count: int
    prompt_tokens: int | None
    context_limit: int | None
    created_at: datetime
    finished_at: datetime | None


class ProxyAuditEnvelope(BaseModel):
    audit: ProxyAuditOut


class ProxyAuditList(BaseModel):
    audits: list[ProxyAuditSummary]


def _audit(row: ProxyAuditRow) -> ProxyAuditOut:
    attempts = (row.payload or {}).get("attempts") or []
    return ProxyAuditOut(
        **s.PreviewOut.model_validate(dict(row.payload or {})).model_dump(),
        id=row.id,
        status=row.status,  # type: ignore[arg-type]
        error_code=row.error_code,
        usage=views.usage(row.usage),
        created_at=row.created_at,
        finished_at=row.finished_at,
        expires_at=row.expires_at,
        attempts=[s.AttemptOut.model_validate(a) for a in attempts if isinstance(a, dict)],
    )


def _summary(row: ProxyAuditRow) -> ProxyAuditSummary:
    budget = (row.payload or {}).get("budget") or {}
    return ProxyAuditSummary(
        id=row.id,
        model=row.model,
        status=row.status,  # type: ignore[arg-type]
        error_code=row.error_code,
        excluded_count=row.excluded_count,
        prompt_tokens=budget.get("prompt_tokens"),
        context_limit=budget.get("context_limit"),
        created_at=row.created_at,
        finished_at=row.finished_at,
    )


@router.get("/proxy-audits", response_model=ProxyAuditList)
async def list_proxy_audits(
    repos: Repos, principal: Caller, proxy: ProxyEndpoint, limit: int = Query(20, ge=1, le=100)
) -> dict[str, Any]:
    await proxy.settled()  # calls answered but not yet finished in the database
    return {"audits": [_summary(r) for r in await repos.proxy_audits.recent(user_id=principal.user_id, limit=limit)]}


@router.get("/proxy-audits/{audit_id}", response_model=ProxyAuditEnvelope, responses=error_responses(404))
async def get_proxy_audit(audit_id: str, repos: Repos, principal: Caller, proxy: ProxyEndpoint) -> dict[str, Any]:
    await proxy.settled(audit_id=audit_id)  # a call answered but not yet finished
    row = await repos.proxy_audits.get(audit_id, user_id=principal.user_id)
    if row is None:
        raise not_found("proxy_audit", audit_id)
    return {"audit": _audit(row)}
