"""The HTTP machinery shared by both protocols: timeouts, bounded retries with backoff, streaming, reply caps.

A protocol client subclasses :class:`HTTPProviderClient` and supplies the URL, headers, body and the
parsers of a complete reply and of a stream. Retries happen only for retryable failures and never once
a stream has handed out text; the exception chain of every raised :class:`ProviderError` is cut, so no
upstream body, header or key travels with it.

A reply is capped (:func:`reply_cap`): a stream that outgrows its cap is stopped there and its text kept, the
result saying why (``ChatResult.cut``); a whole JSON reply is read up to :data:`MAX_REPLY_BYTES` (a body
larger than that cannot be parsed in part, so it fails as ``GENERATION_FAILED``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import httpx

from .base import (
    FINISH_LENGTH,
    GENERATION_FAILED,
    PROVIDER_TIMEOUT,
    REPLY_TOO_LARGE,
    ChatRequest,
    ChatResult,
    Finished,
    ListedModel,
    ProviderError,
    StreamEvent,
    TextDelta,
)
from .errors import empty_stream, error_from_event, error_from_status, error_from_transport, malformed
from .models import parse_model_list
from .serialize import encode_body
from .sse import SSEEvent, read_events

logger = logging.getLogger("contextshift.providers")

#: httpcore's DEBUG trace logs response headers verbatim; these loggers get :class:`RedactHeaders`.
HTTPCORE_LOGGERS = ("httpcore.http11", "httpcore.http2", "httpcore.proxy", "httpcore.socks")

#: Error bodies are read up to this many bytes (only to classify them).
MAX_ERROR_BODY = 64 * 1024
#: The hard limit of a reply's text (UTF-8 bytes), whatever ``max_tokens`` says: under the 2,000,000 characters
#: a stored message may have. A whole JSON reply's body is read up to twice this (its framing and escapes).
MAX_REPLY_BYTES = 1_900_000
#: Bytes of text allowed per token of ``max_tokens``: real tokens average about 4 characters, so 16 leaves
#: room for long tokens and multi-byte scripts while a server that ignores ``max_tokens`` is still stopped.
REPLY_BYTES_PER_TOKEN = 16
#: The cap of a small ``max_tokens`` is never below this: a server that ignores a small ``max_tokens`` is
#: still allowed a reply of ordinary size (a short summary, a paragraph); only a runaway one is stopped.
MIN_REPLY_BYTES = 64 * 1024


def reply_cap(max_tokens: int | None, hard: int = MAX_REPLY_BYTES) -> int:
    """The most UTF-8 bytes of text a reply may have: ``max_tokens`` with headroom, never over ``hard``.

    >>> reply_cap(10_000)
    160000
    >>> reply_cap(100) == MIN_REPLY_BYTES
    True
    >>> reply_cap(None) == MAX_REPLY_BYTES
    True
    """
    if max_tokens is None or max_tokens <= 0:
        return hard
    return min(hard, max(MIN_REPLY_BYTES, max_tokens * REPLY_BYTES_PER_TOKEN))


#: The body fields that limit a reply's tokens, as a request's ``extra`` may carry them (the OpenAI-compatible
#: endpoint forwards the caller's own field there, ``max_tokens`` or ``max_completion_tokens``).
_MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


def requested_max_tokens(request: ChatRequest) -> int | None:
    """The reply's token limit as it goes out: ``request.max_tokens``, else one in ``extra`` (issue 25: a ``/v1``
    call's ``max_tokens`` travels there, and its reply was capped only by the hard byte limit)."""
    if request.max_tokens is not None:
        return request.max_tokens
    for name in _MAX_TOKENS_FIELDS:
        value = request.extra.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _too_large() -> ProviderError:
    return ProviderError(GENERATION_FAILED, "The provider's reply was larger than contextshift accepts.")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. ``read`` bounds each wait for bytes (so a long stream is fine while tokens keep coming).

    ``total`` (None: no limit) is the deadline of a whole call: every attempt, the pauses between them and
    the stream to its end. A retry that could not finish before it is not made; a stream still running at
    the deadline fails with ``PROVIDER_TIMEOUT``.
    """

    connect: float = 10.0
    read: float = 120.0
    write: float = 30.0
    pool: float = 10.0
    total: float | None = None

    @classmethod
    def for_provider(cls, timeout_seconds: float, *, total_factor: float = 5.0) -> Timeouts:
        """N5: a provider's ``timeout_seconds`` as the longest wait (connect at most 10 s), and
        ``total_factor`` times it as the deadline of the whole call."""
        return cls(
            connect=min(10.0, timeout_seconds),
            read=timeout_seconds,
            write=timeout_seconds,
            pool=timeout_seconds,
            total=timeout_seconds * total_factor,
        )

    def to_httpx(self, remaining: float | None = None) -> httpx.Timeout:
        """The per-request timeouts, none longer than ``remaining`` (seconds left before the deadline)."""

        def cap(value: float) -> float:
            return value if remaining is None else max(0.001, min(value, remaining))

        return httpx.Timeout(connect=cap(self.connect), read=cap(self.read), write=cap(self.write), pool=cap(self.pool))


class _Deadline:
    """Seconds left of a call's ``Timeouts.total`` (None: no deadline)."""

    def __init__(self, total: float | None) -> None:
        self.at = None if total is None else time.monotonic() + total

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def check(self) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise ProviderError(PROVIDER_TIMEOUT, "The provider did not finish within the turn's deadline.")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter; ``Retry-After`` is honoured up to a cap."""

    retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    #: A ``Retry-After`` longer than this is not waited for: the error is raised at once.
    retry_after_cap: float = 30.0

    def delay(self, attempt: int, error: ProviderError) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or ``None`` to give up."""
        if not error.retryable or attempt >= self.retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.retry_after_cap else None
        ceiling = min(self.backoff_max, self.backoff_base * (2.0**attempt))
        return ceiling * random.uniform(0.5, 1.0)


class StreamParser(ABC):
    """Turns one protocol's SSE events into text deltas and, at the end, a :class:`ChatResult`."""

    done: bool = False

    @abstractmethod
    def feed(self, event: SSEEvent) -> list[TextDelta]:
        """Text deltas carried by ``event``; raises :class:`ProviderError` for an error event."""

    @abstractmethod
    def finish(self) -> ChatResult:
        """The result; raises :class:`ProviderError` if the stream ended before the reply was complete."""


class RedactHeaders(logging.Filter):
    """Keeps upstream response headers out of httpcore's DEBUG records (N2: no upstream header in a log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if message.startswith("receive_response_headers.complete") and "return_value=" in message:
            record.msg = "receive_response_headers.complete (headers redacted)"
            record.args = ()
        return True


def install_log_redaction() -> None:
    """Attach :class:`RedactHeaders` to httpcore's loggers once (done on import of this module)."""
    for name in HTTPCORE_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, RedactHeaders) for f in target.filters):
            target.addFilter(RedactHeaders())


install_log_redaction()


def _clean(error: ProviderError) -> ProviderError:
    """Cut the exception chain so nothing upstream is reachable from the raised error."""
    error.__cause__ = None
    error.__context__ = None
    error.__suppress_context__ = True
    return error


def parse_json(raw: bytes, what: str = "reply") -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _clean(malformed(what)) from None


class EventStream:
    """:class:`~contextshift.providers.base.ChatStream` over an async generator; closing it closes HTTP."""

    def __init__(self, events: AsyncGenerator[StreamEvent, None]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


#: An event the caller wants set once a request's body has been written to the provider's connection (the
#: endpoint writes its audit then, while the provider works, rather than while the body is being sent).
request_sent: ContextVar[asyncio.Event | None] = ContextVar("contextshift_request_sent", default=None)


async def _trace(event: str, _info: Mapping[str, Any]) -> None:
    """httpcore's trace hook: sets :data:`request_sent` when the request's body is written."""
    if event.endswith("send_request_body.complete"):
        sent = request_sent.get()
        if sent is not None:
            sent.set()


def _extensions() -> dict[str, Any] | None:
    return {"trace": _trace} if request_sent.get() is not None else None


class HTTPProviderClient(ABC):
    """Common base of the OpenAI-compatible and Anthropic clients."""

    kind: str = ""
    enforces_output_limit: bool = True
    #: Sets :data:`request_sent` when a request's body is written.
    signals_sent: bool = True

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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        #: The hard limit of a reply's text (see :func:`reply_cap`).
        self.max_reply_bytes = max_reply_bytes
        self._api_key = api_key or None
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self._extra_headers = dict(headers or {})
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(timeout=self.timeouts.to_httpx())

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(kind={self.kind!r}, base_url={self.base_url!r})"

    # -- protocol specifics -----------------------------------------------------------------------------

    @property
    @abstractmethod
    def url(self) -> str: ...

    @property
    @abstractmethod
    def models_url(self) -> str:
        """Where the provider lists its models (``GET``)."""

    @abstractmethod
    def auth_headers(self, api_key: str) -> dict[str, str]: ...

    @abstractmethod
    def request_body(self, request: ChatRequest) -> dict[str, Any]: ...

    @abstractmethod
    def parse_result(self, payload: Any) -> ChatResult: ...

    @abstractmethod
    def stream_parser(self) -> StreamParser: ...

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(self._extra_headers)
        if self._api_key is not None:
            headers.update(self.auth_headers(self._api_key))
        return headers

    # -- calls ------------------------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResult:
        content = encode_body(self.request_body(replace(request, stream=False)))
        deadline = _Deadline(self.timeouts.total)
        attempt = 0
        while True:
            logger.debug("provider %s: request for model %s (attempt %d)", self.kind, request.model, attempt + 1)
            try:
                deadline.check()
                # N5: the whole attempt (a body trickled in below the read timeout included) within the deadline
                async with asyncio.timeout(deadline.remaining()):
                    async with self._client.stream(
                        "POST",
                        self.url,
                        content=content,
                        headers=self._headers(),
                        timeout=self.timeouts.to_httpx(deadline.remaining()),
                        extensions=_extensions(),
                    ) as response:
                        if response.status_code >= 400:
                            raw = await _read_capped(response)
                            raise error_from_status(response.status_code, raw, response.headers)
                        body = await _read_capped(response, 2 * self.max_reply_bytes, strict=True)
                return _capped(self._result_of(parse_json(body)), request, self.max_reply_bytes)
            except ProviderError as exc:
                error = exc
            except TimeoutError:
                error = ProviderError(
                    PROVIDER_TIMEOUT, "The provider did not finish within the turn's deadline.", retryable=False
                )
            except (httpx.RequestError, httpx.InvalidURL) as exc:
                error = error_from_transport(exc)
            await self._before_retry(attempt, _clean(error), deadline)
            attempt += 1

    async def list_models(self) -> list[ListedModel]:
        """The provider's model list: one ``GET`` within the call's deadline, never retried (a connection test
        reports what one try met). Every failure is a :class:`ProviderError` with the cause's own code
        (refused, DNS, TLS, timeout, a 5xx, the key)."""
        deadline = _Deadline(self.timeouts.total)
        headers = {k: v for k, v in self._headers().items() if k != "content-type"}
        logger.debug("provider %s: model list", self.kind)
        try:
            response = await self._client.get(
                self.models_url, headers=headers, timeout=self.timeouts.to_httpx(deadline.remaining())
            )
            if response.status_code >= 400:
                raise error_from_status(response.status_code, response.content[:MAX_ERROR_BODY], response.headers)
            return parse_model_list(parse_json(response.content, "model list"))
        except ProviderError as exc:
            error = exc
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            error = error_from_transport(exc)
        raise _clean(error)  # outside the handler: nothing upstream is even its context

    def _result_of(self, payload: Any) -> ChatResult:
        """A 200 JSON body as a result; an ``error`` object in it (some proxies do that) as its error."""
        if isinstance(payload, Mapping) and payload.get("error"):
            raise error_from_event(payload)
        return self.parse_result(payload)

    def stream(self, request: ChatRequest) -> EventStream:
        return EventStream(self._stream(request))

    async def _stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        content = encode_body(self.request_body(replace(request, stream=True)))
        headers = {**self._headers(), "accept": "text/event-stream"}
        deadline = _Deadline(self.timeouts.total)
        attempt = 0
        while True:
            logger.debug("provider %s: stream for model %s (attempt %d)", self.kind, request.model, attempt + 1)
            started = False
            try:
                deadline.check()
                async with self._client.stream(
                    "POST",
                    self.url,
                    content=content,
                    headers=headers,
                    timeout=self.timeouts.to_httpx(deadline.remaining()),
                    extensions=_extensions(),
                ) as response:
                    if response.status_code >= 400:
                        raw = await _read_capped(response)
                        raise error_from_status(response.status_code, raw, response.headers)
                    if response.headers.get("content-type", "").startswith("application/json"):
                        # The server ignored ``stream``: one JSON reply.
                        raw = await _read_capped(response, 2 * self.max_reply_bytes, strict=True)
                        result = self._result_of(parse_json(raw))
                        if result.text:
                            started = True
                            yield TextDelta(result.text)
                    else:
                        parser = self.stream_parser()
                        events = 0
                        cap = _Cap(reply_cap(requested_max_tokens(request), self.max_reply_bytes))
                        async for event in read_events(response.aiter_lines()):
                            events += 1
                            deadline.check()
                            for delta in parser.feed(event):
                                kept = cap.take(delta.text)
                                if kept:
                                    started = True
                                    yield TextDelta(kept)
                                if cap.full:
                                    break
                            if parser.done or cap.full:
                                break
                        if not events:
                            raise empty_stream()
                        result = cap.result(request) if cap.full else parser.finish()
            except ProviderError as exc:
                error = exc
            except (httpx.RequestError, httpx.InvalidURL) as exc:
                error = error_from_transport(exc)
            else:
                yield Finished(result)
                return
            _clean(error)
            if started:
                logger.warning("provider %s: stream failed after text was sent (%s)", self.kind, error.code)
                raise error
            await self._before_retry(attempt, error, deadline)
            attempt += 1

    async def _before_retry(self, attempt: int, error: ProviderError, deadline: _Deadline | None = None) -> None:
        """Sleep before the next attempt, or raise ``error`` when it must not be retried (or the next
        attempt could not start before the deadline)."""
        wait = self.retry.delay(attempt, error)
        left = deadline.remaining() if deadline is not None else None
        if wait is not None and left is not None and wait >= left:
            logger.info("provider %s: no time left before the deadline for a retry (%s)", self.kind, error.code)
            wait = None
        if wait is None:
            logger.info("provider %s: request failed (%s, status %s)", self.kind, error.code, error.status)
            raise error
        logger.warning(
            "provider %s: %s (status %s); retry %d of %d in %.2fs",
            self.kind,
            error.code,
            error.status,
            attempt + 1,
            self.retry.retries,
            wait,
        )
        await asyncio.sleep(wait)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> HTTPProviderClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _read_capped(response: httpx.Response, limit: int = MAX_ERROR_BODY, *, strict: bool = False) -> bytes:
    """At most ``limit`` bytes of the body; with ``strict``, a longer body is an error (it cannot be parsed)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if strict:
                raise _too_large()
            break
    return b"".join(chunks)[:limit]


def _capped(result: ChatResult, request: ChatRequest, hard: int) -> ChatResult:
    """A whole reply whose text is over its cap, cut there (``cut``: why); any other reply as it is."""
    cap = _Cap(reply_cap(requested_max_tokens(request), hard))
    cap.take(result.text)
    if not cap.full:
        return result
    return replace(cap.result(request), usage=result.usage, model=result.model)


class _Cap:
    """A stream's text up to a byte cap: past it the stream is stopped and what came is the reply."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.full = False
        self.parts: list[str] = []

    def take(self, text: str) -> str:
        """The part of ``text`` within the cap (all of it, unless this delta crosses the cap)."""
        encoded = text.encode("utf-8", "surrogatepass")
        if self.size + len(encoded) > self.limit:
            self.full = True
            text = encoded[: self.limit - self.size].decode("utf-8", "ignore")  # never half a character
        self.size += len(text.encode("utf-8", "surrogatepass"))
        self.parts.append(text)
        return text

    def result(self, request: ChatRequest) -> ChatResult:
        logger.warning("provider reply for model %s cut at its cap of %d bytes", request.model, self.limit)
        return ChatResult(
            text="".join(self.parts), finish_reason=FINISH_LENGTH, raw_finish_reason=None, cut=REPLY_TOO_LARGE
        )
