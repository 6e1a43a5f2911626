"""The drop-in OpenAI-compatible endpoint (V7): ``POST /v1/chat/completions`` and ``GET /v1/models``.

An app written against OpenAI points its base URL at ``http://host:port/v1`` and its API key at a
contextshift token; its messages are fitted to the named model's window (see :mod:`contextshift.service.proxy`)
and the answer comes back in OpenAI's shape, streaming or not. Every answer to a call that reached fitting
carries ``x-contextshift-excluded`` (how many messages were left out) and ``x-contextshift-audit`` (the id of
its audit, ``GET /api/v2/proxy-audits/{id}``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel

from ...providers import Finished, TextDelta
from ...providers.base import ChatResult, StreamEvent
from ...service.errors import ServiceError
from ...service.proxy import ContextTooLong, ProxyService, UpstreamFailed, invalid_request
from .. import openai_sessions as sessions
from .. import openai_wire as wire
from ..auth import Caller


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    code: str | None
    param: str | None


class OpenAIError(BaseModel):
    """OpenAI's error shape (never contextshift's own envelope on ``/v1``)."""

    error: OpenAIErrorBody


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    words = {
        400: "Invalid request, or context_length_exceeded: the protected messages alone exceed the budget",
        401: "invalid_api_key",
        404: "model_not_found",
        413: "The request body is too large",
        429: "rate_limit_exceeded: too many failed sign-ins, or the provider's rate limit; with Retry-After",
        502: "The provider failed or answered something unreadable",
        503: "The provider is unavailable",
        504: "The provider timed out",
    }
    return {s: {"model": OpenAIError, "description": words.get(s, "Error")} for s in statuses}


CHAT_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["model", "messages"],
                "properties": {
                    "model": {"type": "string", "minLength": 1, "description": "A chat model, by name or id"},
                    "messages": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["role"],
                            "properties": {
                                "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
                                "content": {
                                    "anyOf": [
                                        {"type": "string"},
                                        {"type": "null"},
                                        {"type": "array", "items": {"type": "object"}},
                                    ]
                                },
                                "name": {"type": "string"},
                                "tool_call_id": {"type": "string"},
                            },
                        },
                    },
                    "stream": {"type": "boolean"},
                    "max_tokens": {"type": "integer", "minimum": 1},
                    "max_completion_tokens": {"type": "integer", "minimum": 1},
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "contextshift": {
                        "type": "object",
                        "description": "contextshift's options: strategy (a registered context strategy)",
                        "properties": {"strategy": {"type": "string"}, "chat_id": {"type": "string"}},
                        "additionalProperties": False,
                    },
                },
                "additionalProperties": True,
            }
        }
    },
}

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


def proxy_service(request: Request) -> ProxyService:
    service: ProxyService = request.app.state.proxy
    return service


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError:
        raise invalid_request("The request body is not valid JSON.") from None


@router.get(
    "/models",
    summary="The models a caller may name, in OpenAI's list shape",
    # the sign-in's refusals in OpenAI's shape; those of the checks before it (the body limit, even on a GET) are
    # added in contextshift's envelope with the other operations' (api/refusals.py)
    responses=_errors(401, 429),
)
async def list_models(request: Request) -> dict[str, Any]:
    models = await proxy_service(request).models()
    return {
        "object": "list",
        "data": [
            {"id": m.name, "object": "model", "created": int(m.created_at.timestamp()), "owned_by": "contextshift"}
            for m in models
        ],
    }


@router.post(
    "/chat/completions",
    summary="OpenAI Chat Completions, with the messages fitted to the model's window",
    responses={
        200: {
            "description": "A chat.completion object, or with stream: text/event-stream of chat.completion.chunk",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}},
            },
            "headers": {
                wire.EXCLUDED_HEADER: {
                    "description": "How many of the request's messages were left out to fit the window",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[0-9]+$"},
                },
                wire.AUDIT_HEADER: {
                    "description": "The id of this call's audit (GET /api/v2/proxy-audits/{audit_id})",
                    "required": True,
                    "schema": {"type": "string"},
                },
            },
        },
        **_errors(400, 401, 404, 413, 429, 502, 503, 504),
    },
    openapi_extra={"requestBody": CHAT_BODY},
)
async def chat_completions(request: Request, principal: Caller) -> Response:
    service = proxy_service(request)
    try:
        call, include_usage, extension = wire.read_call(await _body(request), user_id=principal.user_id)
        if extension.get("chat_id") is not None:
            return await sessions.answer(
                service, request.app.state.generations, call, extension["chat_id"], include_usage, principal
            )
        prepared = await service.prepare(call)
    except ContextTooLong as error:
        return wire.service_error(error, wire.visibility(error.audit_id, 0))
    except ServiceError as error:
        return wire.service_error(error)
    headers = wire.visibility(prepared.audit_id, prepared.excluded)
    if not call.stream:
        try:
            reply = await service.complete(prepared)
        except UpstreamFailed as failed:
            return wire.provider_response(failed.error, headers)
        return JSONResponse(wire.completion(reply, audit_id=prepared.audit_id, model=call.model), headers=headers)

    events = service.stream(prepared)
    try:
        first = await anext(events)  # the provider's status is known before our own response starts
    except UpstreamFailed as failed:
        return wire.provider_response(failed.error, headers)
    except StopAsyncIteration:
        first = None
    chunks = wire.Chunks(audit_id=prepared.audit_id, model=call.model, include_usage=include_usage)
    return StreamingResponse(
        _stream(chunks, first, events),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache"},
    )


async def _stream(
    chunks: wire.Chunks, first: StreamEvent | None, events: AsyncGenerator[StreamEvent, None]
) -> AsyncIterator[bytes]:
    yield chunks.start()
    finished: ChatResult | None = None
    pending = [first] if first is not None else []
    try:
        while True:
            if pending:
                event = pending.pop()
            else:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
            if isinstance(event, TextDelta) and event.text:
                yield chunks.text(event.text)
            elif isinstance(event, Finished):
                finished = event.result
    except UpstreamFailed as failed:
        _status, body, _headers = wire.provider_error(failed.error)
        yield wire.sse(body)  # the openai SDK raises APIError on an error chunk
        return
    finally:
        await events.aclose()
    if finished is not None:
        for chunk in chunks.end(finished):
            yield chunk
