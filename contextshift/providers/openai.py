"""OpenAI-compatible Chat Completions client (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, OpenRouter, ...).

``POST {base_url}/chat/completions`` with ``Authorization: Bearer <key>``; streaming is SSE with
``stream_options.include_usage`` so the last chunk carries usage (cached prompt tokens included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from contextshift.core.messages import ToolCall

from .base import (
    FINISH_CONTENT_FILTER,
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    ChatRequest,
    ChatResult,
    TextDelta,
    Usage,
)
from .errors import error_from_event, malformed, truncated
from .http import MAX_REPLY_BYTES, HTTPProviderClient, RetryPolicy, StreamParser, Timeouts
from .serialize import openai_body
from .sse import SSEEvent

_FINISH: Mapping[str, str] = {
    "stop": FINISH_STOP,
    "eos": FINISH_STOP,
    "eos_token": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "end_turn": FINISH_STOP,
    "length": FINISH_LENGTH,
    "max_tokens": FINISH_LENGTH,
    "tool_calls": FINISH_TOOL_CALLS,
    "function_call": FINISH_TOOL_CALLS,
    "content_filter": FINISH_CONTENT_FILTER,
}


def normalize_finish(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "unknown"
    return _FINISH.get(value.lower(), value.lower())


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_usage(raw: Any, timings: Any = None) -> Usage | None:
    """``usage`` of a completion or chunk, with the cached prompt tokens from whichever field the server uses.

    Cached tokens: ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, LM Studio), ``prompt_cache_hit_tokens``
    (DeepSeek), ``cache_read_input_tokens`` (Anthropic-style proxies), or llama.cpp's ``timings.cache_n`` (a
    sibling of ``usage``). A body with ``timings`` but no ``usage`` (older llama.cpp streams) still gives usage:
    ``prompt_n + cache_n`` prompt tokens and ``predicted_n`` completion tokens.
    """
    timing = timings if isinstance(timings, Mapping) else {}
    if not isinstance(raw, Mapping):
        if "prompt_n" not in timing:
            return None
        raw = {
            "prompt_tokens": _int(timing.get("prompt_n")) + _int(timing.get("cache_n")),
            "completion_tokens": _int(timing.get("predicted_n")),
        }
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    for spelling in ("prompt_cache_hit_tokens", "cache_read_input_tokens", "cached_tokens"):
        if not cached:
            cached = _int(raw.get(spelling))
    if not cached:
        cached = _int(timing.get("cache_n"))
    prompt = _int(raw.get("prompt_tokens"))
    return Usage(
        input_tokens=prompt,
        output_tokens=_int(raw.get("completion_tokens")),
        cached_input_tokens=min(cached, prompt) if prompt else cached,
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _tool_call(raw: Any) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise malformed()
    function = raw.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    call_id = raw.get("id")
    name = function.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
        raise malformed()
    return ToolCall(id=call_id, name=name, arguments=arguments)


def parse_completion(payload: Any) -> ChatResult:
    """A ``chat.completion`` object as a :class:`ChatResult`."""
    if not isinstance(payload, Mapping):
        raise malformed()
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise malformed()
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise malformed()
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise malformed()
    raw_finish = choice.get("finish_reason")
    model = payload.get("model")
    return ChatResult(
        text=_text_of(message.get("content")),
        finish_reason=normalize_finish(raw_finish),
        tool_calls=tuple(_tool_call(c) for c in raw_calls),
        usage=parse_usage(payload.get("usage"), payload.get("timings")),
        model=model if isinstance(model, str) else None,
        raw_finish_reason=raw_finish if isinstance(raw_finish, str) else None,
    )


class OpenAIStreamParser(StreamParser):
    """``chat.completion.chunk`` events until ``[DONE]``."""

    def __init__(self) -> None:
        self.done = False
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._model: str | None = None

    def feed(self, event: SSEEvent) -> list[TextDelta]:
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            raise malformed("stream") from None
        if not isinstance(chunk, Mapping):
            raise malformed("stream")
        if chunk.get("error"):
            raise error_from_event(chunk)
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        usage = parse_usage(chunk.get("usage"), chunk.get("timings"))
        if usage is not None:
            self._usage = usage
        out: list[TextDelta] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                text = _text_of(delta.get("content"))
                if text:
                    self._text.append(text)
                    out.append(TextDelta(text))
                for call in delta.get("tool_calls") or []:
                    self._add_call(call)
            if isinstance(choice.get("finish_reason"), str):
                self._finish = choice["finish_reason"]
        return out

    def _add_call(self, call: Any) -> None:
        if not isinstance(call, Mapping):
            raise malformed("stream")
        index = call.get("index", len(self._calls))
        slot = self._calls.setdefault(index if isinstance(index, int) else len(self._calls), {})
        if isinstance(call.get("id"), str) and call["id"]:
            slot["id"] = call["id"]
        function = call.get("function")
        if isinstance(function, Mapping):
            if isinstance(function.get("name"), str) and function["name"]:
                slot["name"] = slot.get("name", "") + function["name"]
            if isinstance(function.get("arguments"), str):
                slot["arguments"] = slot.get("arguments", "") + function["arguments"]

    def finish(self) -> ChatResult:
        if self._finish is None and not self.done:
            raise truncated()
        calls = []
        for _, slot in sorted(self._calls.items()):
            if not slot.get("id") or "name" not in slot:
                raise malformed("stream")
            calls.append(ToolCall(id=slot["id"], name=slot["name"], arguments=slot.get("arguments", "")))
        return ChatResult(
            text="".join(self._text),
            finish_reason=normalize_finish(self._finish),
            tool_calls=tuple(calls),
            usage=self._usage,
            model=self._model,
            raw_finish_reason=self._finish,
        )


class OpenAIClient(HTTPProviderClient):
    """Chat Completions over HTTP. ``max_tokens_field`` may be set to ``"max_completion_tokens"``."""

    kind = "openai"
    enforces_output_limit = True

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        max_tokens_field: str = "max_tokens",
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            timeouts=timeouts,
            retry=retry,
            headers=headers,
            http_client=http_client,
            max_reply_bytes=max_reply_bytes,
        )
        self.max_tokens_field = max_tokens_field

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def models_url(self) -> str:
        return f"{self.base_url}/models"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        return openai_body(request, max_tokens_field=self.max_tokens_field)

    def parse_result(self, payload: Any) -> ChatResult:
        return parse_completion(payload)

    def stream_parser(self) -> StreamParser:
        return OpenAIStreamParser()


class OpenAICodexClient(OpenAIClient):
    """The ``openai-codex`` kind: the OpenAI protocol, but ``max_tokens`` is not enforced (C5)."""

    kind = "openai-codex"
    enforces_output_limit = False
