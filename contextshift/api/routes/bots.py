"""Bots, lorebooks and memories (V1, P3-P5)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status

from ...core.host import default_registry
from ...service.errors import Refusal, ServiceError, not_found
from ...service.summarizer import check_choice
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..created import locate, located
from ..deps import Repos, ServiceRules
from ..envelopes import (
    BotEnvelope,
    BotList,
    Deleted,
    LorebookEnvelope,
    LorebookList,
    MemoryEnvelope,
    MemoryList,
)
from ..errors import error_responses
from ..ownership import own_bot, own_chat, own_lorebook, own_lorebooks

router = APIRouter(tags=["bots"], responses=error_responses(400, 422, 500))


def _check_strategy(name: str | None) -> None:
    if name is not None and name not in default_registry:
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "VALIDATION",
            f"context_strategy: {name!r} is not a registered strategy.",
            field="context_strategy",
            value=name,
            known=default_registry.names(),
        )


@router.post(
    "/bots",
    status_code=status.HTTP_201_CREATED,
    response_model=BotEnvelope,
    responses={**error_responses(404), **located("get_bot")},
)
async def create_bot(
    body: s.BotCreate, principal: Caller, repos: Repos, rules: ServiceRules, request: Request, response: Response
) -> dict[str, Any]:
    fields = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "chat_model_id"}
    _check_strategy(fields.get("context_strategy"))
    await own_lorebooks(repos, principal, fields.get("lorebook_ids"))
    await check_choice(repos, fields.get("compaction_model_id"), rules.provider_hosts)
    name = fields.pop("name")
    row = await repos.bots.create(name=name, owner_id=principal.user_id, **fields)
    locate(request, response, "get_bot", bot_id=row.id)
    return {"bot": views.bot(row)}


@router.get("/bots", response_model=BotList)
async def list_bots(principal: Caller, repos: Repos) -> dict[str, Any]:
    return {"bots": [views.bot(r) for r in await repos.bots.list_all(owner_id=principal.user_id)]}


@router.get("/bots/{bot_id}", response_model=BotEnvelope, responses=error_responses(404))
async def get_bot(bot_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    return {"bot": views.bot(await own_bot(repos, principal, bot_id))}


@router.patch("/bots/{bot_id}", response_model=BotEnvelope, responses=error_responses(404))
async def patch_bot(
    bot_id: str, body: s.BotPatch, principal: Caller, repos: Repos, rules: ServiceRules
) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    changes = body.model_dump(exclude_unset=True)
    nullable = {"chat_model_id", "context_limit", "template", "author_note", "compaction_model_id"}
    changes = {k: v for k, v in changes.items() if v is not None or k in nullable}
    _check_strategy(changes.get("context_strategy"))
    await own_lorebooks(repos, principal, changes.get("lorebook_ids"))
    await check_choice(repos, changes.get("compaction_model_id"), rules.provider_hosts)
    row = await repos.bots.update(bot_id, changes)
    if row is None:
        raise not_found("bot", bot_id)
    return {"bot": views.bot(row)}


@router.delete("/bots/{bot_id}", response_model=Deleted, responses=error_responses(404))
async def delete_bot(bot_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    if not await repos.bots.delete(bot_id):
        raise not_found("bot", bot_id)
    return {"deleted": True}


@router.post(
    "/lorebooks",
    status_code=status.HTTP_201_CREATED,
    response_model=LorebookEnvelope,
    responses=located("get_lorebook"),
)
async def create_lorebook(
    body: s.LorebookCreate, principal: Caller, repos: Repos, request: Request, response: Response
) -> dict[str, Any]:
    entries = [e.model_dump() for e in body.entries]
    row = await repos.lorebooks.create(name=body.name, entries=entries, owner_id=principal.user_id)
    locate(request, response, "get_lorebook", lorebook_id=row.id)
    return {"lorebook": views.lorebook(row)}


@router.get("/lorebooks", response_model=LorebookList)
async def list_lorebooks(principal: Caller, repos: Repos) -> dict[str, Any]:
    rows = await repos.lorebooks.list_all(owner_id=principal.user_id)
    return {"lorebooks": [views.lorebook(r) for r in rows]}


@router.get("/lorebooks/{lorebook_id}", response_model=LorebookEnvelope, responses=error_responses(404))
async def get_lorebook(lorebook_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    return {"lorebook": views.lorebook(await own_lorebook(repos, principal, lorebook_id))}


@router.patch("/lorebooks/{lorebook_id}", response_model=LorebookEnvelope, responses=error_responses(404))
async def patch_lorebook(lorebook_id: str, body: s.LorebookPatch, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_lorebook(repos, principal, lorebook_id)
    entries = [e.model_dump() for e in body.entries] if body.entries is not None else None
    row = await repos.lorebooks.update(lorebook_id, name=body.name, entries=entries)
    if row is None:
        raise not_found("lorebook", lorebook_id)
    return {"lorebook": views.lorebook(row)}


@router.delete("/lorebooks/{lorebook_id}", response_model=Deleted, responses=error_responses(404))
async def delete_lorebook(lorebook_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_lorebook(repos, principal, lorebook_id)
    if not await repos.lorebooks.delete(lorebook_id):
        raise not_found("lorebook", lorebook_id)
    return {"deleted": True}


@router.post(
    "/bots/{bot_id}/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryEnvelope,
    responses=error_responses(404),
)
async def create_memory(bot_id: str, body: s.MemoryCreate, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    if body.chat_id is not None:
        await own_chat(repos, principal, body.chat_id)
    row = await repos.memories.create(bot_id=bot_id, content=body.content, chat_id=body.chat_id)
    return {"memory": views.memory(row)}


@router.get("/bots/{bot_id}/memories", response_model=MemoryList, responses=error_responses(404))
async def list_memories(bot_id: str, principal: Caller, repos: Repos, chat_id: str | None = None) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    return {"memories": [views.memory(r) for r in await repos.memories.list_for_bot(bot_id, chat_id)]}


async def _bot_memory(repos: Repos, bot_id: str, memory_id: str) -> None:
    """The memory must be one of this bot's (the caller's own, checked before); else ``MEMORY_NOT_FOUND``."""
    row = await repos.memories.get(memory_id)
    if row is None or row.bot_id != bot_id:
        raise not_found("memory", memory_id)


@router.patch("/bots/{bot_id}/memories/{memory_id}", response_model=MemoryEnvelope, responses=error_responses(404))
async def patch_memory(
    bot_id: str, memory_id: str, body: s.MemoryPatch, principal: Caller, repos: Repos
) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    await _bot_memory(repos, bot_id, memory_id)
    row = await repos.memories.update(memory_id, content=body.content)
    if row is None:
        raise not_found("memory", memory_id)
    return {"memory": views.memory(row)}


@router.delete("/bots/{bot_id}/memories/{memory_id}", response_model=Deleted, responses=error_responses(404))
async def delete_memory(bot_id: str, memory_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    await _bot_memory(repos, bot_id, memory_id)
    if not await repos.memories.delete(memory_id):
        raise not_found("memory", memory_id)
    return {"deleted": True}
