"""OpenAI's wire shapes for the drop-in endpoint (V7): requests read, completions, stream chunks and errors.

Errors are ``{"error": {"message", "type", "code", "param"}}`` with the status that makes the ``openai`` SDK
raise the matching exception (400 ``BadRequestError``, 401 ``AuthenticationError``, 404 ``NotFoundError``,
429 ``RateLimitError``, 5xx ``InternalServerError``). Messages are contextshift's own words: no upstream
body, header or key.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

from ..core.messages import ToolCall
from ..providers import ProviderError
from ..providers.base import ChatResult
from ..service.errors import ServiceError
from ..service.proxy import ProxyCall, invalid_request
from .compat_forward import AUDIT_HEADER, EXCLUDED_HEADER, visibility
from .errors import http_headers, http_status

#: Request fields the endpoint reads itself; every other field is forwarded as an option.
_OWN_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens"})
_OWN_FIELDS |= {"tools", "contextshift"}
_FINISH = frozenset({"stop", "length", "tool_calls", "content_filter"})

#: contextshift's provider codes as (HTTP status, OpenAI error type, OpenAI error code).
_PROVIDER = {
    "PROVIDER_RATE_LIMITED": (429, "rate_limit_error", "rate_limit_exceeded"),
    "PROVIDER_TIMEOUT": (504, "upstream_error", "upstream_timeout"),
    "PROVIDER_UNAVAILABLE": (503, "upstream_error", "upstream_unavailable"),
    "PROVIDER_SERVER_ERROR": (503, "upstream_error", "upstream_unavailable"),
    "PROVIDER_CONNECTION_REFUSED": (503, "upstream_error", "upstream_unavailable"),
    "PROVIDER_DNS_FAILED": (503, "upstream_error", "upstream_unavailable"),
    "PROVIDER_TLS_FAILED": (503, "upstream_error", "upstream_unavailable"),
    "PROVIDER_CONTEXT_LENGTH": (400, "invalid_request_error", "context_length_exceeded"),
    "PROVIDER_BAD_REQUEST": (400, "invalid_request_error", "upstream_rejected_request"),
    "PROVIDER_AUTH": (502, "upstream_error", "upstream_auth_failed"),
}
#: The HTTP status of each provider failure.
PROVIDER_STATUS = {code: status for code, (status, _type, _code) in _PROVIDER.items()}
#: The options of the ``contextshift`` request object.
EXTENSION_KEYS = frozenset({"strategy", "chat_id"})
_SERVICE = {
    "MODEL_NOT_FOUND": ("invalid_request_error", "model_not_found"),
    "CONTEXT_LENGTH_EXCEEDED": ("invalid_request_error", "context_length_exceeded"),
    "INVALID_REQUEST": ("invalid_request_error", None),
    "AUTH_REQUIRED": ("invalid_request_error", "invalid_api_key"),
    "AUTH_INVALID": ("invalid_request_error", "invalid_api_key"),
    "CHAT_NOT_FOUND": ("invalid_request_error", "chat_not_found"),
}


# -- requests --------------------------------------------------------------------------------------------


def _positive(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON does not tell 300 from 300.0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid_request(f"{key} must be a positive integer.", key)
    return value


def read_call(
    body: Any, *, user_id: str, messages_json: list[bytes] | None = None, clean: bool = False
) -> tuple[ProxyCall, dict[str, Any]]:
    """The :class:`ProxyCall` of a Chat Completions body (its ``include_usage``: whether usage was asked for in
    the stream) and the ``contextshift`` extension object (``extra_body={"contextshift": {...}}``).
    ``messages_json``: each message's JSON text as sent (see ``jsonspans``); ``clean``: the body holds no NUL."""
    if not isinstance(body, Mapping):
        raise invalid_request("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_request("model must be a non-empty string.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid_request("messages must be a non-empty list.", "messages")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid_request("stream must be true or false.", "stream")
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    field, max_tokens = "max_completion_tokens", _positive(body, "max_completion_tokens")
    if max_tokens is None:
        field, max_tokens = "max_tokens", _positive(body, "max_tokens")
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools)):
        raise invalid_request("tools must be a list of objects.", "tools")
    extension = read_extension(body)
    strategy = extension.get("strategy")
    call = ProxyCall(
        model=model,
        messages=messages,
        stream=stream,
        max_tokens=max_tokens,
        max_tokens_field=field,
        strategy=strategy,
        tools=[dict(t) for t in tools] if tools else None,
        options={k: v for k, v in body.items() if k not in _OWN_FIELDS},
        user_id=user_id,
        messages_json=messages_json if messages_json is not None and len(messages_json) == len(messages) else None,
        clean=clean,
        include_usage=include_usage,
    )
    return call, extension


def read_extension(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's ``contextshift`` object (``extra_body={"contextshift": {...}}`` in the SDKs), checked."""
    extension = body.get("contextshift") or {}
    if not isinstance(extension, Mapping):
        raise invalid_request("contextshift must be an object.", "contextshift")
    unknown = set(extension) - EXTENSION_KEYS
    if unknown:
        raise invalid_request(f"Unknown contextshift option(s): {', '.join(sorted(unknown))}.", "contextshift")
    strategy = extension.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise invalid_request("contextshift.strategy must be a string.", "contextshift.strategy")
    return dict(extension)


# -- answers ---------------------------------------------------------------------------------------------


def completion_id(audit_id: str) -> str:
    return f"chatcmpl-{audit_id}"


def finish_reason(reply: ChatResult) -> str:
    if reply.tool_calls and reply.finish_reason not in ("length", "content_filter"):
        return "tool_calls"
    return reply.finish_reason if reply.finish_reason in _FINISH else "stop"


def tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def usage(reply: ChatResult | None) -> dict[str, Any] | None:
    if reply is None or reply.usage is None:
        return None
    used = reply.usage
    return {
        "prompt_tokens": used.input_tokens,
        "completion_tokens": used.output_tokens,
        "total_tokens": used.input_tokens + used.output_tokens,
        "prompt_tokens_details": {"cached_tokens": used.cached_input_tokens},
    }


def completion(reply: ChatResult, *, audit_id: str, model: str, created: int | None = None) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [tool_call(c) for c in reply.tool_calls]
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": completion_id(audit_id),
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason(reply)}],
        "usage": usage(reply),
        "system_fingerprint": None,
    }


class Chunks:
    """The ``chat.completion.chunk`` events of one streamed answer, as SSE ``data:`` lines."""

    def __init__(self, *, audit_id: str, model: str, include_usage: bool) -> None:
        self.id = completion_id(audit_id)
        self.model = model
        self.created = int(time.time())
        self.include_usage = include_usage

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return sse(chunk)

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    def start(self) -> bytes:
        return self._delta({"role": "assistant", "content": ""})

    def text(self, text: str) -> bytes:
        return self._delta({"content": text})

    def end(self, reply: ChatResult) -> list[bytes]:
        """Tool calls (one delta each), the finish reason, the usage chunk if asked for, ``[DONE]``."""
        out = [self._delta({"tool_calls": [{"index": i, **tool_call(c)}]}) for i, c in enumerate(reply.tool_calls)]
        out.append(self._delta({}, finish_reason(reply)))
        if self.include_usage:
            out.append(self._chunk([], usage=usage(reply)))
        out.append(b"data: [DONE]\n\n")
        return out


def sse(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


# -- errors ----------------------------------------------------------------------------------------------


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


def service_error(error: ServiceError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    type_, code = _SERVICE.get(error.code, ("invalid_request_error", error.code.lower()))
    param = error.params.get("param")
    all_headers = http_headers(error)
    all_headers.update(headers or {})
    status = http_status(error)
    if status >= 500:
        type_ = "server_error"
    elif status not in (400, 401, 403, 404, 409, 413, 429):
        status = 400  # what OpenAI's SDKs read as a BadRequestError
    return JSONResponse(
        error_body(error.message, type_, code, param if isinstance(param, str) else None),
        status_code=status,
        headers=all_headers,
    )


def provider_error(error: ProviderError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers for a provider failure (``Retry-After`` passed through on 429)."""
    status, type_, code = _PROVIDER.get(error.code, (502, "upstream_error", "upstream_error"))
    headers: dict[str, str] = {}
    if status == 429 and error.retry_after is not None:
        headers["retry-after"] = str(max(0, math.ceil(error.retry_after)))
    message = f"The model's provider failed ({error.code}): {error.message}"
    return status, error_body(message, type_, code), headers


def stream_error(error: ProviderError) -> bytes:
    """A provider failure after the stream started: an error chunk (the openai SDK raises ``APIError``)."""
    return sse(provider_error(error)[1])


def stream_refusal(code: str, message: str) -> bytes:
    """A refusal after the stream started (a session's generation that failed on our side): an error chunk."""
    return sse(error_body(message, "invalid_request_error", code.lower()))


def provider_response(error: ProviderError, headers: Mapping[str, str]) -> JSONResponse:
    status, body, extra = provider_error(error)
    return JSONResponse(body, status_code=status, headers={**headers, **extra})


__all__ = ["AUDIT_HEADER", "EXCLUDED_HEADER", "Chunks", "completion", "read_call", "service_error", "visibility"]
