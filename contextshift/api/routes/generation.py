"""Generation with streaming (V1, V3), the context audit (A4) and the live preview (A5)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ...core.errors import TokenBudgetExceeded
from ...service.commands import command_of, run_command
from ...service.generation import Done, Failed, Token
from ...service.replies import Redo
from ...service.streaming import Heartbeat
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..deps import CompactionService, GenerationService, Repos
from ..envelopes import AuditEnvelope, PreviewEnvelope
from ..errors import budget_params, error_responses
from ..ownership import check_bot, check_chat, own_chat

router = APIRouter(tags=["generation"], responses=error_responses(400, 422, 500))

SSE_DESCRIPTION = (
    'With `stream` (the default): `text/event-stream` of `token` events (`{"text"}`), then one `done` '
    'event (`{"message", "usage"}`) or one `error` event (`{"code", "message"}`) for a failure of the turn '
    "itself (TOKEN_BUDGET_EXCEEDED, PROVIDER_*). A request that is wrong before any turn starts (unknown chat, "
    "invalid body, no usable chat model, CHAT_BUSY) gets the JSON error envelope instead, streaming or not. "
    "While nothing else is sent (waiting for the first token), an SSE comment `: heartbeat` comes every 15 s. "
    "An `error` after some text carries `partial`: the reply as stored with what was streamed "
    "(`meta.partial`); one before any text carries `input_message_id`: the input, kept with `meta.failed` "
    "and left out of later prompts until retried with `retry_of`. With `regenerate_of` or `continue_of` (the chat's "
    "newest reply; else 409 REDO_NOT_POSSIBLE) the `done` message is that reply, with a new version or more text; "
    "a redo that fails before any text leaves it as it was, with `meta.error`. A second turn on a chat whose turn is "
    "still running waits for it (up to 30 s), then gets 409 CHAT_BUSY; rewind and deletes get 409 CHAT_BUSY at once. "
    "The stream always ends with `done` or `error` (CHAT_NOT_FOUND when the chat was deleted with its owner). While "
    "it streams, the reply so far is stored (at least every second) as a partial reply marked `interrupted`, which "
    "the outcome replaces. A reply larger than its cap (16 bytes per `max_tokens` token, at least 64 KiB, at most "
    "1,900,000 bytes) is stopped there and kept: `finish_reason` `length`, `meta.cut` `reply_too_large`."
)

HEARTBEAT = b": heartbeat\n\n"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


@router.post(
    "/chats/{chat_id}/generate",
    response_model=s.GenerateOut,
    responses={
        **error_responses(404, 409, 502, 504),
        200: {"description": SSE_DESCRIPTION, "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    },
)
async def generate(
    chat_id: str, body: s.GenerateRequest, principal: Caller, service: GenerationService, compactor: CompactionService
) -> Any:
    await check_chat(service.db, principal, chat_id)
    command = command_of(body.content) if body.content is not None else None
    if command is not None:  # V4: answered by the service, never by the chat model
        answer = views.message(await run_command(service.db, compactor, chat_id, command, counting=service.counting))
        if not body.stream:
            return {"message": answer, "usage": None}

        async def answered() -> AsyncIterator[bytes]:
            yield _sse("token", {"text": answer.content})
            yield _sse("done", {"message": answer.model_dump(mode="json"), "usage": None})

        return StreamingResponse(answered(), media_type="text/event-stream")
    redo = (
        Redo("regenerate", body.regenerate_of)
        if body.regenerate_of is not None
        else Redo("continue", body.continue_of)
        if body.continue_of is not None
        else None
    )
    if not body.stream:
        done = await service.complete(chat_id, body.content, body.max_tokens, retry_of=body.retry_of, redo=redo)
        return {"message": views.message(done.message), "usage": views.usage(done.usage)}
    try:
        generation_id, turn, result = await service.start(
            chat_id, body.content, body.max_tokens, retry_of=body.retry_of, redo=redo
        )
    except TokenBudgetExceeded as error:
        failure = {"code": error.code, "message": error.message, "params": budget_params(error)}

        async def rejected() -> AsyncIterator[bytes]:
            yield _sse("error", failure)

        return StreamingResponse(rejected(), media_type="text/event-stream")

    async def events() -> AsyncIterator[bytes]:
        async for event in service.events(chat_id, generation_id, turn, result):
            if isinstance(event, Heartbeat):
                yield HEARTBEAT
            elif isinstance(event, Token):
                yield _sse("token", {"text": event.text})
            elif isinstance(event, Done):
                message = views.message(event.message).model_dump(mode="json")
                usage = views.usage(event.usage)
                yield _sse("done", {"message": message, "usage": usage.model_dump() if usage else None})
            elif isinstance(event, Failed):
                failure: dict[str, Any] = {"code": event.code, "message": event.message}
                if event.partial is not None:
                    failure["partial"] = views.message(event.partial).model_dump(mode="json")
                if event.input_message_id is not None:
                    failure["input_message_id"] = event.input_message_id
                yield _sse("error", failure)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@router.get("/chats/{chat_id}/context-audit", response_model=AuditEnvelope, responses=error_responses(404))
async def context_audit(chat_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    await own_chat(repos, principal, chat_id)
    row = await repos.audits.get(chat_id)
    return {"audit": views.audit(row) if row else None}


@router.post("/context-preview", response_model=PreviewEnvelope, responses=error_responses(404))
async def context_preview(body: s.PreviewRequest, principal: Caller, service: GenerationService) -> dict[str, Any]:
    if body.chat_id is not None:
        await check_chat(service.db, principal, body.chat_id)
    elif body.bot_id is not None:
        await check_bot(service.db, principal, body.bot_id)
    preview = await service.preview(
        chat_id=body.chat_id, bot_id=body.bot_id, draft=body.user_message, max_tokens=body.max_tokens
    )
    return {"preview": preview}
