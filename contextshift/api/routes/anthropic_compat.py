"""The Anthropic-compatible endpoint (V7): ``POST /v1/messages`` for apps written against the ``anthropic`` SDK.

The same rules as ``/v1/chat/completions``: the API key (``x-api-key``, or ``Authorization: Bearer``) is a
contextshift token; ``model`` names a configured contextshift model; ``system`` and ``messages`` are fitted to
its window (a ``tool_use`` and its ``tool_result`` are kept or dropped together; the system prompt and the
last user message that is not only tool results are protected), forwarded to the model's provider
(OpenAI-compatible or Anthropic, translated where needed), and the answer comes back as an Anthropic
``message`` or its stream of events. ``extra_body={"contextshift": {"chat_id": ...}}`` answers from a stored
chat's pipeline, as on ``/v1/chat/completions`` (``compat_sessions``). Every answer that reached fitting
carries ``x-contextshift-excluded`` and ``x-contextshift-audit``. Errors are Anthropic's
``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel

from ...service.errors import ServiceError
from ...service.proxy import ContextTooLong
from .. import anthropic_wire as wire
from .. import compat_sessions as sessions
from ..auth import Caller
from ..compat_forward import Dialect, forward, read_body, visibility
from ..deps import GenerationService, ProxyEndpoint


class AnthropicErrorBody(BaseModel):
    type: str
    message: str


class AnthropicError(BaseModel):
    """Anthropic's error shape."""

    type: str
    error: AnthropicErrorBody


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    words = {
        400: "invalid_request_error: an invalid request, a Host the service does not answer to, or a prompt whose "
        "protected messages alone exceed the budget (prompt is too long), or a max_tokens that alone takes the "
        "whole context window",
        401: "authentication_error: no token, or not a valid one",
        403: "permission_error: a request from another site",
        404: "not_found_error: no such model, or a session's contextshift.chat_id names no chat of the caller's",
        413: "request_too_large: the request body is over the size limit",
        415: "invalid_request_error: the body is not JSON",
        429: "rate_limit_error: the provider's rate limit, passed on with Retry-After",
        500: "api_error",
        502: "api_error: the provider failed or answered something unreadable",
        503: "api_error: the provider is unavailable",
        504: "timeout_error: the provider timed out",
    }
    return {s: {"model": AnthropicError, "description": words.get(s, "Error")} for s in statuses}


MESSAGES_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["model", "messages", "max_tokens"],
                "properties": {
                    "model": {"type": "string", "minLength": 1, "description": "A chat model, by name or id"},
                    "max_tokens": {"type": "integer", "minimum": 1},
                    "system": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                    "messages": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["role", "content"],
                            "properties": {
                                "role": {"enum": ["user", "assistant"]},
                                "content": {
                                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]
                                },
                            },
                        },
                    },
                    "stream": {"type": "boolean"},
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "contextshift": {
                        "type": "object",
                        "description": "contextshift's options: strategy (a registered context strategy), "
                        "chat_id (answer from that stored chat's pipeline: the last user message is its new turn)",
                        "properties": {"strategy": {"type": "string"}, "chat_id": {"type": "string"}},
                        "additionalProperties": False,
                    },
                },
                "additionalProperties": True,
            }
        }
    },
}

router = APIRouter(prefix="/v1", tags=["anthropic-compatible"])

ANTHROPIC_DIALECT = Dialect(
    answer=lambda reply, audit_id, call: wire.message(reply, audit_id=audit_id, model=call.model),
    writer=lambda audit_id, call: wire.Events(audit_id=audit_id, model=call.model),
    service_error=wire.service_error,
    provider_response=wire.provider_response,
    stream_error=wire.stream_error,
    stream_refusal=wire.stream_refusal,
)


@router.post(
    "/messages",
    summary="Anthropic Messages, with the messages fitted to the model's window",
    responses={
        200: {
            "description": "A message object, or with stream: text/event-stream of Anthropic's message events",
            "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {}},
        },
        **_errors(400, 401, 403, 404, 413, 415, 429, 500, 502, 503, 504),
    },
    openapi_extra={"requestBody": MESSAGES_BODY},
)
async def messages(request: Request, principal: Caller, service: ProxyEndpoint, chats: GenerationService) -> Response:
    try:
        parsed, clean = await read_body(request)
        call, extension = wire.read_call(parsed.value, user_id=principal.user_id, clean=clean)
        call = replace(call, token_strategy=principal.context_strategy)
        if extension.get("chat_id") is not None:
            return await sessions.answer(service, chats, call, extension["chat_id"], principal, ANTHROPIC_DIALECT)
        prepared = await service.prepare(call)
    except ContextTooLong as error:
        return wire.service_error(error, visibility(error.audit_id, 0))
    except ServiceError as error:
        return wire.service_error(error)
    return await forward(service, prepared, ANTHROPIC_DIALECT)
