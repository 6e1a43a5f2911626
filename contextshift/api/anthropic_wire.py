"""Anthropic's Messages wire shapes for ``POST /v1/messages`` (V7): requests read, messages, stream events, errors.

Errors are ``{"type": "error", "error": {"type", "message"}}`` with the status that makes the ``anthropic``
SDK raise the matching exception (400 ``BadRequestError``, 401 ``AuthenticationError``, 404 ``NotFoundError``,
413 ``ContentTooLargeError``, 429 ``RateLimitError``, 5xx ``InternalServerError`` and its subclasses).
Messages are contextshift's own words: no upstream body, header or key. A stream is Anthropic's event
sequence: ``message_start``, per block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop``, ``message_delta`` (stop reason, usage), ``message_stop``; a failure after the start
is an ``error`` event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

from ..core.wire import tool_use_input
from ..providers import ProviderError
from ..providers.base import ChatResult
from ..service.errors import ServiceError
from ..service.proxy import ANTHROPIC, ContextTooLong, ProxyCall, invalid_request
from .compat_errors import anthropic_body, anthropic_type
from .errors import http_headers, http_status
from .openai_wire import EXTENSION_KEYS, PROVIDER_STATUS, read_extension

#: Request fields the endpoint reads itself; every other field is forwarded as an option.
_OWN_FIELDS = frozenset({"model", "messages", "system", "stream", "max_tokens", "tools", "contextshift"})
#: Anthropic's own stop reasons, passed on as they are when an Anthropic provider gave one.
_STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"})
_FROM_FINISH = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


# -- requests --------------------------------------------------------------------------------------------


def read_call(body: Any, *, user_id: str, clean: bool = False) -> tuple[ProxyCall, dict[str, Any]]:
    """The :class:`ProxyCall` of a Messages body, and its ``contextshift`` extension object."""
    if not isinstance(body, Mapping):
        raise invalid_request("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_request("model: a non-empty string is required.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid_request("messages: a non-empty list is required.", "messages")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, float) and max_tokens.is_integer():
        max_tokens = int(max_tokens)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise invalid_request("max_tokens: a positive integer is required.", "max_tokens")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise invalid_request("stream: must be true or false.", "stream")
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools)):
        raise invalid_request("tools: must be a list of objects.", "tools")
    extension = read_extension(body)
    call = ProxyCall(
        model=model,
        messages=messages,
        stream=stream,
        max_tokens=max_tokens,
        strategy=extension.get("strategy"),
        tools=[dict(t) for t in tools] if tools else None,
        options={k: v for k, v in body.items() if k not in _OWN_FIELDS},
        user_id=user_id,
        clean=clean,
        dialect=ANTHROPIC,
        system=body.get("system"),
    )
    return call, extension


# -- answers ---------------------------------------------------------------------------------------------


def message_id(audit_id: str) -> str:
    return f"msg_{audit_id}"


def stop_reason(reply: ChatResult) -> str:
    if reply.raw_finish_reason in _STOP_REASONS:
        return reply.raw_finish_reason
    if reply.tool_calls and reply.finish_reason not in ("length", "content_filter"):
        return "tool_use"
    return _FROM_FINISH.get(reply.finish_reason, "end_turn")


def usage(reply: ChatResult | None) -> dict[str, int]:
    """Anthropic's usage: uncached input, cache reads and cache writes apart (ours counts the whole prompt)."""
    if reply is None or reply.usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    used = reply.usage
    return {
        "input_tokens": max(0, used.input_tokens - used.cached_input_tokens - used.cache_write_input_tokens),
        "output_tokens": used.output_tokens,
        "cache_read_input_tokens": used.cached_input_tokens,
        "cache_creation_input_tokens": used.cache_write_input_tokens,
    }


def tool_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_use_input(arguments)}


def message(reply: ChatResult, *, audit_id: str, model: str) -> dict[str, Any]:
    """A ``message`` object."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [tool_block(c.id, c.name, c.arguments) for c in reply.tool_calls]
    return {
        "id": message_id(audit_id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": None,
        "usage": usage(reply),
    }


def event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


class Events:
    """The stream events of one answer (the same three calls as ``openai_wire.Chunks``)."""

    def __init__(self, *, audit_id: str, model: str) -> None:
        self.id = message_id(audit_id)
        self.model = model
        self.blocks = 0
        self.text_open = False

    def start(self) -> bytes:
        shell: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return event("message_start", {"type": "message_start", "message": shell})

    def text(self, text: str) -> bytes:
        out = b""
        if not self.text_open:
            self.text_open = True
            block = {"type": "content_block_start", "index": self.blocks, "content_block": {"type": "text", "text": ""}}
            out += event("content_block_start", block)
        delta = {"type": "content_block_delta", "index": self.blocks, "delta": {"type": "text_delta", "text": text}}
        return out + event("content_block_delta", delta)

    def _close(self) -> bytes:
        stop = event("content_block_stop", {"type": "content_block_stop", "index": self.blocks})
        self.blocks += 1
        return stop

    def end(self, reply: ChatResult) -> list[bytes]:
        """Close the text block, one block per tool call, the stop reason and usage, ``message_stop``."""
        out: list[bytes] = []
        if self.text_open:
            self.text_open = False
            out.append(self._close())
        for call in reply.tool_calls:
            block = tool_block(call.id, call.name, call.arguments)
            start = {"type": "content_block_start", "index": self.blocks, "content_block": {**block, "input": {}}}
            partial = json.dumps(block["input"], ensure_ascii=False)
            delta = {
                "type": "content_block_delta",
                "index": self.blocks,
                "delta": {"type": "input_json_delta", "partial_json": partial},
            }
            out += [event("content_block_start", start), event("content_block_delta", delta), self._close()]
        final = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
            "usage": usage(reply),
        }
        out += [event("message_delta", final), event("message_stop", {"type": "message_stop"})]
        return out


# -- errors ----------------------------------------------------------------------------------------------


def service_error(error: ServiceError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    status = http_status(error)
    text = error.message
    if isinstance(error, ContextTooLong):  # the words Anthropic's own refusal starts with, which SDKs look for
        text = f"prompt is too long: {error.needed} tokens > {error.window - error.reserve} maximum. {text}"
    if status not in (400, 401, 403, 404, 409, 413, 429) and status < 500:
        status = 400
    return JSONResponse(
        anthropic_body(status, text), status_code=status, headers={**http_headers(error), **(headers or {})}
    )


def provider_error(error: ProviderError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers for a provider failure (``Retry-After`` passed on with a 429)."""
    status = PROVIDER_STATUS.get(error.code, 502)
    headers: dict[str, str] = {}
    if status == 429 and error.retry_after is not None:
        headers["retry-after"] = str(max(0, math.ceil(error.retry_after)))
    message_text = f"The model's provider failed ({error.code}): {error.message}"
    if error.code == "PROVIDER_CONTEXT_LENGTH":
        message_text = f"prompt is too long: {message_text}"
    return status, anthropic_body(status, message_text, anthropic_type(status)), headers


def provider_response(error: ProviderError, headers: Mapping[str, str]) -> JSONResponse:
    status, body, extra = provider_error(error)
    return JSONResponse(body, status_code=status, headers={**headers, **extra})


def stream_error(error: ProviderError) -> bytes:
    return event("error", provider_error(error)[1])


def stream_refusal(code: str, message: str) -> bytes:
    """A refusal after the stream started (a session's generation that failed on our side): an error event."""
    return event("error", anthropic_body(400, f"{message} ({code})", "invalid_request_error"))


__all__ = [
    "EXTENSION_KEYS",
    "Events",
    "message",
    "provider_response",
    "read_call",
    "service_error",
    "stream_error",
    "stream_refusal",
]
