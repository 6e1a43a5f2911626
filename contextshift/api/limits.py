"""Request limits (N1, N5).

- A request body over ``max_body_bytes`` gets 413 ``PAYLOAD_TOO_LARGE`` before the body is read: a
  ``Content-Length`` over the limit is refused before anything else runs; a body sent without one (chunked)
  is counted as it streams in and refused at the first chunk that passes the limit (``BodyTooLarge``, an
  HTTP exception the error handlers give the usual envelope). FastAPI's own ``max_body_size`` is not used:
  Starlette's limiter replaces every answer to an over-long request with a plain-text one.
- A request line and headers over ``MAX_HEAD_BYTES`` get 431 ``REQUEST_HEADERS_TOO_LARGE``.
- A path or query string with NUL or another control character answers 404 ``NOT_FOUND`` on every backend:
  no stored id can hold one (ids are hex; the query strings hold id filters, numbers and flags), and
  PostgreSQL cannot even compare such a string.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The default limit of a request body: 8 MiB. ``CONTEXTSHIFT_MAX_BODY_BYTES`` changes it.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_BODY_ENV = "CONTEXTSHIFT_MAX_BODY_BYTES"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
#: The largest request line and headers: h11's own limit of a head that arrives in pieces, which uvicorn uses
#: (api/protocol.py answers that one); a head that arrives whole is measured here, so both answer 431 alike.
MAX_HEAD_BYTES = 16 * 1024

#: C0 controls and DEL: never part of an id or a sensible query value.
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")


def max_body_bytes_from_env() -> int:
    """``CONTEXTSHIFT_MAX_BODY_BYTES`` (a positive integer), else :data:`DEFAULT_MAX_BODY_BYTES`."""
    raw = os.environ.get(MAX_BODY_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BODY_BYTES
    value = int(raw)
    if value < 1:
        raise ValueError(f"{MAX_BODY_ENV} must be a positive number of bytes")
    return value


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail="Content Too Large")
        self.limit = limit


def too_large_body(limit: int | None) -> tuple[str, dict[str, Any]]:
    """The message and params of a 413 ``PAYLOAD_TOO_LARGE``."""
    if limit is None:
        return "The request body is too large.", {}
    return f"The request body is larger than the limit of {limit} bytes.", {"limit": limit}


async def _answer(
    send: Send, status: int, code: str, message: str, params: dict[str, Any] | None = None, *, close: bool = False
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "params": params or {}}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the unread body is not waited for
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _has_control(raw: bytes) -> bool:
    return _CONTROL.search(unquote_to_bytes(raw)) is not None


class RequestLimits:
    """ASGI middleware: 413 for a declared ``Content-Length`` over ``max_body_bytes``, 404 for a path or a
    query string with a control character."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
            if (
                _has_control(raw_path)
                or _CONTROL.search(scope["path"].encode("utf-8", "surrogateescape"))
                or _has_control(scope.get("query_string", b"").replace(b"+", b" "))
            ):
                await _answer(send, 404, "NOT_FOUND", "No object has an id with a control character.")
                return
            headers = scope.get("headers", ())
            if len(raw_path) + len(scope.get("query_string", b"")) + sum(len(n) + len(v) for n, v in headers) > (
                MAX_HEAD_BYTES
            ):
                message = "The request line and headers are larger than this server reads."
                await _answer(send, 431, "REQUEST_HEADERS_TOO_LARGE", message, {"limit": MAX_HEAD_BYTES}, close=True)
                return
            for name, value in headers:
                if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                    message, params = too_large_body(self.max_body_bytes)
                    await _answer(send, 413, PAYLOAD_TOO_LARGE, message, params, close=True)
                    return
            await self.app(scope, self._counted(receive), send)
            return
        await self.app(scope, receive, send)

    def _counted(self, receive: Receive) -> Receive:
        limit = self.max_body_bytes
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        return counted_receive
