"""Anthropic Messages client.

``POST {base_url}/v1/messages`` (a base URL that already ends in ``/v1`` works too) with ``x-api-key`` and
``anthropic-version: 2023-06-01``. Streaming events: ``message_start``, ``content_block_*``,
``message_delta``, ``message_stop`` (and ``ping`` / ``error``).
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
from .errors import error_from_event, error_from_status, error_from_transport, malformed, truncated
from .http import (
    MAX_ERROR_BODY,
    MAX_REPLY_BYTES,
    HTTPProviderClient,
    RetryPolicy,
    StreamParser,
    Timeouts,
    _clean,
    parse_json,
)
from .serialize import DEFAULT_ANTHROPIC_MAX_TOKENS, anthropic_body
from .sse import SSEEvent

#: Seconds a count_tokens call may take before the estimate is used instead (T5).
COUNT_TOKENS_TIMEOUT = 3.0

ANTHROPIC_VERSION = "2023-06-01"
#: The longest page ``GET /v1/models`` gives (Anthropic's documented maximum of ``limit``).
MODELS_PAGE = 1000

_FINISH: Mapping[str, str] = {
    "end_turn": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "max_tokens": FINISH_LENGTH,
    "model_context_window_exceeded": FINISH_LENGTH,
    "tool_use": FINISH_TOOL_CALLS,
    "refusal": FINISH_CONTENT_FILTER,
}


def normalize_stop_reason(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "unknown"
    return _FINISH.get(value, value.lower())


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class _UsageCounter:
    """Anthropic reports uncached input, cache reads and cache writes apart; we report the whole prompt."""

    def __init__(self) -> None:
        self.seen = False
        self.input = self.cache_read = self.cache_write = self.output = 0

    def update(self, raw: Any) -> None:
        if not isinstance(raw, Mapping):
            return
        self.seen = True
        if "input_tokens" in raw:
            self.input = _int(raw.get("input_tokens"))
        if "cache_read_input_tokens" in raw:
            self.cache_read = _int(raw.get("cache_read_input_tokens"))
        if "cache_creation_input_tokens" in raw:
            self.cache_write = _int(raw.get("cache_creation_input_tokens"))
        if "output_tokens" in raw:
            self.output = _int(raw.get("output_tokens"))

    def usage(self) -> Usage | None:
        if not self.seen:
            return None
        return Usage(
            input_tokens=self.input + self.cache_read + self.cache_write,
            output_tokens=self.output,
            cached_input_tokens=self.cache_read,
            cache_write_input_tokens=self.cache_write,
        )


def parse_usage(raw: Any) -> Usage | None:
    counter = _UsageCounter()
    counter.update(raw)
    return counter.usage()


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    call_id, name, payload = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
        raise malformed()
    arguments = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def parse_message(payload: Any) -> ChatResult:
    """A Messages API ``message`` object as a :class:`ChatResult`."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("content"), list):
        raise malformed()
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in payload["content"]:
        if not isinstance(block, Mapping):
            raise malformed()
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(_tool_call(block))
    raw_finish = payload.get("stop_reason")
    model = payload.get("model")
    return ChatResult(
        text="".join(text),
        finish_reason=normalize_stop_reason(raw_finish),
        tool_calls=tuple(calls),
        usage=parse_usage(payload.get("usage")),
        model=model if isinstance(model, str) else None,
        raw_finish_reason=raw_finish if isinstance(raw_finish, str) else None,
    )


class AnthropicStreamParser(StreamParser):
    def __init__(self) -> None:
        self.done = False
        self._text: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}
        self._usage = _UsageCounter()
        self._stop: str | None = None
        self._model: str | None = None

    def feed(self, event: SSEEvent) -> list[TextDelta]:
        try:
            data = json.loads(event.data)
        except ValueError:
            raise malformed("stream") from None
        if not isinstance(data, Mapping):
            raise malformed("stream")
        kind = data.get("type", event.event)
        if kind == "error":
            raise error_from_event(data)
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping):
                self._usage.update(message.get("usage"))
                if isinstance(message.get("model"), str):
                    self._model = message["model"]
        elif kind == "content_block_start":
            return self._start_block(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
                self._stop = delta["stop_reason"]
            self._usage.update(data.get("usage"))
        elif kind == "message_stop":
            self.done = True
        return []

    def _emit(self, text: Any) -> list[TextDelta]:
        if not isinstance(text, str) or not text:
            return []
        self._text.append(text)
        return [TextDelta(text)]

    def _start_block(self, data: Mapping[str, Any]) -> list[TextDelta]:
        block = data.get("content_block")
        if not isinstance(block, Mapping):
            raise malformed("stream")
        if block.get("type") == "text":
            return self._emit(block.get("text"))
        if block.get("type") == "tool_use":
            index = data.get("index", len(self._tools))
            self._tools[index if isinstance(index, int) else len(self._tools)] = {
                "id": block.get("id"),
                "name": block.get("name"),
                "input": block.get("input") or {},
                "json": [],
            }
        return []

    def _delta(self, data: Mapping[str, Any]) -> list[TextDelta]:
        delta = data.get("delta")
        if not isinstance(delta, Mapping):
            raise malformed("stream")
        if delta.get("type") == "text_delta":
            return self._emit(delta.get("text"))
        if delta.get("type") == "input_json_delta":
            tool = self._tools.get(data.get("index", -1)) if isinstance(data.get("index"), int) else None
            if tool is None or not isinstance(delta.get("partial_json"), str):
                raise malformed("stream")
            tool["json"].append(delta["partial_json"])
        return []

    def finish(self) -> ChatResult:
        if not self.done and self._stop is None:
            raise truncated()
        calls: list[ToolCall] = []
        for _, tool in sorted(self._tools.items()):
            partial = "".join(tool["json"])
            calls.append(_tool_call({**tool, "input": partial or tool["input"]}))
        return ChatResult(
            text="".join(self._text),
            finish_reason=normalize_stop_reason(self._stop),
            tool_calls=tuple(calls),
            usage=self._usage.usage(),
            model=self._model,
            raw_finish_reason=self._stop,
        )


class AnthropicClient(HTTPProviderClient):
    """Messages API over HTTP. ``default_max_tokens`` fills the mandatory ``max_tokens`` when a request has none."""

    kind = "anthropic"
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
        default_max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS,
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
        self.default_max_tokens = default_max_tokens

    @property
    def url(self) -> str:
        root = self.base_url.removesuffix("/v1")
        return f"{root}/v1/messages"

    @property
    def models_url(self) -> str:
        """``GET /v1/models``, a page as long as the API allows (the default page is 20)."""
        return f"{self.base_url.removesuffix('/v1')}/v1/models?limit={MODELS_PAGE}"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def _headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION, **super()._headers()}

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        return anthropic_body(request, default_max_tokens=self.default_max_tokens)

    def parse_result(self, payload: Any) -> ChatResult:
        return parse_message(payload)

    def stream_parser(self) -> StreamParser:
        return AnthropicStreamParser()

    async def count_tokens(self, request: ChatRequest, *, timeout: float = COUNT_TOKENS_TIMEOUT) -> int:
        """T5: the request's exact prompt tokens from ``POST /v1/messages/count_tokens`` (free, no generation).

        One attempt with a short ``timeout``; every failure is a :class:`ProviderError` (callers fall back to
        their estimate).
        """
        body = self.request_body(request)
        counted = {k: body[k] for k in ("model", "messages", "system", "tools", "tool_choice") if k in body}
        try:
            response = await self._client.post(
                f"{self.url}/count_tokens", json=counted, headers=self._headers(), timeout=timeout
            )
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            raise _clean(error_from_transport(exc)) from None
        if response.status_code >= 400:
            raise _clean(error_from_status(response.status_code, response.content[:MAX_ERROR_BODY], response.headers))
        payload = parse_json(response.content, "token count")
        tokens = payload.get("input_tokens") if isinstance(payload, Mapping) else None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise malformed("token count")
        return tokens
