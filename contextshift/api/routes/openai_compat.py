"""The drop-in OpenAI-compatible endpoint (V7): ``POST /v1/chat/completions`` and ``GET /v1/models``.

An app written against OpenAI points its base URL at ``http://host:port/v1`` and its API key at a
contextshift token; its messages are fitted to the named model's window (see :mod:`contextshift.service.proxy`)
and the answer comes back in OpenAI's shape, streaming or not. Every answer to a call that reached fitting
carries ``x-contextshift-excluded`` (how many messages were left out) and ``x-contextshift-audit`` (the id of
its audit, ``GET /api/v2/proxy-audits/{id}``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from ...service.errors import ServiceError
from ...service.proxy import ContextTooLong
from .. import compat_sessions as sessions
from .. import openai_wire as wire
from ..auth import Caller
from ..compat_forward import Dialect, forward, read_body
from ..deps import GenerationService, ProxyEndpoint


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    code: str | None
    param: str | None


class OpenAIError(BaseModel):
    """OpenAI's error shape (never contextshift's own envelope on ``/v1``: see ``compat_errors``)."""

    error: OpenAIErrorBody


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    words = {
        400: "Invalid request (or a Host the service does not answer to: host_not_allowed), "
        "context_length_exceeded: the protected messages alone exceed the budget, or "
        "response_reserve_too_large: max_tokens alone takes the whole context window",
        401: "invalid_api_key",
        403: "origin_not_allowed: a request from another site",
        404: "model_not_found, or chat_not_found: a session's contextshift.chat_id names no chat of the caller's",
        413: "payload_too_large: the request body is over the size limit",
        415: "unsupported_media_type: the body is not JSON",
        429: "The provider's rate limit, passed through with Retry-After (or too many failed sign-ins)",
        500: "internal_error",
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

OPENAI_DIALECT = Dialect(
    answer=lambda reply, audit_id, call: wire.completion(reply, audit_id=audit_id, model=call.model),
    writer=lambda audit_id, call: wire.Chunks(audit_id=audit_id, model=call.model, include_usage=call.include_usage),
    service_error=wire.service_error,
    provider_response=wire.provider_response,
    stream_error=wire.stream_error,
    stream_refusal=wire.stream_refusal,
)


@router.get(
    "/models",
    summary="The models a caller may name, in OpenAI's list shape",
    responses=_errors(400, 401, 413, 500),
)
async def list_models(service: ProxyEndpoint) -> dict[str, Any]:
    models = await service.models()
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
        **_errors(400, 401, 403, 404, 413, 415, 429, 500, 502, 503, 504),
    },
    openapi_extra={"requestBody": CHAT_BODY},
)
async def chat_completions(
    request: Request, principal: Caller, service: ProxyEndpoint, chats: GenerationService
) -> Response:
    try:
        parsed, clean = await read_body(request)
        call, extension = wire.read_call(
            parsed.value, user_id=principal.user_id, messages_json=parsed.messages_json, clean=clean
        )
        call = replace(call, token_strategy=principal.context_strategy)
        if extension.get("chat_id") is not None:
            return await sessions.answer(service, chats, call, extension["chat_id"], principal, OPENAI_DIALECT)
        prepared = await service.prepare(call)
    except ContextTooLong as error:
        return wire.service_error(error, wire.visibility(error.audit_id, 0))
    except ServiceError as error:
        return wire.service_error(error)
    return await forward(service, prepared, OPENAI_DIALECT)
