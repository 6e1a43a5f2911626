"""Bots, lorebooks and memories (V1, P3-P5)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from ...core.host import default_registry
from ...service.errors import ServiceError, not_found
from ...service.summarizer import check_choice
from .. import schemas as s
from .. import views
from ..deps import Repos
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

router = APIRouter(tags=["bots"], responses=error_responses(400, 422, 500))


def _check_strategy(name: str | None) -> None:
    if name is not None and name not in default_registry:
        raise ServiceError(
            422,
            "VALIDATION",
            f"context_strategy: {name!r} is not a registered strategy.",
            field="context_strategy",
            value=name,
            known=default_registry.names(),
        )


async def _check_lorebooks(repos: Repos, ids: list[str] | None) -> None:
    for lorebook_id in ids or []:
        if await repos.lorebooks.get(lorebook_id) is None:
            raise not_found("lorebook", lorebook_id)


@router.post("/bots", status_code=status.HTTP_201_CREATED, response_model=BotEnvelope, responses=error_responses(404))
async def create_bot(body: s.BotCreate, repos: Repos) -> dict[str, Any]:
    fields = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "chat_model_id"}
    _check_strategy(fields.get("context_strategy"))
    await _check_lorebooks(repos, fields.get("lorebook_ids"))
    await check_choice(repos, fields.get("compaction_model_id"))
    name = fields.pop("name")
    row = await repos.bots.create(name=name, **fields)
    return {"bot": views.bot(row)}


@router.get("/bots", response_model=BotList)
async def list_bots(repos: Repos) -> dict[str, Any]:
    return {"bots": [views.bot(r) for r in await repos.bots.list_all()]}


@router.get("/bots/{bot_id}", response_model=BotEnvelope, responses=error_responses(404))
async def get_bot(bot_id: str, repos: Repos) -> dict[str, Any]:
    row = await repos.bots.get(bot_id)
    if row is None:
        raise not_found("bot", bot_id)
    return {"bot": views.bot(row)}


@router.patch("/bots/{bot_id}", response_model=BotEnvelope, responses=error_responses(404))
async def patch_bot(bot_id: str, body: s.BotPatch, repos: Repos) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    nullable = {"chat_model_id", "context_limit", "template", "author_note", "compaction_model_id"}
    changes = {k: v for k, v in changes.items() if v is not None or k in nullable}
    _check_strategy(changes.get("context_strategy"))
    await _check_lorebooks(repos, changes.get("lorebook_ids"))
    await check_choice(repos, changes.get("compaction_model_id"))
    row = await repos.bots.update(bot_id, changes)
    if row is None:
        raise not_found("bot", bot_id)
    return {"bot": views.bot(row)}


@router.delete("/bots/{bot_id}", response_model=Deleted, responses=error_responses(404))
async def delete_bot(bot_id: str, repos: Repos) -> dict[str, Any]:
    if not await repos.bots.delete(bot_id):
        raise not_found("bot", bot_id)
    return {"deleted": True}


@router.post("/lorebooks", status_code=status.HTTP_201_CREATED, response_model=LorebookEnvelope)
async def create_lorebook(body: s.LorebookCreate, repos: Repos) -> dict[str, Any]:
    row = await repos.lorebooks.create(name=body.name, entries=[e.model_dump() for e in body.entries])
    return {"lorebook": views.lorebook(row)}


@router.get("/lorebooks", response_model=LorebookList)
async def list_lorebooks(repos: Repos) -> dict[str, Any]:
    return {"lorebooks": [views.lorebook(r) for r in await repos.lorebooks.list_all()]}


@router.get("/lorebooks/{lorebook_id}", response_model=LorebookEnvelope, responses=error_responses(404))
async def get_lorebook(lorebook_id: str, repos: Repos) -> dict[str, Any]:
    row = await repos.lorebooks.get(lorebook_id)
    if row is None:
        raise not_found("lorebook", lorebook_id)
    return {"lorebook": views.lorebook(row)}


@router.patch("/lorebooks/{lorebook_id}", response_model=LorebookEnvelope, responses=error_responses(404))
async def patch_lorebook(lorebook_id: str, body: s.LorebookPatch, repos: Repos) -> dict[str, Any]:
    entries = [e.model_dump() for e in body.entries] if body.entries is not None else None
    row = await repos.lorebooks.update(lorebook_id, name=body.name, entries=entries)
    if row is None:
        raise not_found("lorebook", lorebook_id)
    return {"lorebook": views.lorebook(row)}


@router.delete("/lorebooks/{lorebook_id}", response_model=Deleted, responses=error_responses(404))
async def delete_lorebook(lorebook_id: str, repos: Repos) -> dict[str, Any]:
    if not await repos.lorebooks.delete(lorebook_id):
        raise not_found("lorebook", lorebook_id)
    return {"deleted": True}


@router.post(
    "/bots/{bot_id}/memories",
    status_code=status.HTTP_201_CREATED,
    response_model=MemoryEnvelope,
    responses=error_responses(404),
)
async def create_memory(bot_id: str, body: s.MemoryCreate, repos: Repos) -> dict[str, Any]:
    if await repos.bots.get(bot_id) is None:
        raise not_found("bot", bot_id)
    row = await repos.memories.create(bot_id=bot_id, content=body.content, chat_id=body.chat_id)
    return {"memory": views.memory(row)}


@router.get("/bots/{bot_id}/memories", response_model=MemoryList, responses=error_responses(404))
async def list_memories(bot_id: str, repos: Repos, chat_id: str | None = None) -> dict[str, Any]:
    if await repos.bots.get(bot_id) is None:
        raise not_found("bot", bot_id)
    return {"memories": [views.memory(r) for r in await repos.memories.list_for_bot(bot_id, chat_id)]}
