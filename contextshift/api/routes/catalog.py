"""Providers and models (V1, V3): shared by every user, managed by admins (403 ``FORBIDDEN`` for others).
API keys are write-only: stored, used, never returned (N2)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status

from ...service import provider_check
from ...service.errors import not_found
from ...service.provider_hosts import check_provider_url
from ...storage import Database, Repositories
from .. import schemas as s
from .. import views
from ..auth import Admin
from ..created import locate, located
from ..deps import GenerationService, ProxyEndpoint, Repos, ServiceRules, database
from ..envelopes import (
    Deleted,
    ModelEnvelope,
    ModelList,
    ProviderEnvelope,
    ProviderList,
    ProviderModelList,
    ProviderTestEnvelope,
)
from ..errors import error_responses

router = APIRouter(tags=["providers and models"], responses=error_responses(400, 422, 500))
DB = Annotated[Database, Depends(database)]
#: What admin-only routes also answer.
ADMIN_ONLY = error_responses(403)


def unchanged_if_null(changes: dict[str, Any], *, nullable: set[str]) -> dict[str, Any]:
    """A patch's changes without the nulls of fields that cannot be empty: there null leaves them unchanged,
    as the OpenAPI document says (a nullable field, ``null`` = unchanged)."""
    return {k: v for k, v in changes.items() if v is not None or k in nullable}


@router.post(
    "/providers",
    status_code=status.HTTP_201_CREATED,
    response_model=ProviderEnvelope,
    responses={**ADMIN_ONLY, **located("get_provider")},
)
async def create_provider(
    body: s.ProviderCreate, _admin: Admin, repos: Repos, rules: ServiceRules, request: Request, response: Response
) -> dict[str, Any]:
    check_provider_url(body.base_url, rules.provider_hosts)
    row = await repos.providers.create(**body.model_dump())
    locate(request, response, "get_provider", provider_id=row.id)
    return {"provider": views.provider(row)}


@router.get("/providers", response_model=ProviderList)
async def list_providers(repos: Repos) -> dict[str, Any]:
    return {"providers": [views.provider(r) for r in await repos.providers.list_all()]}


async def saved_endpoint(db: Database, provider_id: str) -> provider_check.Endpoint:
    """A saved provider's address and key, read in a short session of its own: the provider is called after it,
    holding no transaction (on SQLite, no write lock) while it answers."""
    async with db.session(write=False) as session:
        row = await Repositories(session).providers.get(provider_id)
    if row is None:
        raise not_found("provider", provider_id)
    return provider_check.Endpoint(row.kind, row.base_url, row.api_key, row.timeout_seconds)


def tested(result: provider_check.CheckResult) -> dict[str, Any]:
    return {"test": s.ProviderTestOut(**asdict(result))}


@router.post(
    "/provider-tests",
    response_model=ProviderTestEnvelope,
    responses=error_responses(403, 404),
    description="Test a provider form's values before saving them: one GET of the provider's model list. A "
    "failure is the answer's `code` (the cause: refused, DNS, TLS, timeout, a 5xx, the key), not an error.",
)
async def test_provider_values(
    body: s.ProviderTestIn, _admin: Admin, db: DB, generations: GenerationService
) -> dict[str, Any]:
    key = body.api_key or None
    if body.provider_id is not None:
        saved = await saved_endpoint(db, body.provider_id)
        if body.api_key is None and (saved.kind, saved.base_url) == (body.kind, body.base_url):
            key = saved.api_key  # N2: only to the address it was saved for
    endpoint = provider_check.Endpoint(body.kind, body.base_url, key, body.timeout_seconds)
    return tested(
        await provider_check.check(
            endpoint, generations.client_factory, generations.client_options, generations.rules.provider_hosts
        )
    )


@router.post(
    "/providers/{provider_id}/test",
    response_model=ProviderTestEnvelope,
    responses=error_responses(403, 404),
    description="Test a saved provider: one GET of its model list, with its key. A failure is the answer's "
    "`code` (the cause: refused, DNS, TLS, timeout, a 5xx, the key), not an error.",
)
async def test_provider(provider_id: str, _admin: Admin, db: DB, generations: GenerationService) -> dict[str, Any]:
    endpoint = await saved_endpoint(db, provider_id)
    return tested(
        await provider_check.check(
            endpoint, generations.client_factory, generations.client_options, generations.rules.provider_hosts
        )
    )


@router.get(
    "/providers/{provider_id}/models",
    response_model=ProviderModelList,
    responses=error_responses(403, 404, 502, 504),
    description="The provider's own model list, each with its context window and longest reply when the "
    "provider states them or the model is a well-known one (to fill in the model form).",
)
async def provider_models(provider_id: str, _admin: Admin, db: DB, generations: GenerationService) -> dict[str, Any]:
    endpoint = await saved_endpoint(db, provider_id)
    listed = await provider_check.list_models(
        endpoint, generations.client_factory, generations.client_options, generations.rules.provider_hosts
    )
    return {"models": [s.ProviderModelOut(**asdict(m)) for m in listed]}


@router.get("/providers/{provider_id}", response_model=ProviderEnvelope, responses=error_responses(404))
async def get_provider(provider_id: str, repos: Repos) -> dict[str, Any]:
    row = await repos.providers.get(provider_id)
    if row is None:
        raise not_found("provider", provider_id)
    return {"provider": views.provider(row)}


@router.patch("/providers/{provider_id}", response_model=ProviderEnvelope, responses=error_responses(403, 404))
async def patch_provider(
    provider_id: str, body: s.ProviderPatch, _admin: Admin, repos: Repos, rules: ServiceRules
) -> dict[str, Any]:
    changes = unchanged_if_null(body.model_dump(exclude_unset=True), nullable={"api_key"})
    if changes.get("base_url") is not None:
        check_provider_url(changes["base_url"], rules.provider_hosts)
    if changes.get("api_key") == "":
        changes["api_key"] = None
    row = await repos.providers.update(provider_id, changes)
    if row is None:
        raise not_found("provider", provider_id)
    return {"provider": views.provider(row)}


@router.delete("/providers/{provider_id}", response_model=Deleted, responses=error_responses(403, 404))
async def delete_provider(provider_id: str, _admin: Admin, repos: Repos) -> dict[str, Any]:
    if not await repos.providers.delete(provider_id):
        raise not_found("provider", provider_id)
    return {"deleted": True}


@router.post(
    "/models",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelEnvelope,
    responses={**error_responses(403, 404), **located("get_model")},
)
async def create_model(
    body: s.ModelCreate, _admin: Admin, repos: Repos, rules: ServiceRules, request: Request, response: Response
) -> dict[str, Any]:
    row = await repos.models.create(**body.model_dump())
    locate(request, response, "get_model", model_id=row.id)
    return {"model": views.model(row, margin=rules.estimate_margin)}


@router.get("/models", response_model=ModelList)
async def list_models(
    repos: Repos, proxy: ProxyEndpoint, rules: ServiceRules, provider_id: str | None = None
) -> dict[str, Any]:
    await proxy.settled()  # endpoint calls still folding their usage into a calibration
    rows = await repos.models.list_all(provider_id)
    calibrations = await repos.calibrations.get_many(r.id for r in rows)
    return {"models": [views.model(r, calibrations, margin=rules.estimate_margin) for r in rows]}


@router.get("/models/{model_id}", response_model=ModelEnvelope, responses=error_responses(404))
async def get_model(model_id: str, repos: Repos, proxy: ProxyEndpoint, rules: ServiceRules) -> dict[str, Any]:
    await proxy.settled(model_id=model_id)  # calls still folding their usage in
    row = await repos.models.get(model_id)
    if row is None:
        raise not_found("model", model_id)
    calibrations = await repos.calibrations.get_many([row.id])
    return {"model": views.model(row, calibrations, margin=rules.estimate_margin)}


@router.patch("/models/{model_id}", response_model=ModelEnvelope, responses=error_responses(403, 404))
async def patch_model(
    model_id: str, body: s.ModelPatch, _admin: Admin, repos: Repos, rules: ServiceRules
) -> dict[str, Any]:
    nullable = {"context_window", "max_output_tokens", "tokenizer", "context_strategy"}
    changes = unchanged_if_null(body.model_dump(exclude_unset=True), nullable=nullable)
    row = await repos.models.update(model_id, changes)
    if row is None:
        raise not_found("model", model_id)
    calibrations = await repos.calibrations.get_many([row.id])
    return {"model": views.model(row, calibrations, margin=rules.estimate_margin)}


@router.delete("/models/{model_id}", response_model=Deleted, responses=error_responses(403, 404))
async def delete_model(model_id: str, _admin: Admin, repos: Repos) -> dict[str, Any]:
    if not await repos.models.delete(model_id):
        raise not_found("model", model_id)
    return {"deleted": True}
