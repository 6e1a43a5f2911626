"""Compaction (C4-C14, V4): run it, read its logs and the eligible models, the session status, summaries."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...service.status import chat_status
from ...service.summarizer import eligible_models
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..deps import CompactionService, Db, GenerationService, Repos, ServiceRules
from ..envelopes import ModelList
from ..errors import error_responses
from ..ownership import check_chat, own_bot, own_chat

router = APIRouter(tags=["compaction"], responses=error_responses(400, 422, 500))

Limit = Annotated[int, Query(ge=1, le=100)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]


@router.post(
    "/chats/{chat_id}/compact",
    response_model=s.CompactOut,
    responses=error_responses(404),
    description="Compact as much of the session as possible now (C6); bypasses the failure cooldown. "
    "A 422 with code `compaction.model_unavailable` says why no summarizer can run (`params.reason`).",
)
async def compact(chat_id: str, principal: Caller, db: Db, compactor: CompactionService) -> dict[str, Any]:
    await check_chat(db, principal, chat_id)
    outcome = await compactor.run(chat_id, "manual")
    return outcome.to_dict()


@router.get("/bots/{bot_id}/compaction/models", response_model=ModelList, responses=error_responses(404))
async def compaction_models(bot_id: str, principal: Caller, repos: Repos, rules: ServiceRules) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    eligible = await eligible_models(repos, rules.provider_hosts)
    return {"models": [views.model(m, margin=rules.estimate_margin) for m in eligible]}


@router.get("/bots/{bot_id}/compaction/logs", response_model=s.CompactionLogPage, responses=error_responses(404))
async def bot_logs(
    bot_id: str, principal: Caller, repos: Repos, limit: Limit = 50, offset: Offset = 0
) -> dict[str, Any]:
    await own_bot(repos, principal, bot_id)
    rows, more = await repos.compaction.logs(bot_id=bot_id, limit=limit, offset=offset)
    return {"logs": [views.compaction_log(r) for r in rows], "has_more": more}


@router.get("/chats/{chat_id}/compaction/logs", response_model=s.CompactionLogPage, responses=error_responses(404))
async def chat_logs(
    chat_id: str, principal: Caller, repos: Repos, limit: Limit = 50, offset: Offset = 0
) -> dict[str, Any]:
    await own_chat(repos, principal, chat_id)
    rows, more = await repos.compaction.logs(chat_id=chat_id, limit=limit, offset=offset)
    return {"logs": [views.compaction_log(r) for r in rows], "has_more": more}


@router.get("/chats/{chat_id}/summaries", response_model=s.SummaryList, responses=error_responses(404))
async def summaries(chat_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_chat(repos, principal, chat_id)
    return {"summaries": [views.summary(r) for r in await repos.compaction.active_summaries(chat_id)]}


@router.get("/chats/{chat_id}/status", response_model=s.StatusEnvelope, responses=error_responses(404))
async def status(
    chat_id: str, principal: Caller, db: Db, compactor: CompactionService, chats: GenerationService
) -> dict[str, Any]:
    await check_chat(db, principal, chat_id)
    status = await chat_status(db, chat_id, cooldown=compactor.cooldown, counting=chats.counting, rules=chats.rules)
    return {"status": status}
