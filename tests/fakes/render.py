"""Rendering scripted answers as OpenAI Chat Completions and Anthropic Messages wire data."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .script import SECRET, Error, Reply

_TO_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Resolved:
    """A reply with its text and token counts decided for one request."""

    reply: Reply
    text: str
    input_tokens: int
    output_tokens: int
    cached: int
    model: str


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
            return " ".join(t for t in texts if isinstance(t, str))
    return ""


def estimate_prompt(body: Mapping[str, Any]) -> int:
    """The default usage: about 4 characters a token of the request's JSON."""
    return max(1, len(json.dumps([body.get("system"), body.get("messages")], ensure_ascii=False)) // 4)


def resolve(reply: Reply, body: Mapping[str, Any]) -> Resolved:
    text = reply.text if reply.text is not None else f"Echo: {_last_user_text(body)}"
    input_tokens = reply.input_tokens if reply.input_tokens is not None else estimate_prompt(body)
    output_tokens = reply.output_tokens if reply.output_tokens is not None else max(1, len(text) // 4)
    model = reply.model or str(body.get("model") or "fake-model")
    return Resolved(reply, text, input_tokens, output_tokens, reply.cached_input_tokens, model)


def text_chunks(resolved: Resolved) -> list[str]:
    if resolved.reply.chunks is not None:
        return list(resolved.reply.chunks)
    return re.findall(r"\s*\S+", resolved.text) or ([resolved.text] if resolved.text else [])


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


# -- errors ----------------------------------------------------------------------------------------------


def error_body(error: Error, protocol: str) -> bytes:
    if error.body is not None:
        if isinstance(error.body, bytes):
            return error.body
        return error.body.encode() if isinstance(error.body, str) else json.dumps(error.body).encode()
    message = error.message or f"Upstream failure {error.status} for key {SECRET}; request id {SECRET}"
    kind = error.error_type or _ERROR_TYPES.get(error.status, "api_error")
    if protocol == "anthropic":
        payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        payload = {"error": {"message": message, "type": kind, "param": None, "code": error.code}}
    return json.dumps(payload).encode()


def error_headers(error: Error) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", b"application/json"), (b"x-upstream-request-id", SECRET.encode())]
    if error.retry_after is not None:
        headers.append((b"retry-after", f"{error.retry_after:g}".encode()))
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    return headers


# -- OpenAI ----------------------------------------------------------------------------------------------


def _openai_usage(r: Resolved) -> dict[str, Any]:
    return {
        "prompt_tokens": r.input_tokens,
        "completion_tokens": r.output_tokens,
        "total_tokens": r.input_tokens + r.output_tokens,
        "prompt_tokens_details": {"cached_tokens": r.cached},
    }


def openai_completion(r: Resolved, serial: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": r.text if r.text or not r.reply.tool_calls else None}
    if r.reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
            for c in r.reply.tool_calls
        ]
    out: dict[str, Any] = {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": r.model,
        "choices": [{"index": 0, "message": message, "finish_reason": r.reply.finish_reason}],
    }
    if r.reply.usage:
        out["usage"] = _openai_usage(r)
    return out


def _openai_chunk(r: Resolved, serial: int, delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": r.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


def openai_stream(r: Resolved, serial: int, include_usage: bool) -> Iterator[tuple[str, bool]]:
    """SSE frames as ``(frame, is_text_chunk)``."""
    yield _openai_chunk(r, serial, {"role": "assistant", "content": ""}), False
    for piece in text_chunks(r):
        yield _openai_chunk(r, serial, {"content": piece}), True
    for index, call in enumerate(r.reply.tool_calls):
        head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        yield _openai_chunk(r, serial, {"tool_calls": [head]}), False
        for piece in _halves(call.arguments_json):
            yield _openai_chunk(r, serial, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), False
    yield _openai_chunk(r, serial, {}, r.reply.finish_reason), False
    if include_usage and r.reply.usage:
        usage_chunk = {
            "id": f"chatcmpl-fake-{serial}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": r.model,
            "choices": [],
            "usage": _openai_usage(r),
        }
        yield f"data: {json.dumps(usage_chunk)}\n\n", False
    yield "data: [DONE]\n\n", False


# -- Anthropic -------------------------------------------------------------------------------------------


def _anthropic_usage(r: Resolved) -> dict[str, Any]:
    return {
        "input_tokens": r.input_tokens - r.cached,
        "output_tokens": r.output_tokens,
        "cache_read_input_tokens": r.cached,
        "cache_creation_input_tokens": 0,
    }


def anthropic_message(r: Resolved, serial: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": r.text}] if r.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments_json)}
        for c in r.reply.tool_calls
    ]
    out: dict[str, Any] = {
        "id": f"msg_fake_{serial}",
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content,
        "stop_reason": _TO_ANTHROPIC_STOP.get(r.reply.finish_reason, r.reply.finish_reason),
        "stop_sequence": None,
    }
    if r.reply.usage:
        out["usage"] = _anthropic_usage(r)
    return out


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def anthropic_stream(r: Resolved, serial: int) -> Iterator[tuple[str, bool]]:
    start = anthropic_message(r, serial)
    start.update(content=[], stop_reason=None)
    if r.reply.usage:
        start["usage"] = {**_anthropic_usage(r), "output_tokens": 1}
    yield _event("message_start", {"message": start}), False
    index = 0
    pieces = text_chunks(r)
    if pieces:
        yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}), False
        yield _event("ping", {}), False
        for piece in pieces:
            delta = {"index": 0, "delta": {"type": "text_delta", "text": piece}}
            yield _event("content_block_delta", delta), True
        yield _event("content_block_stop", {"index": 0}), False
        index = 1
    for call in r.reply.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield _event("content_block_start", {"index": index, "content_block": block}), False
        for piece in _halves(call.arguments_json):
            delta = {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}
            yield _event("content_block_delta", delta), False
        yield _event("content_block_stop", {"index": index}), False
        index += 1
    final: dict[str, Any] = {"delta": {"stop_reason": start_reason(r), "stop_sequence": None}}
    if r.reply.usage:
        final["usage"] = {"output_tokens": r.output_tokens}
    yield _event("message_delta", final), False
    yield _event("message_stop", {}), False


def start_reason(r: Resolved) -> str:
    return _TO_ANTHROPIC_STOP.get(r.reply.finish_reason, r.reply.finish_reason)
