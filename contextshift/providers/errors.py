"""Mapping upstream failures onto :class:`ProviderError` codes (A2), without keeping any upstream text.

The upstream body is only *inspected* (for a context-length marker or an error type); nothing from it, nor
from headers, is copied into the error.
"""

from __future__ import annotations

import email.utils
import errno
import json
import math
import re
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from .base import (
    GENERATION_FAILED,
    PROVIDER_AUTH,
    PROVIDER_BAD_REQUEST,
    PROVIDER_CONNECTION_REFUSED,
    PROVIDER_CONTEXT_LENGTH,
    PROVIDER_DNS_FAILED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_SERVER_ERROR,
    PROVIDER_TIMEOUT,
    PROVIDER_TLS_FAILED,
    PROVIDER_UNAVAILABLE,
    ProviderError,
)

#: Phrases (lower-case) by which OpenAI-compatible servers and Anthropic say the prompt is too long.
CONTEXT_MARKERS: tuple[str, ...] = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "too many tokens",
    "prompt is too long",
    "maximum prompt length",
    "input is too long",
    "exceeds the context",
    "exceed context window",  # llama-cpp-python: "Requested tokens (n) exceed context window of m"
    "exceeds the available context size",  # llama.cpp server
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
)

#: Phrases (lower-case) by which servers say, in a 5xx, that the *request itself* is invalid: such an
#: answer will not change on a retry, so it is ``PROVIDER_BAD_REQUEST`` and is not retried. Local servers
#: do this: llama-cpp-python answers 500 "Input should be a valid string" (a pydantic validation error)
#: to a null ``content``.
INVALID_REQUEST_MARKERS: tuple[str, ...] = (
    "invalid_request_error",
    "invalid request",
    "validation error",
    "input should be",
    "field required",
    "extra inputs are not permitted",
    "unprocessable",
    "is not valid under any of the given schemas",
)

#: Anthropic / OpenAI error ``type`` values seen in bodies and mid-stream ``error`` events.
_TYPE_CODES: Mapping[str, tuple[str, bool]] = {
    "authentication_error": (PROVIDER_AUTH, False),
    "permission_error": (PROVIDER_AUTH, False),
    "rate_limit_error": (PROVIDER_RATE_LIMITED, True),
    "overloaded_error": (PROVIDER_UNAVAILABLE, True),
    "api_error": (PROVIDER_UNAVAILABLE, True),
    "server_error": (PROVIDER_UNAVAILABLE, True),
    "timeout_error": (PROVIDER_TIMEOUT, True),
    "invalid_request_error": (PROVIDER_BAD_REQUEST, False),
    "not_found_error": (PROVIDER_BAD_REQUEST, False),
    "request_too_large": (PROVIDER_BAD_REQUEST, False),
}

MESSAGES: Mapping[str, str] = {
    PROVIDER_AUTH: "The provider rejected the API key.",
    PROVIDER_RATE_LIMITED: "The provider is rate limiting requests; try again later.",
    PROVIDER_TIMEOUT: "The provider did not answer in time.",
    PROVIDER_UNAVAILABLE: "The provider is unavailable right now.",
    PROVIDER_CONNECTION_REFUSED: "The provider's address refused the connection: nothing listens on that port.",
    PROVIDER_DNS_FAILED: "The provider's host name could not be resolved (DNS).",
    PROVIDER_TLS_FAILED: "The secure (TLS) connection to the provider failed: its certificate or protocol.",
    PROVIDER_SERVER_ERROR: "The provider answered with a server error.",
    PROVIDER_CONTEXT_LENGTH: "The prompt is longer than the model's context window.",
    PROVIDER_BAD_REQUEST: "The provider rejected the request.",
    GENERATION_FAILED: "The provider's reply could not be read.",
}


def _error_object(payload: Any) -> Mapping[str, Any]:
    if isinstance(payload, Mapping):
        inner = payload.get("error")
        if isinstance(inner, Mapping):
            return inner
        return payload
    return {}


def _parse_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def says_context_length(payload: Any, raw: bytes | str = b"") -> bool:
    """True if an error payload (or its raw text) says the prompt exceeds the context window."""
    error = _error_object(payload)
    if error.get("code") == "context_length_exceeded" or error.get("type") == "context_length_exceeded":
        return True
    text = error.get("message")
    haystack = text if isinstance(text, str) else (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    lowered = haystack.lower()
    return any(marker in lowered for marker in CONTEXT_MARKERS)


def says_invalid_request(payload: Any, raw: bytes | str = b"") -> bool:
    """True if an error payload (or its raw text) says the request itself is malformed (not a server fault)."""
    error = _error_object(payload)
    if error.get("type") == "invalid_request_error" or error.get("code") == "invalid_request_error":
        return True
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    lowered = text.lower()
    return any(marker in lowered for marker in INVALID_REQUEST_MARKERS)


#: How servers state the real prompt size and the limit in a context-length rejection (T5):
#: OpenAI "maximum context length is 8192 tokens. However, your messages resulted in 9013 tokens" (or
#: "you requested 9100 tokens (8100 in the messages, 1000 in the completion)", also vLLM), Anthropic
#: "prompt is too long: 210000 tokens > 200000 maximum" (or "input length and `max_tokens` exceed context
#: limit: 188240 + 21333 > 200000"), llama-cpp-python "Requested tokens (4140) exceed context window of 4096",
#: llama.cpp's ``n_prompt_tokens`` / ``n_ctx`` fields.
_PROMPT_PATTERNS = (
    re.compile(r"(\d[\d,]*) in the messages"),
    re.compile(r"messages resulted in (\d[\d,]*) tokens"),
    re.compile(r"prompt is too long: (\d[\d,]*) tokens"),
    re.compile(r"exceed context limit: (\d[\d,]*) \+"),
    re.compile(r"prompt (?:has|contains|is) (\d[\d,]*) tokens"),
    re.compile(r"requested tokens \((\d[\d,]*)\)", re.IGNORECASE),
)
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length is (\d[\d,]*)"),
    re.compile(r"tokens > (\d[\d,]*) maximum"),
    re.compile(r"\d \+ \d[\d,]* > (\d[\d,]*)"),
    re.compile(r"context (?:size|window|length) (?:is|of) (\d[\d,]*)"),
)


def _number(text: str) -> int | None:
    value = int(text.replace(",", ""))
    return value if 0 < value < 100_000_000 else None


def context_numbers(payload: Any, raw: bytes | str = b"") -> tuple[int | None, int | None]:
    """``(prompt_tokens, limit)`` a context-length rejection states, each None when it does not say."""
    error = _error_object(payload)
    tokens = error.get("n_prompt_tokens") if isinstance(error.get("n_prompt_tokens"), int) else None
    limit = error.get("n_ctx") if isinstance(error.get("n_ctx"), int) else None
    text = error.get("message")
    haystack = text if isinstance(text, str) else (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    for pattern in _PROMPT_PATTERNS:
        if tokens is None and (match := pattern.search(haystack)):
            tokens = _number(match.group(1))
    for pattern in _LIMIT_PATTERNS:
        if limit is None and (match := pattern.search(haystack)):
            limit = _number(match.group(1))
    return tokens, limit


def context_length_error(payload: Any, raw: bytes | str = b"", status: int | None = None) -> ProviderError:
    """``PROVIDER_CONTEXT_LENGTH`` with the numbers the rejection stated (never its text)."""
    tokens, limit = context_numbers(payload, raw)
    return ProviderError(
        PROVIDER_CONTEXT_LENGTH,
        MESSAGES[PROVIDER_CONTEXT_LENGTH],
        status,
        reported_tokens=tokens,
        reported_limit=limit,
    )


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def error_from_status(status: int, body: bytes, headers: httpx.Headers) -> ProviderError:
    """The normalized error of an HTTP error response."""
    payload = _parse_body(body)
    if status in (401, 403):
        message = MESSAGES[PROVIDER_AUTH] if status == 401 else "The provider refused access with this API key."
        return ProviderError(PROVIDER_AUTH, message, status, retryable=False)
    if status == 429:
        return ProviderError(
            PROVIDER_RATE_LIMITED,
            MESSAGES[PROVIDER_RATE_LIMITED],
            status,
            retryable=True,
            retry_after=parse_retry_after(headers),
        )
    if status == 408:
        return ProviderError(PROVIDER_TIMEOUT, MESSAGES[PROVIDER_TIMEOUT], status, retryable=True)
    if status >= 500:
        if says_context_length(payload, body):
            return ProviderError(PROVIDER_CONTEXT_LENGTH, MESSAGES[PROVIDER_CONTEXT_LENGTH], status)
        if says_invalid_request(payload, body):
            return ProviderError(
                PROVIDER_BAD_REQUEST,
                f"The provider rejected the request as invalid (HTTP {status}).",
                status,
            )
        return ProviderError(
            PROVIDER_SERVER_ERROR,
            f"The provider answered with a server error (HTTP {status}).",
            status,
            retryable=True,
            retry_after=parse_retry_after(headers),
        )
    if 400 <= status < 500:
        if says_context_length(payload, body):
            return context_length_error(payload, body, status)
        return ProviderError(PROVIDER_BAD_REQUEST, f"The provider rejected the request (HTTP {status}).", status)
    return ProviderError(GENERATION_FAILED, f"The provider answered with unexpected HTTP status {status}.", status)


def error_from_event(payload: Any) -> ProviderError:
    """The normalized error of an ``error`` object inside a stream or a 200 body."""
    if says_context_length(payload):
        return context_length_error(payload)
    error = _error_object(payload)
    for key in ("type", "code"):
        value = error.get(key)
        if isinstance(value, str) and value in _TYPE_CODES:
            code, retryable = _TYPE_CODES[value]
            return ProviderError(code, MESSAGES[code], retryable=retryable)
    return ProviderError(GENERATION_FAILED, "The provider reported an error while generating the reply.")


def error_from_transport(exc: httpx.RequestError | httpx.InvalidURL) -> ProviderError:
    """Timeouts, refused connections and broken streams."""
    kind = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        # N5: a request that reached the provider (read or write timeout) may be running and billed there:
        # it is never sent again. One that never left (connect, pool) is retried.
        unsent = isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
        phase = "connect to" if unsent else "get an answer from"
        return ProviderError(PROVIDER_TIMEOUT, f"Timed out trying to {phase} the provider.", retryable=unsent)
    if isinstance(exc, httpx.ConnectError):
        return connect_error(exc)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return ProviderError(PROVIDER_UNAVAILABLE, "The connection to the provider broke off.", retryable=True)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderError(PROVIDER_BAD_REQUEST, "The provider's base URL is not a valid http(s) URL.")
    if isinstance(exc, httpx.DecodingError):
        return malformed()
    return ProviderError(PROVIDER_UNAVAILABLE, f"The provider could not be reached ({kind}).", retryable=True)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it was raised from (httpx -> httpcore -> the socket's ``OSError``; anyio's group of
    attempts), each once."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def connect_error(exc: BaseException) -> ProviderError:
    """A connection that could not be made, by its cause: a failed TLS handshake, an unknown host (DNS), a refused
    connection, or else ``PROVIDER_UNAVAILABLE``. Told by the socket's own error (its type, never its text); TLS
    first, as its errors are ``OSError``s too. TLS is not retried: a certificate, or a plain-HTTP port, answers the
    same a moment later. A refused connection is (a local server may be starting), and so is DNS (it may be slow)."""
    causes = list(_causes(exc))
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        return ProviderError(PROVIDER_TLS_FAILED, MESSAGES[PROVIDER_TLS_FAILED])
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return ProviderError(PROVIDER_DNS_FAILED, MESSAGES[PROVIDER_DNS_FAILED], retryable=True)
    if any(isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED for cause in causes):
        return ProviderError(PROVIDER_CONNECTION_REFUSED, MESSAGES[PROVIDER_CONNECTION_REFUSED], retryable=True)
    return ProviderError(PROVIDER_UNAVAILABLE, "Could not connect to the provider.", retryable=True)


def malformed(what: str = "reply") -> ProviderError:
    """A 2xx answer we could not make sense of."""
    return ProviderError(GENERATION_FAILED, f"The provider's {what} could not be read.")


def empty_stream() -> ProviderError:
    """A 200 stream that ended without a single event (no chunk, no ``[DONE]``).

    llama-cpp-python answers an overflowing streamed prompt this way, while the same prompt without streaming
    gets a context-length error; so it is reported as ``PROVIDER_CONTEXT_LENGTH`` (a probable overflow), for
    the context-length recovery to handle. It is not retried as is.
    """
    return ProviderError(
        PROVIDER_CONTEXT_LENGTH,
        "The provider's stream ended without any event; the prompt probably exceeds the model's context window.",
    )


def truncated() -> ProviderError:
    """A stream that ended (cleanly) before the provider said the reply was finished."""
    return ProviderError(GENERATION_FAILED, "The provider's stream ended before the reply was finished.")
