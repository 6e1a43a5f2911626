"""The exact JSON bodies the clients send (pure, no I/O), on the wire format of ``contextshift.core.wire``.

* :func:`openai_body` / :func:`anthropic_body` — the whole request body for a :class:`ChatRequest`; the
  clients send exactly this, so a caller can count tokens on what really goes out (N1).
* :func:`chat_request` — serialize core messages for a provider kind into a :class:`ChatRequest`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextshift.core.messages import MessageLike
from contextshift.core.vocabulary import OPENAI_KINDS
from contextshift.core.wire import CONTINUATION_TEXT as CONTINUATION_TEXT
from contextshift.core.wire import RAW_ARGUMENTS_KEY as RAW_ARGUMENTS_KEY
from contextshift.core.wire import openai_tool_call as openai_tool_call
from contextshift.core.wire import to_anthropic_messages as to_anthropic_messages
from contextshift.core.wire import to_openai_messages as to_openai_messages
from contextshift.core.wire import tool_use_input as tool_use_input

from .base import ChatRequest, UnknownProviderKind

#: Anthropic requires ``max_tokens``; used when a request has none.
DEFAULT_ANTHROPIC_MAX_TOKENS = 4096


class RawMessages(list[dict[str, Any]]):
    """Wire messages that also carry their JSON (``json_bytes``, the whole array, UTF-8): a body holding them is
    encoded without serializing them again (the OpenAI-compatible endpoint forwards what callers sent)."""

    def __init__(self, messages: Iterable[dict[str, Any]], json_bytes: bytes) -> None:
        super().__init__(messages)
        self.json_bytes = json_bytes


def encode_body(body: Mapping[str, Any]) -> bytes:
    """``body`` as the JSON bytes httpx's ``json=`` would send; :class:`RawMessages` go in as their JSON."""
    messages = body.get("messages")
    if not isinstance(messages, RawMessages):
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    rest = json.dumps(
        {k: v for k, v in body.items() if k != "messages"}, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()
    return b'{"messages":' + messages.json_bytes + (b"," + rest[1:] if len(rest) > 2 else b"}")


def openai_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions in OpenAI shape (Anthropic ``{name, description, input_schema}`` converted)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if "function" in tool or "input_schema" not in tool:
            out.append(dict(tool))
            continue
        function: dict[str, Any] = {"name": tool.get("name", "")}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def openai_body(request: ChatRequest, *, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    """The exact Chat Completions body for ``request``."""
    messages = request.messages if isinstance(request.messages, RawMessages) else list(request.messages)
    if request.system:
        messages = [{"role": "system", "content": request.system}, *messages]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.max_tokens is not None:
        body[max_tokens_field] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = openai_tools(request.tools)
    body["stream"] = request.stream
    if request.stream:
        body["stream_options"] = {"include_usage": True}
    body.update(request.extra)
    return body


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions in Anthropic shape (OpenAI ``{"type": "function", "function": ...}`` converted)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function")
        if not isinstance(function, Mapping):
            out.append(dict(tool))
            continue
        converted: dict[str, Any] = {"name": function.get("name", "")}
        if function.get("description"):
            converted["description"] = function["description"]
        converted["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(converted)
    return out


def anthropic_body(request: ChatRequest, *, default_max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS) -> dict[str, Any]:
    """The exact Messages body for ``request`` (``max_tokens`` is mandatory there)."""
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens if request.max_tokens is not None else default_max_tokens,
        "messages": list(request.messages),
    }
    if request.system:
        body["system"] = request.system
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    if request.stream:
        body["stream"] = True
    body.update(request.extra)
    return body


def chat_request(
    kind: str,
    messages: Iterable[MessageLike],
    *,
    model: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    stream: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ChatRequest:
    """A :class:`ChatRequest` with ``messages`` serialized for the provider ``kind``."""
    system: str | None
    if kind == "anthropic":
        system, wire = to_anthropic_messages(messages)
    elif kind in OPENAI_KINDS:
        system, wire = None, to_openai_messages(messages)
    else:
        raise UnknownProviderKind(kind)
    return ChatRequest(
        model=model,
        messages=wire,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
        stream=stream,
        tools=[dict(t) for t in tools] if tools else None,
        extra=dict(extra or {}),
    )


def request_body(kind: str, request: ChatRequest) -> dict[str, Any]:
    """The body a client of ``kind`` (with default options) sends for ``request``; raises
    :class:`UnknownProviderKind` (a ``ValueError``) for a kind with no client, as :func:`chat_request` does."""
    if kind == "anthropic":
        return anthropic_body(request)
    if kind in OPENAI_KINDS:
        return openai_body(request)
    raise UnknownProviderKind(kind)
